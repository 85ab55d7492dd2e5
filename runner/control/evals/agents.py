"""Agents the bundled eval cases import (``"agent": {"import": "runner.control.evals.agents:..."}``).

They stand for a user's own agent: plain ``decide(state)`` functions that read the run state and
the controller's directive, as a real agent's prompt builder would.
"""

from __future__ import annotations

from runner.control._types import Finish, RunState, ToolCall

__all__ = ["follows_directive"]


def follows_directive(state: RunState) -> ToolCall | Finish:
    """Looks the shipment up, proposes a finish too early, and does the missing check only when
    the controller's directive names it (an agent that relies on being told what is missing)."""
    if "shipment_id" not in state.data:
        return ToolCall("get_shipment", {"ticket": 4471})
    missing = state.directive.missing if state.directive is not None else ()
    if "eligible" in missing and "eligible" not in state.data:
        return ToolCall("check_eligibility", {"shipment": state.data["shipment_id"]})
    if "eligible" in state.data:
        return Finish({"shipment_id": state.data["shipment_id"], "eligible": state.data["eligible"]})
    return Finish({"shipment_id": state.data["shipment_id"]})
