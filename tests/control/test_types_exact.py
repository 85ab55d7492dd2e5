"""The small public value types pinned exactly: their JSON, the tool-result constructors, facts
with freshness under the controller's clock, and the rendered handoff a person reads."""

from __future__ import annotations

import pytest

from runner.control import (
    Budget,
    HandoffPackage,
    PredicateReport,
    RunController,
    StopReason,
    ToolResult,
)
from runner.control._types import Directive, Remaining


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
