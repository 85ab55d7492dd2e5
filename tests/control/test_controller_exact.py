"""Exact behaviour of RunController's smaller entry points (charge, halt, reopen, crashed tools,
interruptions, the validate contract in the step API), pinned against surviving mutants."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.control import (
    Budget,
    Escalate,
    Finish,
    KillSwitch,
    KillSwitchEngaged,
    RunController,
    RunState,
    StopReason,
    ToolCall,
    ToolResult,
)
from tests.control.conftest import script

R = StopReason


def ctl(**kw: object) -> RunController:
    return RunController(Budget(max_steps=5, max_tokens=100, max_cost_usd=1.0),
                         validate=lambda s, o: True, **kw)  # type: ignore[arg-type]


def test_charge_accumulates_and_checks_the_ceilings() -> None:
    c = ctl()
    state = c.start("t")
    c.check_before_model(state)
    assert c.charge(state, tokens=0, cost_usd=0.0) is None  # a free judge is fine
    assert c.charge(state, tokens=10, cost_usd=0.25) is None
    assert c.charge(state, tokens=5, cost_usd=0.25) is None
    assert (state.tokens, state.cost_usd) == (15, 0.5)
    stop = c.charge(state, cost_usd=0.6)
    assert stop is not None and stop.reason is R.TOKEN_BUDGET and stop.kind == "MaxCost"
    with pytest.raises(RuntimeError):
        c.charge(state, tokens=1)
    fresh = c.start("t")
    for bad in ({"tokens": -1}, {"cost_usd": -0.1}):
        with pytest.raises(ValueError) as e:
            c.charge(fresh, **bad)  # type: ignore[arg-type]
        assert str(e.value) == "tokens and cost must be >= 0"


def test_halt_records_the_callers_stop() -> None:
    c = ctl()
    state = c.start("t")
    state.step = 3
    stop = c.halt(state, "no_progress", "judge says stuck", question="retry?")
    assert stop.reason is R.NO_PROGRESS and stop.detail == "judge says stuck"
    assert stop.step == 3 and stop.question == "retry?" and stop.condition.name == "caller"
    named = c.halt(c.start("t"), R.NEEDS_HUMAN, "d", name="critic")
    assert named.condition.name == "critic" and named.question is None
    with pytest.raises(ValueError) as e:
        c.halt(c.start("t"), R.GOAL_MET, "done")
    assert str(e.value) == "halt cannot end a run with goal_met"


def test_reopen_only_a_needs_human_run_and_not_under_the_kill_switch(tmp_path: Path) -> None:
    flag = tmp_path / "STOP"
    c = ctl(kill_switch=KillSwitch(disable_file=flag))
    state = c.start("t")
    with pytest.raises(ValueError) as e:
        c.reopen(state)
    assert str(e.value) == "only a needs_human run can be resumed, this one is still running"
    c.halt(state, R.TOOL_ERROR, "x")
    with pytest.raises(ValueError) as e:
        c.reopen(state)
    assert str(e.value) == "only a needs_human run can be resumed, this one ended tool_error"
    waiting = c.start("t")
    c.check_before_model(waiting)
    c.on_action(waiting, Escalate("ok?"))
    flag.touch()
    with pytest.raises(KillSwitchEngaged) as ks:
        c.reopen(waiting)
    assert str(ks.value) == f"kill switch engaged: {flag} exists"
    flag.unlink()
    again = c.reopen(waiting, approvals={"refund"}, answer="yes, go ahead")
    assert again is waiting and waiting.stop is None and waiting._output is None
    assert waiting.approvals == frozenset({"refund"})
    assert c.check_before_model(waiting) is None
    assert waiting.directive is not None and waiting.directive.notes == ("A person answered: yes, go ahead",)


def test_a_crashing_tool_is_fatal_at_once() -> None:
    def boom(call: ToolCall) -> ToolResult:
        raise OSError("disk gone\nmore")

    res = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: True).run(
        "t", script(ToolCall("x")), boom)
    assert res.reason is R.TOOL_ERROR and res.tool_calls == 1
    assert res.stop.detail == "x failed fatally: OSError: disk gone"
    assert res.trace[0].result is not None and res.trace[0].result.fatal is True


def test_interrupted_runs_say_how() -> None:
    def ctrl_c(call: ToolCall) -> ToolResult:
        raise KeyboardInterrupt

    res = ctl().run("t", script(ToolCall("x")), ctrl_c)
    assert res.stop.detail == "interrupted by Ctrl-C" and res.stop.condition.name == "interrupted[ctrl-c]"
    assert res.stop.step == 1
    assert res.stop.question == "The run was interrupted: resume it from the handoff, or close it?"


def test_step_api_validate_contract_and_checks() -> None:
    none_check = RunController(Budget(max_steps=3, max_tokens=10), validate=lambda s, o: None)  # type: ignore[arg-type,return-value]
    state = none_check.start("t")
    stop = none_check.on_finish(state, Finish(1))
    assert stop is not None and stop.reason is R.INTERNAL_ERROR
    assert stop.detail == "validate must return bool or PredicateReport, got NoneType"
    assert stop.condition.name == "contract[validate]" and state.proposal is None

    async def later(s: RunState, o: object) -> bool:
        return True

    async_check = RunController(Budget(max_steps=3, max_tokens=10), validate=later)
    with pytest.raises(TypeError) as e:
        async_check.on_finish(async_check.start("t"), Finish(1))
    assert str(e.value) == "validate is async: use arun(), or pass report= to on_finish"
    # a report given by the caller wins over validate
    seen: list[object] = []
    caller = RunController(Budget(max_steps=3, max_tokens=10),
                           validate=lambda s, o: seen.append(o) or True)  # type: ignore[func-returns-value]
    s2 = caller.start("t")
    assert caller.on_finish(s2, Finish(2), report=False) is None and seen == []
    # validate sees the proposal while it checks
    proposals: list[object] = []
    watcher = RunController(Budget(max_steps=3, max_tokens=10),
                            validate=lambda s, o: proposals.append(s.proposal) or True)  # type: ignore[func-returns-value]
    s3 = watcher.start("t")
    assert watcher.on_finish(s3, Finish({"v": 3})) is not None and proposals == [{"v": 3}]


# -- user code that fails or breaks its contract: the exact stop a person reads ------------------
QUESTION = "User code failed or broke its contract: fix it, then retry the run?"


def test_decide_returning_a_non_action_is_a_typed_contract_stop() -> None:
    res = ctl().run("t", lambda s: 5, lambda call: ToolResult.success())  # type: ignore[arg-type,return-value]
    assert res.stop.to_json() == {
        "reason": "internal_error", "condition": {"type": "ContractViolation",
                                                  "name": "contract[decide]"},
        "detail": "decide must return an Action or Turn, got int", "step": 0, "question": QUESTION}
    assert res.handoff is not None and res.handoff.question == QUESTION


def test_a_crash_is_reported_by_its_first_line_or_its_type_alone() -> None:
    def boom(state: RunState) -> Finish:
        raise ValueError("bad\nsecond line")

    def bare(state: RunState) -> Finish:
        raise KeyError

    res = ctl().run("t", boom, lambda call: ToolResult.success())
    assert res.stop.to_json()["condition"] == {"type": "UserCodeError", "name": "user_code[decide]"}
    assert res.stop.detail == "decide raised ValueError: bad"
    assert ctl().run("t", bare, lambda call: ToolResult.success()).stop.detail == "decide raised KeyError"


def test_a_failing_finish_check_is_an_internal_error_named_by_its_error() -> None:
    def silent(state: RunState, output: object) -> bool:
        raise ValueError

    def loud(state: RunState, output: object) -> bool:
        raise ValueError("no\nmore")

    for validate, detail in ((silent, "validate raised ValueError"),
                             (loud, "validate raised ValueError: no")):
        c = RunController(Budget(max_steps=2, max_tokens=100), validate=validate)
        res = c.run("t", script(Finish(1)), lambda call: ToolResult.success())
        assert (res.reason, res.stop.detail, res.trace) == ("internal_error", detail, ())


def test_the_finish_being_checked_is_the_proposal_the_validator_sees() -> None:
    seen: list[object] = []

    def validate(state: RunState, output: object) -> bool:
        seen.append(state.proposal)
        return output == {"v": 1}

    res = RunController(Budget(max_steps=3, max_tokens=100), validate=validate).run(
        "t", script(Finish({"v": 0}), Finish({"v": 1})), lambda call: ToolResult.success())
    assert res.completed and seen == [{"v": 0}, {"v": 1}]


def test_charge_defaults_to_nothing_and_raises_the_cost_alert() -> None:
    alerts: list[object] = []
    ks = KillSwitch(cost_alert_usd=0.5, on_cost_alert=alerts.append)
    c = ctl(kill_switch=ks)
    state = c.start("t")
    c.check_before_model(state)
    assert c.charge(state) is None and (state.tokens, state.cost_usd) == (0, 0.0)
    c.charge(state, cost_usd=0.75)
    assert [(a.run_id, a.cost_usd, a.threshold_usd) for a in alerts] == [  # type: ignore[attr-defined]
        (state.run_id, 0.75, 0.5)]


def test_arun_starts_the_run_it_was_given_and_threads_sync_code_under_a_deadline() -> None:
    import threading

    import anyio

    where: list[bool] = []

    def decide(state: RunState) -> Finish:
        where.append(threading.current_thread() is threading.main_thread())
        return Finish(state.data["v"])

    async def main(budget: Budget) -> object:
        c = RunController(budget, validate=lambda s, o: o == 1)
        return await c.arun("the task", decide, lambda call: ToolResult.success(),
                            run_id="a-1", data={"v": 1})

    res = anyio.run(main, Budget(max_steps=3, max_tokens=100, max_seconds=60))
    assert (res.run_id, res.output, res.data) == ("a-1", 1, {"v": 1})  # type: ignore[attr-defined]
    assert res.to_json()["task"] == "the task"  # type: ignore[attr-defined]
    assert where == [False]  # a deadline can only cancel sync code run in a worker thread
    anyio.run(main, Budget(max_steps=3, max_tokens=100))
    assert where == [False, True]  # no deadline: no thread needed


def test_finish_checks_see_the_proposal_then_clear_it_and_name_every_missing_detail() -> None:
    from runner.control import PredicateReport, StoppingRule

    seen: list[object] = []

    def judge(s: RunState) -> PredicateReport:
        seen.append(s.proposal)
        return PredicateReport(missing=("b",), detail="rule says b")

    c = RunController(Budget(max_steps=5, max_tokens=100), rules=[StoppingRule("r", evaluate=judge)])
    state = c.start("t")
    c.check_before_model(state)
    out = c.on_finish(state, Finish({"v": 1}), report=PredicateReport(missing=("a",), detail="no a"))
    assert out is None and seen == [None, {"v": 1}] and state.proposal is None  # before, at the finish
    assert state.trace[-1].note == "missing b, a (rule says b; no a)"
    c.check_before_model(state)  # the next model call is told why
    assert state.directive is not None
    assert state.directive.notes == ("Your finish was not accepted: rule says b; no a.",)
    bad = c.start("t")
    c.check_before_model(bad)
    stop = c.on_finish(bad, Finish(1), report=5)  # type: ignore[arg-type]
    assert stop is not None and stop.reason is R.INTERNAL_ERROR and bad.proposal is None
    with pytest.raises(ValueError) as e:
        unchecked = RunController(Budget(max_steps=5, max_tokens=100))
        s = unchecked.start("t")
        unchecked.check_before_model(s)
        unchecked.on_finish(s, Finish(1))
    assert str(e.value) == "no finish check: configure rules= or validate=, or pass report="


def test_a_check_asking_for_a_human_names_itself_and_the_step() -> None:
    from runner.control import PredicateReport, StoppingRule

    rule = StoppingRule("verifier", evaluate=lambda s: PredicateReport(escalate="Which one?"))
    c = RunController(Budget(max_steps=5, max_tokens=100), rules=[rule])
    res = c.run("t", script(ToolCall("get"), Finish(1)), lambda call: ToolResult.success({}))
    assert (res.stop.reason, res.stop.detail, res.stop.step, res.stop.question) == (
        R.NEEDS_HUMAN, "verifier asked for a human", res.steps, "Which one?")
    ok = ctl().run("t", script(ToolCall("get"), Finish(1)), lambda call: ToolResult.success({}))
    assert (ok.stop.detail, ok.stop.step) == ("the finish passed every check", 2)


def test_a_check_that_asks_for_a_human_at_the_finish_names_itself_and_the_step() -> None:
    from runner.control import PredicateReport, StoppingRule

    def judge(s: RunState) -> PredicateReport:
        if s.proposal is None:
            return PredicateReport(missing=("v",))
        return PredicateReport(escalate="Is this right?")

    c = RunController(Budget(max_steps=5, max_tokens=100), rules=[StoppingRule("critic", evaluate=judge)])
    res = c.run("t", script(ToolCall("get"), Finish(1)), lambda call: ToolResult.success({}))
    assert res.stop.to_json() == {
        "reason": "needs_human", "condition": {"type": "StoppingRule", "name": "critic"},
        "detail": "critic asked for a human", "step": 2, "question": "Is this right?"}
