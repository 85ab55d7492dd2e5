"""Small helpers shared by the control tests: scripted agents and tools."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runner.control import Action, RunState, ToolCall, ToolResult, Turn


def script(*turns: Action | Turn) -> Callable[[RunState], Action | Turn]:
    """A decide() that plays ``turns`` in order and then repeats the last one forever."""
    seq: Sequence[Action | Turn] = turns

    def decide(state: RunState) -> Action | Turn:
        return seq[min(state.step, len(seq) - 1)]

    return decide


def tools(table: dict[str, Any]) -> Callable[[ToolCall], ToolResult]:
    """An execute() returning ``table[tool]`` (a ToolResult, or a callable of the call)."""

    def execute(call: ToolCall) -> ToolResult:
        value = table[call.tool]
        return value(call) if callable(value) else value

    return execute


def merge(state: RunState, call: ToolCall, result: ToolResult) -> None:
    """Fold: merge object results into the run state."""
    if result.ok and isinstance(result.data, dict):
        state.data.update(result.data)
