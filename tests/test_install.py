"""`make demo` / `make test` install into a project-local venv, never the system interpreter.

Debian 12+ and Ubuntu 23.04+ mark their python3 as externally managed (PEP 668): a plain
`python3 -m pip install` there fails. These tests read what make would run (`make -n`); the
end-to-end proof is `.ci/run` on a fresh machine (README: the timings were measured so).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _dry_run(target: str, venv: Path) -> list[str]:
    proc = subprocess.run(["make", "-n", "-B", target, f"VENV={venv}", "PY=/usr/bin/python3"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout.splitlines()


def _pip_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if " -m pip " in line]


@pytest.mark.parametrize("target", ["demo", "test", "test-slow", "check", "bench"])
def test_every_target_works_in_the_project_venv(target: str, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    lines = _dry_run(target, venv)
    text = "\n".join(lines)
    assert f"/usr/bin/python3 -m venv {venv}" in text
    assert "--break-system-packages" not in text
    assert "python3-venv" in text  # installed when the interpreter cannot make a venv
    pips = _pip_lines(lines)
    assert pips and all(line.startswith(f"{venv}/bin/python -m pip install") for line in pips)
    # nothing runs on the system interpreter but `-m venv` and the venv-capability probe
    for line in lines:
        for python in re.findall(r"(\S*python3?)\s+-[mc]", line):
            assert python.startswith(str(venv)) or python == "/usr/bin/python3", line
        if line.startswith("/usr/bin/python3 -m"):
            assert line.startswith("/usr/bin/python3 -m venv"), line


def test_demo_installs_only_what_it_runs(tmp_path: Path) -> None:
    # the runtime dependencies and the viewer the demo's last line points to; no test tools
    venv = tmp_path / "venv"
    lines = _dry_run("demo", venv)
    pips = _pip_lines(lines)
    assert len(pips) == 1 and pips[0].endswith(" install --progress-bar off -e '.[view]'")
    assert f"{venv}/bin/python -m runner demo" in lines


def test_test_installs_the_test_extra(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    lines = _dry_run("test", venv)
    assert any(line.endswith("-e '.[view,test]'") for line in _pip_lines(lines))
    assert f"{venv}/bin/python -m pytest -q" in lines


def test_ci_runs_the_readme_test_command_with_the_distribution_interpreter() -> None:
    ci = (REPO / ".ci" / "run").read_text("utf-8")
    assert re.search(r"^make test PY=/usr/bin/python3$", ci, re.M)
    assert ".venv/" in (REPO / ".gitignore").read_text("utf-8").splitlines()
    readme = (REPO / "README.md").read_text("utf-8")
    assert ".venv/bin/ect" in readme and "source .venv/bin/activate" in readme
