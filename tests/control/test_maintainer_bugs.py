"""The nine single-line maintainer bugs of tests/control/maintainer_bugs.py: the bundled evals
catch at least seven (today all nine), each by the case written for its class. Before the
cases of issue 38 they caught three (B1, B2, B9)."""

from __future__ import annotations

import pytest

from runner.control import run_evals
from tests.control.maintainer_bugs import BUGS, REQUIRED, Bug, applied, compile_bug

# bug -> a bundled case that must fail with it (docs/control.md lists the same)
CAUGHT_BY = {
    "B1": "goal_met_spend_settled",
    "B2": "policy_block_tool_name_case",
    "B3": "time_budget_exactly_at_the_deadline",
    "B4": "policy_block_kill_switch_engaged_mid_run",
    "B5": "goal_met_two_writes_two_keys",
    "B6": "time_budget_exactly_at_the_deadline",
    "B7": "needs_human_handoff_asks_the_policy_question",
    "B8": "goal_met_calibrated_confidence_stops_early",
    "B9": "token_budget_daily_ceiling_spent_exactly",
}


def test_the_unmutated_package_passes_the_bundled_evals() -> None:
    assert run_evals().ok


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.ident)
def test_the_bundled_evals_catch_the_bug(bug: Bug) -> None:
    module, live, code = compile_bug(bug)
    with applied(module, live, code):
        report = run_evals()
    failed = {r.case_id for r in report.results if not r.passed}
    assert CAUGHT_BY[bug.ident] in failed, (bug.ident, sorted(failed))
    assert run_evals().ok  # the bug is gone again


def test_at_least_seven_of_the_nine_are_required() -> None:
    assert len(BUGS) == 9 and REQUIRED == 7 and set(CAUGHT_BY) == {b.ident for b in BUGS}
