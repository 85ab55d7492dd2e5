"""Small helpers shared by the control tests: scripted agents and tools."""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from runner.control import (
    Action,
    RunState,
    ToolCall,
    ToolResult,
    Turn,
)

# mutmut names the mutant under test here; its own phases use these fixed names
_MUTMUT_PHASES = {"", "stats", "fail", "list_all_tests", "mutant_generation"}


# While a mutant is under test, each test gets this much wall-clock time. A mutant of the async
# loop can turn a bounded wait into a sleep of a minute or an endless one; mutmut's own timeout
# counts CPU time, which a sleeping test does not use. pytest-timeout's thread method ends the
# whole test process with exit code 1 when the limit passes, which mutmut records as killed: a
# mutant that makes a control test hang is a mutant the tests detect. Unmutated, the slowest
# per-mutant control test takes 0.8 s on an idle two-core machine; the limit leaves six times that.
MUTANT_TEST_TIMEOUT_S = 5.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under mutation testing (tests/control/mutation.py), while a mutant is under test: a test
    marked ``child_process`` is skipped (its work runs in a child process, which imports the
    unmutated package, so it cannot kill a mutant and only costs time), and every other test
    gets a wall-clock limit (:data:`MUTANT_TEST_TIMEOUT_S`). Outside a mutant run nothing
    changes."""
    if os.environ.get("MUTANT_UNDER_TEST", "") in _MUTMUT_PHASES:
        return
    skip = pytest.mark.skip(reason="runs in a child process, which does not load the mutant")
    limit = pytest.mark.timeout(MUTANT_TEST_TIMEOUT_S, method="thread")
    for item in items:
        if item.get_closest_marker("child_process") is not None:
            item.add_marker(skip)
        else:
            item.add_marker(limit)


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


def edited(record: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``record`` with the field at ``path`` set to ``value`` (the class
    ``KeyError`` as the value deletes the field)."""
    out = copy.deepcopy(record)
    *parents, last = path
    node = out
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return out


# -- 3. a time budget that cancels work in flight ---------------------------------------------------
@pytest.fixture
def release() -> Iterator[threading.Event]:
    ev = threading.Event()
    yield ev
    ev.set()  # let the abandoned worker thread finish
