"""Small helpers shared by the control tests: scripted agents and tools."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from runner.control import Action, RunState, ToolCall, ToolResult, Turn

# mutmut names the mutant under test here; its own phases use these fixed names
_MUTMUT_PHASES = {"", "stats", "fail", "list_all_tests", "mutant_generation"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under mutation testing (tests/control/mutation.py), a test marked ``child_process`` is
    skipped while a mutant is under test: its work runs in a child process, which imports the
    unmutated package, so it cannot kill a mutant and only costs time. It runs everywhere else."""
    if os.environ.get("MUTANT_UNDER_TEST", "") in _MUTMUT_PHASES:
        return
    skip = pytest.mark.skip(reason="runs in a child process, which does not load the mutant")
    for item in items:
        if item.get_closest_marker("child_process") is not None:
            item.add_marker(skip)


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
