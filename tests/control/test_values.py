"""The small public value types pinned exactly: their JSON, the tool-result constructors and
constructors that normalise and refuse, facts with freshness under the controller's clock, the
no-progress detectors' bookkeeping, and the rendered handoff a person reads (with its caps)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from runner.control import (
    Budget,
    ExternalStop,
    Finish,
    Guard,
    HandoffPackage,
    Invalid,
    NoProgressDetector,
    PredicateReport,
    RunController,
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
from runner.control._types import Checkpoint, Directive, Phase, Remaining, StepRecord, display
from runner.errors import FormatError


def test_value_types_as_json() -> None:
    d = Directive(missing=("a", "b"), notes=("Rejected.",))
    assert d.to_json() == {"missing": ["a", "b"], "notes": ["Rejected."],
                           "text": "Rejected. Not done yet. Still missing: a, b."}
    assert Remaining(3, None, 0.5, 1.25).to_json() == {"steps": 3, "tokens": None,
                                                       "cost_usd": 0.5, "seconds": 1.25}
    rep = PredicateReport(("a",), ("b",), detail="why", escalate="ask?")
    assert rep.to_json() == {"satisfied": ["a"], "missing": ["b"], "escalate": "ask?",
                             "detail": "why"}


def test_tool_result_constructors() -> None:
    assert ToolResult.failure("down", fatal=True, cost_usd=0.5) == ToolResult(
        ok=False, data=None, error="down", fatal=True, cost_usd=0.5)
    assert ToolResult.failure("down").to_json() == {"ok": False, "data": None, "error": "down",
                                                    "fatal": False, "cost_usd": 0.0}
    assert ToolResult.success({"v": 1}, cost_usd=0.25) == ToolResult(True, {"v": 1}, None, False, 0.25)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_facts_expire_by_the_controllers_clock() -> None:
    clock = Clock()
    state = RunController(Budget(max_steps=3, max_tokens=10), clock=clock).start("t")
    state.set_fact("eta", "monday", ttl_s=5.0)
    assert state.facts["eta"].expires_at == 105.0
    clock.now = 104.999
    assert state.fact("eta") == "monday"
    clock.now = 105.0  # expired at exactly its expiry time
    assert state.fact("eta", "stale") == "stale"
    state.set_fact("forever", 1)
    assert state.facts["forever"].expires_at is None and state.fact("forever") == 1


def test_facts_outside_a_controller_count_time_from_zero() -> None:
    from runner.control import RunState

    state = RunState("r", "t")
    state.set_fact("x", 1, ttl_s=2.0, invalidated_by={"write"})
    f = state.facts["x"]
    assert (f.expires_at, f.invalidated_by) == (2.0, frozenset({"write"}))
    assert state.fact("x", "no clock") == "no clock"  # with no clock an expiring fact is stale


def handoff(done: tuple[str, ...], found: tuple[str, ...]) -> HandoffPackage:
    return HandoffPackage(run_id="r-1", stop_reason=StopReason.STEP_BUDGET, stop_detail="used all",
                          asked="Find v", done=done, found=found, question="Retry?", steps=3,
                          tool_calls=2, cost_usd=0.125)


def test_the_handoff_renders_as_short_markdown() -> None:
    assert handoff(("get() -> 1", "get() -> 2"), ("rule: satisfied v",)).render() == (
        "## Needs a decision: run r-1 stopped with step_budget\n"
        "\n"
        "**Question:** Retry?\n"
        "\n"
        "**Asked:** Find v\n"
        "**Why it stopped:** used all\n"
        "\n"
        "**Done** (3 steps, 2 tool calls, $0.1250):\n"
        "- get() -> 1\n"
        "- get() -> 2\n"
        "\n"
        "**Found:**\n"
        "- rule: satisfied v\n")
    empty = handoff((), ()).render()
    assert empty.endswith("$0.1250):\n- nothing\n\n**Found:**\n- nothing yet\n")


def test_summaries_and_trace_lines_a_person_reads() -> None:
    from runner.control import StepRecord, ToolCall
    from runner.control._types import display

    assert ToolResult.failure("down").summary() == "error: down"
    assert ToolResult.failure("down", fatal=True).summary() == "fatal error: down"
    assert ToolResult(ok=False).summary() == "error: unknown"
    assert ToolResult.success({"results": []}).summary() == "empty"
    assert ToolResult.success("x" * 100).summary() == '"' + "x" * 78 + "…"
    assert display("é" * 3) == '"ééé"' and display({"b": 1, "a": {2}}) == '{"a": "{2}", "b": 1}'
    assert display("x" * 118) == '"' + "x" * 118 + '"'  # exactly at the limit: not cut
    call = ToolCall("get", {"q": "y" * 80})
    rec = StepRecord(step=1, kind="tool", tool="get", args=call.args, result=None)
    assert rec.line() == 'get({"q":"' + "y" * 53 + "…) -> no result"
    assert StepRecord(step=2, kind="invalid", note="bad").line() == "invalid reply: bad"


@pytest.mark.parametrize(("reason", "question"), [
    ("step_budget", "Retry with a larger step budget, or close the task as out of scope?"),
    ("token_budget", "Raise the cost ceiling for this task, or close it? (Check for oversized context.)"),
    ("tool_limit", "Allow this tool more calls for this task, or fix what makes the agent re-call it?"),
    ("no_progress", "The agent kept repeating itself: what should it do differently here?"),
    ("tool_error", "Is the failing tool healthy again, so the run can be retried?"),
    ("time_budget", "The run ran out of time: is the slow tool healthy, or does this task need longer?"),
    ("internal_error", "User code failed or the run was interrupted: fix or restart it, then retry?"),
    ("policy_block", "A guard refused the action: is the guard right, or should it be allowed?"),
    ("needs_human", "What should the agent do next?"),
])
def test_each_stop_reason_asks_its_own_question(reason: str, question: str) -> None:
    from runner.control import ExternalStop, RunState, Stop
    from runner.control._handoff import build_handoff

    stop = Stop(StopReason(reason), ExternalStop("x"), "d", 0)
    assert build_handoff(RunState("r", "t"), stop).question == question


# Constructors that normalise and refuse, the no-progress detectors' bookkeeping and the handoff's
# caps, pinned exactly (each kills mutants a looser test let through).
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
