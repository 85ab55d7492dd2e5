"""Build step: map the study's data into the wheel (the configuration is in pyproject.toml).

The repository keeps ``schedules/``, ``sandbox_profiles/`` (with both seccomp BPF programs) and
``preflight/`` at its top level; a wheel carries them as ``runner/_study/`` (found through
``importlib.resources``, see ``runner/_data.py``) together with a copy of the pinned sandbox
worker, so ``runner/_study`` is the whole policy tree ``sandbox_profiles/PINS`` names. An
editable install reads the checkout's folders and copies nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_DIRS = ("schedules", "sandbox_profiles", "preflight")
WORKER = "runner/sandbox/_worker.py"  # pinned in sandbox_profiles/PINS by this path
HERE = Path(__file__).resolve().parent


class BuildWithStudyData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib, "runner", "_study")
        if target.exists():
            shutil.rmtree(target)
        for name in DATA_DIRS:
            shutil.copytree(HERE / name, target / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (target / WORKER).parent.mkdir(parents=True)
        shutil.copy2(HERE / WORKER, target / WORKER)


setup(cmdclass={"build_py": BuildWithStudyData})
