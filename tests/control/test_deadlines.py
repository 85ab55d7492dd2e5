"""Deadlines: a time budget or a tool timeout cancels work in flight (sync tools in daemon
threads, async tools by cancel scopes), and decide sees what is left."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from typing import Any

import anyio
import pytest

from runner.control import (
    Budget,
    Finish,
    RunController,
    RunState,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
)
from tests.control.conftest import script, tools
from tests.control.helpers_pay_processes import _HUNG, _child
from tests.control.helpers_runs import ok


def test_hung_sync_tool_is_cancelled_by_the_run_deadline(release: threading.Event) -> None:
    def hang(call: ToolCall) -> ToolResult:
        release.wait()
        return ToolResult.success({"late": True})

    ctl = RunController(Budget(max_steps=5, max_tokens=1000, max_seconds=0.3), validate=ok)
    result = ctl.run("t", script(ToolCall("hang")), hang)
    assert result.reason is StopReason.TIME_BUDGET
    assert result.stop.kind == "MaxTime"
    assert result.handoff is not None and "time" in result.handoff.stop_detail
    assert result.handoff.question.startswith("The run ran out of time")


def test_hung_async_tool_is_cancelled_by_a_per_tool_timeout() -> None:
    async def execute(call: ToolCall) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    ctl = RunController(Budget(max_steps=5, max_tokens=1000, tool_timeout_s=0.2), validate=ok)

    async def main() -> Any:
        return await ctl.arun("t", script(ToolCall("slow", {"q": 1})), execute)

    result = anyio.run(main)
    assert result.reason is StopReason.TIME_BUDGET
    assert result.stop.kind == "ToolTimeout"
    assert result.handoff is not None


def test_remaining_budget_is_passed_to_decide() -> None:
    seen: list[Any] = []

    def decide(state: RunState) -> Turn:
        seen.append(state.remaining)
        return Turn(ToolCall("t", {"n": len(seen)}), tokens=10, cost_usd=0.01)

    ctl = RunController(Budget(max_steps=3, max_tokens=100, max_cost_usd=1.0, max_seconds=60),
                        validate=ok)
    ctl.run("t", decide, tools({"t": ToolResult.success({"x": 1})}))
    assert [r.steps for r in seen] == [3, 2, 1]
    assert [r.tokens for r in seen] == [100, 90, 80]
    assert seen[1].cost_usd == pytest.approx(0.99)
    assert all(r.seconds is not None and 0 < r.seconds <= 60 for r in seen)


@pytest.mark.child_process
@pytest.mark.parametrize(("how", "reason"), [("deadline", "time_budget"),
                                              ("sigterm", "internal_error"),
                                              ("sigint", "internal_error")])
def test_a_hung_sync_tool_does_not_keep_the_process_alive_after_the_run_ends(
        how: str, reason: str) -> None:
    """Defect 7: after a deadline (or SIGTERM / Ctrl-C under one) stopped the run, the process
    lived until the hung tool returned: anyio's worker thread is not a daemon. The tool sleeps
    120 s; the process must exit long before (the bound is generous; no timing is asserted
    beyond "before the tool would have returned")."""
    began = time.monotonic()
    proc = _child(_HUNG, how)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "in tool"
    if how != "deadline":
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the process outlived its run by more than 90 s") from None
    assert time.monotonic() - began < 110  # before the tool would have returned
    assert proc.returncode == 0, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1])["reason"] == reason


def test_a_sync_tool_under_a_deadline_runs_in_a_daemon_thread() -> None:
    seen: list[bool] = []

    def execute(call: ToolCall) -> ToolResult:
        seen.append(threading.current_thread().daemon)
        return ToolResult.success({"x": 1})

    ctl = RunController(Budget(max_steps=2, max_tokens=1000, max_seconds=60),
                        validate=lambda s, o: True)
    ctl.run("t", lambda s: Turn(ToolCall("t") if not s.step else Finish(1), tokens=1), execute)
    anyio.run(ctl.arun, "t", lambda s: Turn(ToolCall("t") if not s.step else Finish(1),
                                            tokens=1), execute)
    assert seen == [True, True]


def test_a_daemon_worker_passes_exceptions_and_context_back() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("caller")
    ctl = RunController(Budget(max_steps=3, max_tokens=1000, max_seconds=60),
                        validate=lambda s, o: var.get() == "caller")

    def execute(call: ToolCall) -> ToolResult:
        raise KeyError("boom")

    res = ctl.run("t", lambda s: Turn(ToolCall("t"), tokens=1), execute)
    assert (res.reason, res.stop.detail) == (StopReason.TOOL_ERROR,
                                             "t failed fatally: KeyError: 'boom'")
    ok = ctl.run("t", lambda s: Turn(Finish(1), tokens=1), execute)
    assert ok.completed  # validate ran in the worker with the caller's context
