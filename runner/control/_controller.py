"""RunController: drive any agent loop to exactly one typed stop.

Whole-run use: ``controller.run(task, decide, execute)`` (or ``await controller.arun(...)``)
where ``decide(state) -> Action | Turn`` is the model side and ``execute(call) -> ToolResult``
the tool side. This module holds those whole-run drivers: the synchronous loop, the async loop
under anyio cancel scopes (deadlines cancel work in flight; sync callables run in a daemon
thread), SIGTERM and Ctrl-C ending a run ``internal_error``, and resuming a ``needs_human``
run. The step-by-step API they drive (and an engine may drive itself) is the state machine in
``runner/control/_steps.py``, on the controls and checks of ``runner/control/_checks.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from runner.control._checks import _left
from runner.control._conditions import (
    ToolTimeout,
)
from runner.control._errors import UnmeteredUsage
from runner.control._result import RunResult
from runner.control._steps import _Steps
from runner.control._types import (
    Checkpoint,
    Phase,
    RunState,
    Stop,
    StopReason,
    Turn,
)
from runner.control._verdicts import (
    ContractViolation,
    Decide,
    Execute,
    Fold,
    Interrupted,
    KillSwitchStop,
    UnknownOutcome,
    UserCodeError,
    Validate,
    Verdict,
    VerdictKind,
    _contract,
    _Failed,
    _interrupted,
    _user_error,
)

__all__ = [
    "ContractViolation",
    "Decide",
    "Execute",
    "Fold",
    "Interrupted",
    "KillSwitchStop",
    "RunController",
    "UnknownOutcome",
    "UserCodeError",
    "Validate",
    "Verdict",
    "VerdictKind",
]


# Frames a warning must not point into: this package and the async machinery that drives it
# (anyio, asyncio, worker threads), so it points at the caller's own line in run and arun.
_INTERNAL = (*(os.path.dirname(m.__file__ or "") + os.sep for m in (anyio, asyncio)),
             os.path.dirname(__file__) + os.sep, threading.__file__, contextlib.__file__)


def _caller_level() -> int:
    """``warnings.warn``'s ``stacklevel`` for the first frame outside :data:`_INTERNAL`, as
    seen from the function that calls this one."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame = frame.f_back
        level += 1
    return level


class RunController(_Steps):
    """Enforces budgets, deadlines, guards, no-progress, stopping rules, escalation and the
    kill switch.

    Args:
        budget: what bounds every run (required; see :meth:`Budget.from_task`).
        guard: allow-list and side-effect rules; side-effect tools get the lowest call limit.
        rules: predicate stopping rules, evaluated after each tool result, before each model
            call and on each finish.
        validate: ``(state, output) -> bool | PredicateReport`` (sync or async) checking a finish.
        no_progress: the no-progress detector (default ``NoProgressDetector()``); ``False``
            turns no-progress detection off (the run is then bounded by its budget alone).
        tool_failure: when tool failures end the run (fatal at once, else N in a row).
        stop_when: an extra :class:`StopCondition`, checked at every checkpoint after the
            built-in ones (it may not end a run ``goal_met``).
        kill_switch: checked before every run and every step; leases daily spend per step.
        fold: ``(state, call, result) -> None`` folds a tool result into ``state.data``.
        idempotency: an :class:`IdempotencyLedger` shared by runs, so a retried or resumed run
            never repeats a side effect another run already did.
        clock: monotonic seconds for the time budget (default ``time.monotonic``).
    """

    # -- whole-run drivers ------------------------------------------------------------------
    def _check_runnable(self) -> None:
        if not self.rules and self.validate is None:
            raise ValueError("a run needs a finish check: pass validate= or rules=")

    def _meter(self, state: RunState, action: Any) -> None:
        """Count a decision that reported no usage; warn once per run, at the caller's line
        (the first frame outside this package and the async machinery)."""
        if isinstance(action, Turn) or (self.budget.max_tokens is None
                                        and self.budget.max_cost_usd is None):
            return
        state.unmetered_steps += 1
        if not state._warned:
            state._warned = True
            warnings.warn(UnmeteredUsage(
                f"run {state.run_id}: decide returned a plain action, so no token usage or "
                "cost was counted against the budget; return Turn(action, tokens=..., "
                "cost_usd=...) to meter it"),
                stacklevel=_caller_level())

    def run(self, task: Any, decide: Decide, execute: Execute, *, run_id: str | None = None,
            data: dict[str, Any] | None = None) -> RunResult[Any]:
        """Run a synchronous agent loop to its stop. Use :meth:`arun` for async callables
        (``run`` refuses them with a ``TypeError``, deadline or not).

        With a deadline in the budget (``max_seconds``, tool timeouts) the callables run in a
        worker thread under an anyio cancel scope, so a hung tool is abandoned at the deadline
        (``time_budget``); this needs no running event loop (inside one, use :meth:`arun`).
        Ctrl-C or SIGTERM during the run ends it ``internal_error`` (condition
        ``Interrupted``) with a handoff, its spend settled; the result is returned."""
        self._check_runnable()
        for what, fn in (("decide", decide), ("execute", execute), ("validate", self.validate)):
            if fn is not None and _is_async(fn):
                raise _Misuse(f"{what} is async: use `await controller.arun(...)`")
        if self.budget.timed and _in_event_loop():
            raise RuntimeError("run() with a deadline cannot be called inside a running event "
                               "loop: use `await controller.arun(...)` there")
        state = self.start(task, run_id=run_id, data=data)
        return self._run_sync(state, decide, execute)

    def _run_sync(self, state: RunState, decide: Decide, execute: Execute) -> RunResult[Any]:
        with _terminate_as_interrupt():
            try:
                if self.budget.timed:
                    return anyio.run(self._drive, state, decide, execute, True)
                while state.stop is None:
                    if self.check_before_model(state) is not None:
                        break
                    began = self.clock()
                    try:
                        raw = decide(state)
                    except Exception as e:
                        self._fail(state, _user_error("decide", e))
                        break
                    state.decide_seconds.append(self.clock() - began)
                    action = _sync(raw, "decide")  # an async decide needs arun (TypeError)
                    self._step(state, action, execute)
            except (KeyboardInterrupt, _Terminated) as e:
                if state.stop is None:
                    self._end(state, _interrupted(state, "sigterm" if isinstance(e, _Terminated)
                                                  else "ctrl-c"))
            except _Misuse:  # the awaitable was closed unawaited: its call never ran
                self._release_claims(state)
                raise
            finally:
                self._settle(state)
        return self.result(state, _resume=self._resumer(state, decide, execute))

    def _step(self, state: RunState, action: Any, execute: Execute) -> None:
        self._meter(state, action)
        try:
            verdict = self.on_action(state, action)
        except TypeError as e:
            self._fail(state, _Failed(ContractViolation("decide"), str(e)))
            return
        if verdict.kind is VerdictKind.EXECUTE:
            assert verdict.call is not None
            try:
                raw = execute(verdict.call)
            except Exception as e:  # a crashing tool is a fatal tool failure
                raw = self._crashed(state, verdict.call, e)
            self.on_tool_result(state, verdict.call, _sync(raw, "execute"))
        elif verdict.kind is VerdictKind.CHECK_FINISH:
            assert verdict.finish is not None
            self.on_finish(state, verdict.finish)

    async def arun(self, task: Any, decide: Decide, execute: Execute, *,
                   run_id: str | None = None, data: dict[str, Any] | None = None,
                   on_stop: Callable[[RunResult[Any]], None] | None = None) -> RunResult[Any]:
        """Like :meth:`run`; ``decide``, ``execute`` and ``validate`` may be sync or async.

        Deadlines cancel work in flight (anyio cancel scopes); sync callables then run in a
        worker thread. When the caller cancels the run from outside (Ctrl-C under
        ``asyncio.run`` is such a cancellation), the run ends ``internal_error`` (condition
        ``Interrupted``), ``on_stop`` receives that result, and the cancellation propagates.
        SIGTERM (in the main thread, when no handler of yours is installed) ends the run the
        same way and the result is returned."""
        self._check_runnable()
        state = self.start(task, run_id=run_id, data=data)
        try:
            return await self._watched(state, decide, execute)
        except anyio.get_cancelled_exc_class():
            # no mutate: nothing below awaits, so the shield is defensive and False behaves alike
            with anyio.CancelScope(shield=True):  # pragma: no mutate
                if state.stop is None:
                    self._end(state, _interrupted(state, "cancelled"))
                result = self.result(state)
                if on_stop is not None:
                    on_stop(result)
            raise
        except KeyboardInterrupt:  # raised inside a sync callable running on the loop
            if state.stop is None:
                self._end(state, _interrupted(state, "ctrl-c"))
            return self.result(state, _resume=self._resumer(state, decide, execute, True))

    async def _watched(self, state: RunState, decide: Decide, execute: Execute) -> RunResult[Any]:
        """``_drive`` with SIGTERM ending the run ``internal_error`` (main thread only, and only
        while no other SIGTERM handler is installed)."""
        if not _can_watch_sigterm():
            return await self._drive(state, decide, execute, self.budget.timed, from_async=True)
        result: RunResult[Any] | None = None
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:
                async def watch() -> None:
                    async for _ in signals:
                        if state.stop is None:
                            self._end(state, _interrupted(state, "sigterm"))
                        tg.cancel_scope.cancel()
                        return

                tg.start_soon(watch)
                result = await self._drive(state, decide, execute, self.budget.timed,
                                           from_async=True)
                tg.cancel_scope.cancel()
        if result is None:  # SIGTERM cancelled the drive
            result = self.result(state, _resume=self._resumer(state, decide, execute, True))
        return result

    async def _drive(self, state: RunState, decide: Decide, execute: Execute,
                     threaded: bool, *, from_async: bool = False) -> RunResult[Any]:
        async def invoke(what: str, fn: Callable[..., Any], *args: Any) -> Any:
            # no mutate: a coroutine function sent to a thread returns its coroutine, awaited below
            if threaded and not inspect.iscoroutinefunction(fn):  # pragma: no mutate
                value = await _in_daemon_thread(fn, *args)
            else:
                value = fn(*args)
            if not from_async:  # run() refuses async callables, deadline or not
                return _sync(value, what)
            return await value if inspect.isawaitable(value) else value

        async def judge(action: Any) -> Verdict:
            if self.idempotency is None:  # no shared ledger: nothing can wait
                return self.on_action(state, action)
            # waiting for another attempt's claim polls; keep the event loop free meanwhile
            return await anyio.to_thread.run_sync(self.on_action, state, action)

        deadline = self._time
        doing: str  # what was under way when the deadline passed (set before every await)
        try:
            with anyio.fail_after(_left(state)):
                while state.stop is None:
                    if self.check_before_model(state) is not None:
                        break
                    doing = "waiting for decide"
                    began = self.clock()
                    try:
                        action = await invoke("decide", decide, state)
                    except _Misuse:
                        raise
                    except Exception as e:
                        self._fail(state, _user_error("decide", e))
                        break
                    state.decide_seconds.append(self.clock() - began)
                    self._meter(state, action)
                    try:
                        doing = "waiting for an idempotency key"
                        verdict = await judge(action)
                    except TypeError as e:
                        self._fail(state, _Failed(ContractViolation("decide"), str(e)))
                        break
                    if verdict.kind is VerdictKind.EXECUTE:
                        call = verdict.call
                        assert call is not None
                        doing = f"in {call.tool}"
                        limit = self.budget.timeout_for(call.tool)
                        raw: Any
                        try:
                            with anyio.move_on_after(limit) as scope:
                                raw = await invoke("execute", execute, call)
                        except _Misuse:
                            raise
                        except Exception as e:  # a crashing tool is a fatal tool failure
                            raw = self._crashed(state, call, e)
                        if scope.cancelled_caught:
                            assert limit is not None
                            self._end(state, Stop(StopReason.TIME_BUDGET,
                                                  ToolTimeout(call.tool, limit),
                                                  f"{call.tool} ran past its {limit:g}-second "
                                                  "timeout and was cancelled", state.step))
                            break
                        self.on_tool_result(state, call, raw)
                    elif verdict.kind is VerdictKind.CHECK_FINISH:
                        assert verdict.finish is not None
                        doing = "in validate"
                        report: Any = None
                        if self.validate is not None:
                            state.proposal = verdict.finish.output
                            try:
                                report = await invoke("validate", self.validate, state,
                                                      verdict.finish.output)
                            except _Misuse:
                                raise
                            except Exception as e:  # user code that failed
                                self._fail(state, _user_error("validate", e))
                                break
                            if report is None:
                                self._fail(state, _contract("validate", None))
                                break
                        self._decide_finish(state, verdict.finish, report)
        except TimeoutError:
            if state.stop is None:
                assert deadline is not None
                # no mutate: MaxTime.expired reads only the step from its checkpoint, not the phase
                point = Checkpoint(Phase.BEFORE_MODEL, state)  # pragma: no mutate
                self._end(state, deadline.expired(point, doing))
        except KeyboardInterrupt:
            if state.stop is None:
                self._end(state, _interrupted(state, "ctrl-c"))
        return self.result(state, _resume=self._resumer(state, decide, execute, from_async))

    def _resumer(self, state: RunState, decide: Decide, execute: Execute,
                 is_async: bool = False) -> Callable[..., Any] | None:
        if state.stop is None or state.stop.reason is not StopReason.NEEDS_HUMAN:
            return None

        def resume(approvals: frozenset[str] | set[str] = frozenset(),
                   answer: str | None = None) -> Any:
            self.reopen(state, approvals=approvals, answer=answer)
            if is_async:
                return self._drive(state, decide, execute, self.budget.timed, from_async=True)
            return self._run_sync(state, decide, execute)

        return resume


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a daemon thread, awaited; a deadline abandons it. anyio's own worker
    threads are not daemons, so a hung sync tool abandoned at a deadline would keep the process
    alive until it returned; a daemon thread lets the process exit once the caller is done."""
    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    out: list[tuple[bool, Any]] = []
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            out.append((True, ctx.run(fn, *args)))
        except BaseException as e:  # handed to the awaiting task, raised there
            out.append((False, e))
        with contextlib.suppress(Exception):  # abandoned: the event loop may be gone
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=work, name="runner.control worker", daemon=True).start()
    await done.wait()
    ok, value = out[0]
    if not ok:
        raise value
    return value



class _Misuse(TypeError):
    """An async callable given to the synchronous ``run`` (escapes the run as a TypeError)."""


class _Terminated(BaseException):
    """SIGTERM arrived while ``run`` was driving the loop."""


def _sync(value: Any, what: str) -> Any:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise _Misuse(f"{what} returned an awaitable: use `await controller.arun(...)`")
    return value


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    return inspect.iscoroutinefunction(fn) or (
        not inspect.isfunction(fn) and call is not None and inspect.iscoroutinefunction(call))


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _can_watch_sigterm() -> bool:
    return _main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While ``run`` drives the loop in the main thread, SIGTERM raises ``_Terminated`` (when
    no handler of the caller's is installed); the previous handler is restored after."""
    if not _can_watch_sigterm():
        yield
        return

    def raise_terminated(signum: int, frame: Any) -> None:
        raise _Terminated

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
