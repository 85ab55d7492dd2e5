"""Every exit is typed: user code that raises or breaks its contract (decide, a guard rule,
validate, a rule's evaluator, a cost alert, reported usage), Ctrl-C, SIGTERM and outside
cancellation, async callables given to ``run``; and RunController's smaller entry points
(charge, halt, reopen, crashed tools, the validate contract in the step API), pinned exactly."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.control import (
    Budget,
    CostAlert,
    Escalate,
    ExternalStop,
    Finish,
    Guard,
    KillSwitch,
    KillSwitchEngaged,
    RunController,
    RunResult,
    RunState,
    Stop,
    StopCondition,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
    Turn,
)
from runner.control._types import Checkpoint
from tests.control.conftest import script, tools
from tests.control.helpers_pay_processes import _BAD_TURNS, _day_switch
from tests.control.helpers_pay_retry import _CHILD, REPO
from tests.control.helpers_runs import ok

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


# -- outside cancellation -------------------------------------------------------------------------
def test_outside_cancellation_delivers_a_typed_result_then_propagates() -> None:
    seen: list[RunResult[Any]] = []
    started = anyio.Event()

    async def execute(call: ToolCall) -> ToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    ctl = RunController(Budget(max_steps=3, max_tokens=100), validate=lambda s, o: True)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            async def go() -> None:
                await ctl.arun("t", script(ToolCall("t")), execute, on_stop=seen.append)

            tg.start_soon(go)
            await started.wait()
            tg.cancel_scope.cancel()

    anyio.run(main)
    (result,) = seen
    assert result.reason is StopReason.INTERNAL_ERROR and result.stop.kind == "Interrupted"
    assert result.stop.detail == "cancelled from outside"
    assert result.stop.condition.name == "interrupted[cancelled]"
    assert result.handoff is not None and result.handoff.question == (
        "The run was interrupted: resume it from the handoff, or close it?")


# -- 5. exactly one typed stop, even when user code fails ------------------------------------------
def test_exception_in_decide_is_a_typed_stop() -> None:
    def decide(state: RunState) -> ToolCall:
        raise KeyError("model client broke")

    result = RunController(Budget(max_steps=3, max_tokens=100), validate=ok).run(
        "t", decide, tools({}))
    assert result.reason is StopReason.INTERNAL_ERROR
    assert "decide raised KeyError" in result.stop.detail
    assert result.handoff is not None


def test_exception_in_a_guard_rule_is_a_typed_stop() -> None:
    def rule(call: ToolCall, state: RunState) -> None:
        raise RuntimeError("policy service down")

    guard = Guard(allow={"t"}, rules=(rule,))
    result = RunController(Budget(max_steps=3, max_tokens=100), guard=guard, validate=ok).run(
        "t", script(ToolCall("t")), tools({"t": ToolResult.success(1)}))
    assert result.reason is StopReason.INTERNAL_ERROR
    assert "RuntimeError" in result.stop.detail


def test_validate_returning_a_number_is_a_clear_contract_error() -> None:
    result = RunController(Budget(max_steps=3, max_tokens=100), validate=lambda s, o: 5).run(
        "t", script(Finish("x")), tools({}))  # type: ignore[arg-type,return-value]
    assert result.reason is StopReason.INTERNAL_ERROR
    assert result.stop.detail == "validate must return bool or PredicateReport, got int"


def test_validate_returning_none_is_called_once_with_a_clear_error() -> None:
    calls: list[int] = []

    def validate(state: RunState, out: Any) -> None:
        calls.append(1)

    result = RunController(Budget(max_steps=3, max_tokens=100), validate=validate).run(  # type: ignore[arg-type]
        "t", script(Finish("x")), tools({}))
    assert calls == [1]
    assert result.reason is StopReason.INTERNAL_ERROR
    assert result.stop.detail == "validate must return bool or PredicateReport, got NoneType"


def test_ctrl_c_is_a_typed_stop_with_a_handoff() -> None:
    def execute(call: ToolCall) -> ToolResult:
        raise KeyboardInterrupt

    result = RunController(Budget(max_steps=3, max_tokens=100), validate=ok).run(
        "t", script(ToolCall("t")), execute)
    assert result.reason is StopReason.INTERNAL_ERROR
    assert result.stop.kind == "Interrupted"
    assert result.handoff is not None


def test_stop_when_returning_goal_met_is_a_typed_stop_not_a_crash() -> None:
    class Done(StopCondition):
        name = "done"

        def check(self, point: Checkpoint) -> Stop | None:
            return self._stop(StopReason.GOAL_MET, point, "claims done")

    result = RunController(Budget(max_steps=3, max_tokens=100), validate=ok,
                           stop_when=Done()).run("t", script(Finish("x")), tools({}))
    assert result.reason is StopReason.INTERNAL_ERROR
    assert "goal_met" in result.stop.detail


def test_external_stop_is_refused_as_stop_when() -> None:
    with pytest.raises(TypeError, match="stop_when must be a StopCondition"):
        RunController(Budget(max_steps=3, max_tokens=100), validate=ok,
                      stop_when=ExternalStop("x"))  # type: ignore[arg-type]


@pytest.mark.child_process
@pytest.mark.parametrize("how", ["run", "arun"])
@pytest.mark.parametrize(("sig", "detail"), [("SIGINT", None), ("SIGTERM", "terminated by SIGTERM")])
def test_a_signal_under_a_deadline_ends_the_run_typed_and_settled(
        tmp_path: Path, how: str, sig: str, detail: str | None) -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "day.sqlite"), sig, how],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert (out["reason"], out["kind"], out["handoff"]) == ("internal_error", "Interrupted", True)
    if detail is not None:
        assert out["detail"] == detail
    elif how == "run":
        assert out["detail"] == "interrupted by Ctrl-C"
    # the lease is settled and the step's spend recorded
    assert out["usage"] == {"runs": 1, "spend_usd": 0.25, "reserved_usd": 0.0}


@pytest.mark.parametrize("timed", [False, True])
def test_a_crashing_validate_is_an_internal_error_naming_it(timed: bool) -> None:
    def validate(state: RunState, out: Any) -> bool:
        raise KeyError("revenue")

    ctl = RunController(Budget(max_steps=3, max_tokens=100, max_seconds=30 if timed else None),
                        validate=validate)
    res = ctl.run("t", script(Finish(1)), tools({}))
    assert (res.reason, res.stop.kind, res.stop.detail) == (
        StopReason.INTERNAL_ERROR, "UserCodeError", "validate raised KeyError: 'revenue'")


@pytest.mark.parametrize("timed", [False, True])
def test_run_refuses_every_async_callable_with_a_type_error(timed: bool) -> None:
    async def execute(call: ToolCall) -> ToolResult:
        return ToolResult.success({})

    async def validate(state: RunState, out: Any) -> bool:
        return True

    budget = Budget(max_steps=3, max_tokens=100, max_seconds=30 if timed else None)
    with pytest.raises(TypeError, match="execute is async"):
        RunController(budget, validate=lambda s, o: True).run("t", script(ToolCall("x")), execute)
    with pytest.raises(TypeError, match="validate is async"):
        RunController(budget, validate=validate).run("t", script(Finish(1)), tools({}))


def test_run_with_a_deadline_inside_an_event_loop_says_to_use_arun() -> None:
    ctl = RunController(Budget(max_steps=3, max_tokens=100, max_seconds=5),
                        validate=lambda s, o: True)

    async def inside() -> None:
        ctl.run("t", script(Finish(1)), tools({}))

    with pytest.raises(RuntimeError) as e:
        asyncio.run(inside())
    assert str(e.value) == ("run() with a deadline cannot be called inside a running event "
                            "loop: use `await controller.arun(...)` there")


def test_a_raising_cost_alert_ends_the_run_typed_and_settled(tmp_path: Path) -> None:
    """Defect 2: on_cost_alert was called outside the typed-stop handling: its exception left
    run() with no stop reason and no handoff."""
    def pager(alert: CostAlert) -> None:
        raise RuntimeError("pager is down")

    ks = _day_switch(tmp_path, cost_alert_usd=0.15, on_cost_alert=pager)
    ctl = RunController(Budget(max_steps=5, max_cost_usd=5.0), validate=lambda s, o: True,
                        kill_switch=ks)
    res = ctl.run("t", lambda s: Turn(ToolCall("t", {"n": s.step}), cost_usd=0.10),
                  lambda call: ToolResult.success({"x": 1}))
    assert (res.reason, res.stop.kind, res.stop.detail) == (
        StopReason.INTERNAL_ERROR, "UserCodeError", "on_cost_alert raised RuntimeError: pager is down")
    assert res.handoff is not None and res.steps == 2
    assert ks.usage() == {"runs": 1, "spend_usd": 0.2, "reserved_usd": 0.0}


@pytest.mark.parametrize("where", ["after_tool", "charge"])
def test_a_raising_cost_alert_in_the_step_api_ends_the_run_typed(where: str) -> None:
    def pager(alert: CostAlert) -> None:
        raise RuntimeError("pager is down")

    ks = KillSwitch(cost_alert_usd=0.15, on_cost_alert=pager)
    ctl = RunController(Budget(max_steps=5, max_cost_usd=5.0), validate=lambda s, o: True,
                        kill_switch=ks)
    state = ctl.start("t")
    ctl.check_before_model(state)
    ctl.on_action(state, Turn(ToolCall("t"), cost_usd=0.10))
    if where == "after_tool":
        stop = ctl.on_tool_result(state, ToolCall("t"), ToolResult.success(1, cost_usd=0.10))
    else:
        stop = ctl.charge(state, cost_usd=0.10)
    assert stop is not None and stop.kind == "UserCodeError"
    assert stop.detail == "on_cost_alert raised RuntimeError: pager is down"


@pytest.mark.parametrize("timed", [False, True])
@pytest.mark.parametrize(("bad", "detail"), _BAD_TURNS)
def test_an_invalid_usage_value_from_decide_ends_typed_naming_the_field(
        tmp_path: Path, bad: dict[str, Any], detail: str, timed: bool) -> None:
    """Defect 3: Turn(tokens=-5), cost_usd=NaN or inf escaped run() as ValueError or
    OverflowError; the value is refused (never counted) and the run ends internal_error."""
    ks = _day_switch(tmp_path)
    ctl = RunController(Budget(max_steps=5, max_cost_usd=5.0, max_seconds=60 if timed else None),
                        validate=lambda s, o: True, kill_switch=ks)
    usage = {"tokens": 10, "cost_usd": 0.25, **bad}
    res = ctl.run("t", lambda s: Turn(Finish(1), **usage) if s.step else  # type: ignore[arg-type]
                  Turn(ToolCall("t"), tokens=10, cost_usd=0.25),
                  lambda call: ToolResult.success({"x": 1}))
    assert (res.reason, res.stop.kind, res.stop.detail) == (
        StopReason.INTERNAL_ERROR, "ContractViolation", detail)
    assert res.stop.condition.name == "contract[decide]" and res.handoff is not None
    refused_cost = "cost_usd" in bad
    assert res.cost_usd == (0.25 if refused_cost else 0.5)  # the valid figure is counted
    assert res.tokens == (10 if "tokens" in bad else 20)
    assert ks.usage() == {"runs": 1, "spend_usd": res.cost_usd, "reserved_usd": 0.0}


@pytest.mark.parametrize("cost", [math.nan, math.inf, -0.1, "0.1"])
def test_an_invalid_tool_cost_ends_typed_and_is_never_credited(tmp_path: Path,
                                                               cost: Any) -> None:
    """Defects 3 and 4: a tool result with cost NaN raised out of run(); a negative tool cost
    bought budget back ($2.00 spent under a $0.30 ceiling, $0.00 recorded for the day)."""
    ks = _day_switch(tmp_path)
    ctl = RunController(Budget(max_steps=20, max_cost_usd=0.30,
                               tool_limits=ToolLimits(default=20)),
                        validate=lambda s, o: False, kill_switch=ks)
    res = ctl.run("t", lambda s: Turn(ToolCall("t", {"n": s.step}), cost_usd=0.10),
                  lambda call: ToolResult(True, {"x": 1}, cost_usd=cost))
    assert (res.reason, res.stop.kind, res.steps, res.cost_usd) == (
        StopReason.INTERNAL_ERROR, "ContractViolation", 1, 0.1)
    assert res.stop.detail == (f"execute returned ToolResult.cost_usd={cost!r}: it must be a "
                               "finite number >= 0")
    assert ks.usage() == {"runs": 1, "spend_usd": 0.1, "reserved_usd": 0.0}
    assert [r.kind for r in res.trace] == ["tool"]  # the call's outcome is still recorded


@pytest.mark.parametrize("bad", [{"tokens": 1.5}, {"cost_usd": math.nan}, {"cost_usd": math.inf}])
def test_the_step_apis_own_usage_arguments_must_be_finite_numbers(bad: dict[str, Any]) -> None:
    ctl = RunController(Budget(max_steps=5, max_cost_usd=5.0), validate=lambda s, o: True)
    state = ctl.start("t")
    with pytest.raises(ValueError, match="tokens must be a whole number and cost_usd a finite"):
        ctl.charge(state, **bad)
    with pytest.raises(ValueError, match="tokens must be a whole number and cost_usd a finite"):
        ctl.on_action(state, Finish(1), **bad)
    assert (state.step, state.tokens, state.cost_usd) == (0, 0, 0.0)


@pytest.mark.parametrize("at", ["before_model", "finish"])
def test_a_rule_evaluator_returning_a_wrong_type_ends_typed_naming_the_rule(at: str) -> None:
    """A rule's evaluate returning neither bool nor report raised TypeError out of run()."""
    from runner.control import StoppingRule

    rule = StoppingRule("grounded", evaluate=lambda s: 5 if (at == "before_model"
                                                             or s.proposal is not None) else True)
    ctl = RunController(Budget(max_steps=3, max_tokens=100), rules=[rule])
    res = ctl.run("t", lambda s: Turn(Finish(1), tokens=1), lambda call: None)
    assert (res.reason, res.stop.kind, res.stop.detail) == (
        StopReason.INTERNAL_ERROR, "UserCodeError",
        "grounded.evaluate raised TypeError: a check must return bool or PredicateReport, got int")
    assert res.handoff is not None
