"""Property: a budget stop never yields goal_met, never exposes an output, and budgets hold."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.canonical import canonical_bytes
from runner.control import (
    Budget,
    Escalate,
    Finish,
    Guard,
    Invalid,
    NoFinalOutput,
    RunController,
    RunState,
    SideEffectRule,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
    Turn,
)
from tests.control.conftest import merge

TOOLS = {
    "get": lambda a: ToolResult.success({"v": a.get("x", 0)}),
    "empty": lambda a: ToolResult.success([]),
    "flaky": lambda a: ToolResult.failure("503"),
    "write": lambda a: ToolResult.success({"written": True}),
}

actions = st.one_of(
    st.builds(lambda t, x: ToolCall(t, {"x": x}), st.sampled_from(["get", "empty", "flaky"]),
              st.integers(0, 3)),
    st.builds(lambda x, k: ToolCall("write", {"x": x}, idempotency_key=k),
              st.integers(0, 2), st.sampled_from([None, "k1", "k2"])),
    st.builds(lambda v: Finish({"v": v}), st.integers(0, 3)),
    st.just(Escalate("help?")),
    st.just(Invalid("garbled")),
    st.builds(lambda t: ToolCall(t, {}), st.just("forbidden")),
)
turns = st.builds(lambda a, n, c: Turn(a, tokens=n, cost_usd=c), actions,
                  st.integers(0, 300), st.sampled_from([0.0, 0.01, 0.05]))


def grounded(state: RunState, output: object) -> bool:
    return isinstance(output, dict) and output.get("v") == state.data.get("v") is not None


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(
    script=st.lists(turns, min_size=1, max_size=12),
    max_steps=st.integers(1, 8),
    max_tokens=st.integers(50, 2000),
    max_cost=st.sampled_from([None, 0.03, 0.2]),
    per_get=st.integers(0, 4),
    total=st.sampled_from([None, 1, 3]),
)
def test_budget_stops_are_never_completions(script: list[Turn], max_steps: int,
                                            max_tokens: int, max_cost: float | None,
                                            per_get: int, total: int | None) -> None:
    budget = Budget(max_steps=max_steps, max_tokens=max_tokens, max_cost_usd=max_cost,
                    tool_limits=ToolLimits(per_tool={"get": per_get}, total=total))
    guard = Guard(allow=set(TOOLS), side_effects={"write": SideEffectRule()})
    c = RunController(budget, guard=guard, validate=grounded, fold=merge)
    executed: list[ToolCall] = []

    def execute(call: ToolCall) -> ToolResult:
        executed.append(call)
        return TOOLS[call.tool](call.args)

    res = c.run("t", lambda s: script[min(s.step, len(script) - 1)], execute)

    assert isinstance(res.reason, StopReason)
    assert res.steps <= max_steps
    assert res.tokens <= max_tokens or res.reason is StopReason.TOKEN_BUDGET
    assert sum(1 for e in executed if e.tool == "get") <= per_get
    assert total is None or len(executed) <= total
    assert all(e.tool != "forbidden" for e in executed)
    if res.reason.is_budget:
        assert not res.completed and res.handoff is not None
        with pytest.raises(NoFinalOutput):
            _ = res.output
        assert "output" not in res.to_json()
    if res.completed:
        assert res.reason is StopReason.GOAL_MET and res.handoff is None
        assert res.output == {"v": res.data["v"]}  # only a checked, grounded finish completes
        assert res.tokens <= max_tokens
    canonical_bytes(res.to_json())  # results are plain JSON
