"""Model usage outside the agent's own decisions (a critic, a judge) counts against the budget."""

from __future__ import annotations

import pytest

from runner.control import Budget, Finish, RunController, StopReason, VerdictKind


def _controller() -> RunController:
    return RunController(Budget(max_steps=4, max_tokens=1_000), validate=lambda s, o: True)


def test_charge_under_the_ceiling_changes_nothing_but_the_count() -> None:
    ctl = _controller()
    state = ctl.start("task")
    assert ctl.charge(state, tokens=400) is None
    assert state.tokens == 400 and state.stop is None


def test_a_charge_over_the_ceiling_ends_token_budget_even_after_an_accepted_finish() -> None:
    ctl = _controller()
    state = ctl.start("task")
    verdict = ctl.on_action(state, Finish("answer"), tokens=600)
    assert verdict.kind is VerdictKind.CHECK_FINISH
    stop = ctl.charge(state, tokens=500)  # the judge's own call
    assert stop is not None and stop.reason is StopReason.TOKEN_BUDGET
    result = ctl.result(state)
    assert result.reason is StopReason.TOKEN_BUDGET and not result.completed


def test_charge_refuses_negative_usage_and_a_stopped_run() -> None:
    ctl = _controller()
    state = ctl.start("task")
    with pytest.raises(ValueError):
        ctl.charge(state, tokens=-1)
    ctl.charge(state, tokens=2_000)
    with pytest.raises(RuntimeError):
        ctl.charge(state, tokens=1)
