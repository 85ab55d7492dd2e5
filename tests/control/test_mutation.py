"""Mutation testing in CI: a bounded, deterministic mutmut run over four of the thirteen modules
of runner/control (``CI_MODULES`` in tests/control/mutation.py: the stopping rules, guards,
ledger and result). Every mutant must be killed, or
be one of the survivors explained below (equivalent mutants: the change cannot alter
behaviour)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.control.mutation import CI_MODULES, run_bounded

# name -> why it survives (an equivalent mutant), reviewed by hand
EXPLAINED: dict[str, str] = {}


def test_bounded_mutation_run_kills_every_unexplained_mutant(tmp_path: Path) -> None:
    summary = run_bounded(tmp_path / "repo")
    assert summary["not_run"] == 0 and summary["total"] > 100, summary
    unexplained = [m for m in summary["survivors"] if m not in EXPLAINED]
    assert not unexplained, (f"{len(unexplained)} mutants of {CI_MODULES} survived "
                             f"(score {summary['score']}): {unexplained}")


def test_a_hanging_test_under_a_mutant_ends_as_killed(tmp_path: Path) -> None:
    """A mutant that turns a wait into a long sleep uses no CPU, so mutmut's own timeout never
    ends it; the control tests' conftest gives each test a wall-clock limit while a mutant is
    under test, and the test process then exits 1, which mutmut records as killed."""
    shutil.copy2(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_hang.py").write_text("import time\n\n"
                                           "def test_hang() -> None:\n    time.sleep(120)\n")
    env = {**os.environ, "MUTANT_UNDER_TEST": "runner.control._x.x_f__mutmut_1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=100)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Timeout" in done.stdout + done.stderr
