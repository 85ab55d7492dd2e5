"""Every benchmark still runs: each ``benchmarks/*.py`` has a ``--smoke`` mode (a tiny workload,
seconds) that this test runs to the end, as ``make bench`` would run the real one.

Before, a benchmark broken by a library change (two raised after the typed-API change) was seen
only by whoever next ran ``make bench``. Nothing here measures or asserts a time: a smoke run
checks that the benchmark imports, drives the code it measures and prints its headline
(``<name>: ...``, the line ``make bench`` collects), whatever the machine's load.
``mypy --strict`` covers ``benchmarks/`` too (``make check``, pyproject's ``[tool.mypy]``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_"))


def test_the_benchmarks_are_found() -> None:
    assert len(BENCHMARKS) >= 11, BENCHMARKS


def test_mypy_checks_the_benchmarks() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert "benchmarks" in config["tool"]["mypy"]["files"]
    assert config["tool"]["mypy"]["strict"] is True


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_runs_to_its_headline_in_smoke_mode(name: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    r = subprocess.run([sys.executable, "-u", str(ROOT / "benchmarks" / f"{name}.py"), "--smoke"],
                       capture_output=True, text=True, cwd=ROOT, env=env, check=False,
                       timeout=900)
    assert r.returncode == 0, f"{name} --smoke exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    lines = r.stdout.strip().splitlines()
    assert lines, f"{name} --smoke printed nothing"
    assert lines[-1].startswith(f"{name}: "), f"headline of {name}: {lines[-1]!r}"
