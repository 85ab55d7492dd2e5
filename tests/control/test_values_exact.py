"""Constructors that normalise and refuse, the no-progress detectors' bookkeeping and the handoff's
caps, pinned exactly (each kills mutants a looser test let through)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from runner.control import (
    ExternalStop,
    Finish,
    Guard,
    Invalid,
    NoProgressDetector,
    PredicateReport,
    RunState,
    SideEffectRule,
    Stop,
    StopReason,
    ToolCall,
    ToolFailure,
    ToolResult,
)
from runner.control._conditions import RepeatedAction, RepeatedEmptyResult
from runner.control._handoff import _MAX_DONE, _MAX_FOUND, build_handoff
from runner.control._result import RunResult
from runner.control._types import Checkpoint, Phase, StepRecord, display
from runner.errors import FormatError


def test_constructors_normalise_their_collections() -> None:
    g = Guard(allow=["a", "b"], side_effects=MappingProxyType({"a": SideEffectRule()}),
              approvals=["a"], rules=[lambda c, s: None])
    assert (type(g.allow), type(g.approvals), type(g.side_effects), type(g.rules)) == (
        frozenset, frozenset, dict, tuple)
    assert g.allow == {"a", "b"} and g.approvals == {"a"}
    rep = PredicateReport(satisfied=["x"], missing=["y"])  # type: ignore[arg-type]
    assert (rep.satisfied, rep.missing) == (("x",), ("y",))
    call = ToolCall("t", MappingProxyType({"k": 1}))  # type: ignore[arg-type]
    assert type(call.args) is dict and call.args == {"k": 1}
    stop = Stop("no_progress", ExternalStop("x"), "d", 0)  # type: ignore[arg-type]
    assert stop.reason is StopReason.NO_PROGRESS


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda: Guard(allow="get"), TypeError, "Guard.allow must be a collection of tool names"),
    (lambda: Guard(allow={"get"}, side_effects={"pay": SideEffectRule(), "x": SideEffectRule()}),
     ValueError, "side-effect tools not on the allow-list: ['pay', 'x']"),
    (lambda: SideEffectRule(max_amount=5), ValueError,
     "SideEffectRule: an amount limit needs amount_arg"),
    (lambda: Stop(StopReason.NO_PROGRESS, "cond", "d", 0), TypeError,  # type: ignore[arg-type]
     "Stop.condition must be a Condition instance"),
    (lambda: ToolCall("t", [1]), TypeError, "ToolCall.args must be a mapping"),  # type: ignore[arg-type]
])
def test_constructors_refuse_with_one_exact_message(make: Any, error: type, message: str) -> None:
    with pytest.raises(error) as e:
        make()
    assert str(e.value) == message


def test_tool_arguments_must_be_json() -> None:
    with pytest.raises(FormatError):
        ToolCall("t", {"k": {1, 2}})


def test_a_stop_lists_its_causes() -> None:
    inner = Stop(StopReason.STEP_BUDGET, ExternalStop("a"), "inner", 2)
    outer = Stop(StopReason.STEP_BUDGET, ExternalStop("b"), "outer", 2, causes=(inner,))
    assert outer.to_json()["causes"] == [inner.to_json()]
    assert "causes" not in inner.to_json()


def test_run_results_refuse_inconsistent_parts() -> None:
    goal = Stop(StopReason.GOAL_MET, ExternalStop("x"), "d", 1)
    other = Stop(StopReason.STEP_BUDGET, ExternalStop("x"), "d", 1)
    handoff = build_handoff(RunState("r", "t"), other)
    base = {"run_id": "r", "steps": 1, "tool_calls": 0, "tokens": 0, "cost_usd": 0.0, "trace": ()}
    for kw, message in (
        ({"stop": goal}, "a goal_met result needs its output"),
        ({"stop": other, "_output": 1, "handoff": handoff},
         "a step_budget result cannot carry a final output"),
        ({"stop": goal, "_output": 1, "handoff": handoff}, "a goal_met result has no handoff package"),
        ({"stop": other}, "every non-goal result carries a handoff package"),
    ):
        with pytest.raises(ValueError) as e:
            RunResult(**base, **kw)  # type: ignore[arg-type]
        assert str(e.value) == message


def test_the_stalled_setting_is_kept() -> None:
    assert NoProgressDetector(stalled=3).stalled == 3


def finish_point(state: RunState, action: Any) -> Checkpoint:
    return Checkpoint(Phase.ON_ACTION, state, action=action)


def test_different_finishes_and_invalid_replies_are_not_repeats() -> None:
    cond = RepeatedAction(repeats=2)
    state = RunState("r", "t")
    for action in (Finish({1}), Finish({2}), Invalid("a"), Invalid("b")):
        point = finish_point(state, action)
        assert cond.check(point) is None
        cond.observe(point)
    assert cond.check(finish_point(state, Invalid("b"))) is not None


def after(state: RunState, result: ToolResult | None, phase: Phase = Phase.AFTER_TOOL,
          tool: str = "get") -> Checkpoint:
    call = ToolCall(tool)
    return Checkpoint(phase, state, action=call, call=call, result=result)


def test_empty_results_streaks_restart_after_a_real_result() -> None:
    cond = RepeatedEmptyResult(count=2)
    state = RunState("r", "t")
    empty, full = ToolResult.success([]), ToolResult.success([1])
    for r in (empty, full):
        assert cond.check(after(state, r)) is None
        cond.observe(after(state, r))
    assert cond.check(after(state, empty)) is None  # the streak restarted at the real result
    cond.observe(after(state, empty))
    stop = cond.check(after(state, empty))
    assert stop is not None and stop.detail == "the same empty result 2 times in a row"
    three = RepeatedEmptyResult(count=3)
    for _ in range(2):
        three.observe(after(state, empty))
    stop = three.check(after(state, empty))
    assert stop is not None and stop.detail == "the same empty result 3 times in a row"
    # only tool results are judged, and only empty ones
    assert cond.check(after(state, empty, Phase.ON_ACTION)) is None
    assert cond.check(after(state, full)) is None
    cond.observe(after(state, None))
    assert cond.check(after(state, None)) is None
    assert cond.check(after(state, empty)) is not None  # a checkpoint without a result counts nothing
    fresh = RepeatedEmptyResult(count=2)
    fresh.observe(after(state, full))  # a real result before any empty one
    assert fresh.check(after(state, empty)) is None


def test_tool_failures_count_per_tool_at_tool_results_only() -> None:
    cond = ToolFailure(consecutive=2)
    state = RunState("r", "t")
    bad = ToolResult.failure("down")
    cond.observe(after(state, bad, Phase.ON_ACTION))  # not a tool result: not counted
    cond.observe(after(state, None))
    assert cond.check(after(state, bad)) is None
    cond.observe(after(state, bad))
    assert cond.check(after(state, bad, Phase.ON_ACTION)) is None
    assert cond.check(after(state, bad, tool="other")) is None
    stop = cond.check(after(state, bad))
    assert stop is not None and stop.reason is StopReason.TOOL_ERROR
    assert cond.check(after(state, None)) is None
    three = ToolFailure(consecutive=3)
    for _ in range(2):
        assert three.check(after(state, bad)) is None
        three.observe(after(state, bad))
    assert three.check(after(state, bad)) is not None


def test_the_handoff_caps_what_it_shows() -> None:
    stop = Stop(StopReason.STEP_BUDGET, ExternalStop("x"), "d", 1)
    assert build_handoff(RunState("r", "x" * 300), stop).asked == "x" * 300
    assert build_handoff(RunState("r", "x" * 301), stop).asked == "x" * 299 + "…"
    assert build_handoff(RunState("r", {"k": "y" * 400}), stop).asked == display(
        {"k": "y" * 400}, 300)
    assert len(display({"k": "y" * 400}, 300)) == 300
    state = RunState("r", "t", cost_usd=0.12345678912)
    state.findings = [f"f{i}" for i in range(_MAX_FOUND)]
    assert build_handoff(state, stop).found == tuple(state.findings)  # exactly the cap: all shown
    state.findings.append("one more")
    state.reports["rule"] = PredicateReport(missing=("a", "b"))
    found = build_handoff(state, stop).found
    assert found == (*state.findings[: _MAX_FOUND - 1], "... 3 more")  # 10 lines, 7 shown
    assert build_handoff(state, stop).cost_usd == 0.123456789
    only = RunState("r", "t")
    only.reports["rule"] = PredicateReport(missing=("a", "b"))
    assert build_handoff(only, stop).found == ("rule: still missing a, b",)
    trace = [StepRecord(step=i, kind="invalid", note=f"n{i}") for i in range(_MAX_DONE)]
    state.trace = trace
    assert build_handoff(state, stop).done == tuple(r.line() for r in trace)  # the cap: all shown
    state.trace = [*trace, StepRecord(step=99, kind="invalid", note="last")]
    done = build_handoff(state, stop).done
    assert done == (*[f"invalid reply: n{i}" for i in range(_MAX_DONE - 2)],
                    "... 2 more", "invalid reply: last")


def test_display_keeps_non_ascii_and_cuts_past_its_limit() -> None:
    assert display({"é": {1}}) == '{"é": "{1}"}'
    assert display("x" * 118) == '"' + "x" * 118 + '"'
    assert display("x" * 119) == '"' + "x" * 118 + "…"
