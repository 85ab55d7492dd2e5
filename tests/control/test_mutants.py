"""The nine deliberate controller bugs M1-M9 (tests/control/mutants) are each killed by the
bundled eval suite AND by the unit tests; the unmutated controller passes both."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.control import run_evals
from tests.control.mutants import MUTANTS, apply

REPO = Path(__file__).resolve().parents[2]
# the controller's unit tests, grouped by behaviour (what the first regression suite checked is
# now spread over budgets, deadlines, ceilings, exits, the kill switch and idempotency)
UNIT_TESTS = [f"tests/control/{name}.py" for name in (
    "test_stop_reasons", "test_step_api", "test_guards", "test_progress_and_rules",
    "test_budget", "test_conditions", "test_deadlines", "test_killswitch", "test_ceilings",
    "test_exits", "test_idempotency", "test_calibration")]


def test_unmutated_controller_passes_the_bundled_evals() -> None:
    assert run_evals().ok


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_bundled_evals_kill_the_mutant(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(name, monkeypatch)
    report = run_evals()
    failed = [r.failure_line() for r in report.results if not r.passed]
    assert failed, f"{name} survived the bundled evals"


def _unit_tests_under(name: str) -> subprocess.CompletedProcess[str]:
    """The controller's unit tests (not the evals or their tests) in a child with the mutant on."""
    env = {**os.environ, "ECT_MUTANT": name}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "-p", "tests.control.mutants.plugin", *UNIT_TESTS, "-k", "not processes"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def unit_test_runs(request: pytest.FixtureRequest) -> dict[str, subprocess.CompletedProcess[str]]:
    """The child test runs of the mutants this session selected, two at a time: each child is
    its own process with its own mutant, and one of them mostly keeps one core busy (pytest's
    start-up and collection), so one after another the second core sat idle."""
    wanted = [item.callspec.params["name"] for item in request.session.items
              if getattr(item, "originalname", None) == "test_unit_tests_kill_the_mutant"]
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(_unit_tests_under, name) for name in wanted}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_unit_tests_kill_the_mutant(
        name: str, unit_test_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    """Run the controller's unit tests (not the evals or their tests) in a child with the
    mutant on; it must fail."""
    proc = unit_test_runs[name]
    assert proc.returncode == 1, f"{name} survived the unit tests:\n{proc.stdout[-2000:]}"
