"""Helpers shared by the control tests of resuming, facts, capture and evals: a refund
agent and its controller, a settable clock, a failing run and an agent that never stops."""

from __future__ import annotations

from typing import Any

from runner.control import (
    Budget,
    Finish,
    Guard,
    IdempotencyLedger,
    RunController,
    RunResult,
    RunState,
    SideEffectRule,
    ToolCall,
    ToolResult,
    Turn,
)
from tests.control.conftest import merge, script, tools


# -- resumable needs_human ------------------------------------------------------------------------
def refunder(state: RunState) -> ToolCall | Finish:
    """Refunds until the refund is in the state, then finishes."""
    if state.data.get("refunded") is not True:
        return ToolCall("refund", {"amount": 250}, idempotency_key="r-1")
    return Finish("done")


def refund_controller(ledger: IdempotencyLedger | None = None) -> RunController:
    guard = Guard(allow={"refund"}, side_effects={"refund": SideEffectRule(
        amount_arg="amount", max_amount=1000, escalate_above=100)})
    return RunController(Budget(max_steps=6, max_tokens=1000), guard=guard, fold=merge,
                         validate=lambda s, o: s.data.get("refunded") is True, idempotency=ledger)


# -- facts with freshness -------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- run records, capture, evals of the user's own agent -------------------------------------------
def failing_run() -> RunResult[Any]:
    ctl = RunController(Budget(max_steps=5, max_tokens=1000), fold=merge,
                        validate=lambda s, o: isinstance(o, dict) and o.get("v") == s.data.get("v"))
    decide = script(Turn(ToolCall("get", {"q": 1}), tokens=7), Turn(Finish({"v": 2}), tokens=5))
    return ctl.run("What is v?", decide, tools({"get": ToolResult.success({"v": 1})}),
                   run_id="r-42")


def never_stops(state: RunState) -> ToolCall:
    """A user's agent that keeps searching with new arguments and never finishes."""
    return ToolCall("search", {"page": state.step})
