"""The tool-call seam of a run: where a cell's sandboxed tool calls are executed.

``local`` runs each call in a fresh sandbox child on this machine (a thread per call in flight,
at most ``--concurrency`` at once). ``ray`` (:mod:`runner.study._ray`) runs the same children on
the nodes of a Ray cluster. Either way the parent keeps the provider, the credential, the
schedule, the lock and the store; an executor only ever sees ``(world_id, tool_id, args)`` and
returns the tool's JSON response, so the executor choice cannot change a cell's result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import anyio

from runner.canonical import JsonObject, JsonValue
from runner.sandbox import EXECUTORS

if TYPE_CHECKING:
    from runner.sandbox import ToolSandbox

__all__ = ["EXECUTORS", "ExecutorLost", "LocalExecutor", "RetryHook", "ToolExecutor"]


RetryHook = Callable[[JsonObject], None]
"""Called with a JSON description of each call attempt that was lost and re-run elsewhere."""


class ExecutorLost(Exception):  # a control-flow signal, not an error for users
    """Raised by an executor's ``call`` when no node is left to run it (the cluster is gone).

    Deliberately *not* an :class:`~runner.errors.EctError`: the trajectory engine turns an
    EctError from a tool call into a ``tool_error`` stop, which would commit a cell that never
    got its answer. The run loop catches this instead and halts at a cell boundary
    (:class:`~runner.study.Halted`); the cell runs again on resume.
    """


class ToolExecutor(Protocol):
    """What the run loop needs from an executor."""

    name: str

    async def call(self, world_id: str, tool_id: str, args: JsonObject, *,
                   on_retry: RetryHook | None = None) -> JsonObject:
        """Run one tool call in a fresh sandbox child; return its JSON response.

        Raises:
            EctError: the tool call failed in its sandbox (recorded in the cell as today).
            ExecutorLost: no node is left to run the call.
        """
        ...

    def describe(self) -> dict[str, JsonValue]:
        """JSON for the run header: the executor (``name``) and, for a cluster, every node's
        preflight."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    """Today's behaviour: one fresh sandbox child per call, on a worker thread of this process."""

    name = "local"

    def __init__(self, sandbox: ToolSandbox, concurrency: int) -> None:
        self.sandbox = sandbox
        self.limiter = anyio.CapacityLimiter(concurrency)

    async def call(self, world_id: str, tool_id: str, args: JsonObject, *,
                   on_retry: RetryHook | None = None) -> JsonObject:
        return await anyio.to_thread.run_sync(
            self.sandbox.call, world_id, tool_id, args, limiter=self.limiter)

    def describe(self) -> dict[str, JsonValue]:
        return {"name": self.name}

    def close(self) -> None:
        return None
