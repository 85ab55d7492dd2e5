"""Driving a locked study's run or resume to its end (docs/store.md, docs/study.md).

Cells may run concurrently but are committed strictly in canonical order, each one atomically
(``Store.append`` returns only after COMMIT). Every provider attempt is journaled before it is
sent. Kill switches (a ``STOP`` file beside the store, a cost ceiling and a call ceiling, all
three one :class:`runner.control.KillSwitch`; and Ctrl-C) are checked before each cell starts:
in-flight cells finish and commit, then the run halts with :class:`Halted` at a cell boundary,
and ``ect resume`` continues from the verified prefix. A store has one writer at a time (its
run lock).

The parts live beside it: the settings (``_settings``), one cell (``_cell``), the journaling
of attempts (``_journaling``), the store and its header (``_runheader``), the summary
(``_summary``); export and replay are ``_export`` and ``_replay``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import structlog

from runner.canonical import canonical_bytes
from runner.control import KillSwitch
from runner.errors import EctError, ExitCategory, StudyError
from runner.loop import Trajectory
from runner.study._cell import _Context, _make_provider_factory, _run_cell
from runner.study._executor import EXECUTORS, ExecutorLost, LocalExecutor, ToolExecutor
from runner.study._journal import (
    HaltEntry,
    halt_entry,
    store_accounting,
)
from runner.study._journaling import TransportFailed, _attempts_only, replay_cache
from runner.study._preflight import PreflightFailed, PreflightReport, run_preflight
from runner.study._records import (
    CellRecord,
    ScheduleRow,
)
from runner.study._runheader import _open_or_create_store, check_resume_provider, resume_command
from runner.study._settings import RunSettings, throttle_settings
from runner.study._spec import sandbox_limits
from runner.study._summary import RunSummary, record_failures

if TYPE_CHECKING:
    from types import FrameType

    from runner.store import Store
    from runner.study._ray import RayExecutor

__all__ = [
    "ClusterLost",
    "Halted",
    "StoreInUse",
    "execute",
    "refuse_if_locked",
    "run_lock_path",
    "stop_file",
]


log = structlog.get_logger("ect.study")


class Halted(StudyError):
    """The run stopped cleanly at a cell boundary (STOP file, ceiling, Ctrl-C)."""

    exit_category = ExitCategory.HALTED

    def __init__(self, reason: str, summary: RunSummary) -> None:
        self.reason = reason
        self.summary = summary
        of = (f" (of {summary.total} in the study)" if summary.goal != summary.total else "")
        command = summary.resume_command or f"ect resume --store {summary.store}"
        super().__init__(f"halted at a cell boundary: {reason}; "
                         f"{summary.committed}/{summary.goal} cells committed{of}; "
                         f"continue with `{command}`")


class ClusterLost(Halted):
    """Halted because no node of the Ray cluster was left to run a tool call (exit 4 as any
    halt; resume once the cluster is back, or with the local executor)."""

    exit_category = ExitCategory.HALTED


class StoreInUse(StudyError):
    """Another run or resume is writing to this store (two writers would interleave rows)."""

    exit_category = ExitCategory.REFUSED


def run_lock_path(store_path: Path) -> Path:
    """The file a writing run holds an exclusive ``flock`` on: ``<store>.run-lock``."""
    return store_path.with_name(store_path.name + ".run-lock")


@contextmanager
def _run_lock(store_path: Path) -> Iterator[None]:
    """Hold the store's run lock for the whole run; refuse when another process holds it.

    The store serialises appends, but two runners would each commit "the next row" and the
    records would no longer be the schedule's rows in order. The lock is released when the
    process ends, however it ends (kill -9 included), so it never needs cleaning up.
    """
    import fcntl

    fd = os.open(run_lock_path(store_path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreInUse(_in_use(store_path, _holder(fd))) from None
        # who holds it, for the refusal another run gets meanwhile (read only while locked)
        os.ftruncate(fd, 0)
        os.pwrite(fd, canonical_bytes({
            "pid": os.getpid(), "host": socket.gethostname(),
            "since": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}), 0)
        yield
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    """The holder a run lock file names: ``pid N on HOST since T`` (or why it cannot say)."""
    try:
        doc = json.loads(os.pread(fd, 4096, 0) or b"null")
        return f"pid {int(doc['pid'])} on {doc['host']!s} since {doc['since']!s}"
    except (OSError, ValueError, TypeError, KeyError):
        return "its pid is not recorded"


def _in_use(store_path: Path, holder: str) -> str:
    return (f"another run is writing to {store_path} ({holder}; it holds "
            f"{run_lock_path(store_path)}): wait for it to finish, or halt it (create "
            f"{stop_file(store_path)}, or Ctrl-C it), then `ect resume --store {store_path}`")


def refuse_if_locked(store_path: Path) -> None:
    """Refuse (:class:`StoreInUse`, naming pid, host and since) while another process holds the
    store's run lock: checked before a run or resume gives any other advice or preflights.

    Raises:
        StoreInUse: another run or resume holds the lock.
    """
    import fcntl

    try:
        fd = os.open(run_lock_path(store_path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return  # no lock file (or none readable): no run has it; the run's own lock decides
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreInUse(_in_use(store_path, _holder(fd))) from None
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def stop_file(store_path: Path) -> Path:
    """The kill-switch file: ``STOP`` in the store's directory halts every run writing there."""
    return store_path.parent / "STOP"


def _run_kill_switch(settings: RunSettings) -> KillSwitch:
    """The run's kill switch: the ``STOP`` file beside the store, the run's cost ceiling (on the
    study's committed cost, resumed cells included) and its call ceiling (on this session's
    provider attempts). Checked before each cell starts.

    Raises:
        StudyError: a ceiling is negative.
    """
    try:
        return KillSwitch(disable_file=stop_file(settings.store_path),
                          flag_message="STOP file {file} present",
                          max_cost_usd=settings.max_cost_usd, max_calls=settings.max_calls,
                          calls_unit="provider attempts")
    except ValueError as e:
        raise StudyError(f"invalid run ceiling: {e}") from None


_HALT_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


@contextmanager
def _sigint_flag(flag: list[str], resume: str | None = None) -> Iterator[None]:
    """While cells run, the first SIGINT or SIGTERM (what docker, systemd and CI send) asks for
    a halt at the next cell boundary; a second one aborts at once, without waiting for cells in
    flight: one line, exit 4, and the process ends as a ``kill -9`` would (every acknowledged
    cell is committed, the store verifies, resume reports the orphaned attempts). Raising
    instead would unwind the event loop through every task and print their tracebacks."""
    previous = {s: signal.getsignal(s) for s in _HALT_SIGNALS}

    def handler(signum: int, frame: FrameType | None) -> None:
        if flag[0]:
            where = f"; continue with `{resume}`" if resume else ""
            os.write(2, ("ect: aborted by a second interrupt without waiting for cells in "
                         f"flight; the store holds every committed cell{where}\n").encode())
            os._exit(4)
        name = _HALT_SIGNALS.get(signal.Signals(signum), signal.Signals(signum).name)
        flag[0] = f"{name} (send it again to abort without waiting for cells in flight)"

    try:
        for s in _HALT_SIGNALS:
            signal.signal(s, handler)
    except ValueError:  # not the main thread: no signal handling
        yield
        return
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def execute(
    settings: RunSettings,
    *,
    resume: bool = False,
    preflight: PreflightReport | None = None,
    on_cell: Callable[[CellRecord, RunSummary], None] | None = None,
    on_start: Callable[[RunSummary], None] | None = None,
) -> RunSummary:
    """Run (or resume) the study to its end, ``settings.limit`` or a kill switch.

    Raises:
        PreflightFailed: a preflight check failed (nothing was run).
        StoreNotEmpty: ``run`` on a store with cells (use resume).
        Halted: a kill switch stopped the run at a cell boundary (the summary is attached).
        ClusterLost: (a Halted) no Ray node was left to run a tool call.
        StoreInUse: another process is running or resuming this store.
        ProviderMismatch: ``resume`` under another provider than the store was run with.
    """
    if settings.concurrency < 1:
        raise StudyError("--concurrency must be at least 1")
    if settings.executor not in EXECUTORS:
        raise StudyError(f"unknown executor {settings.executor!r} ({', '.join(EXECUTORS)})")
    kill_switch = _run_kill_switch(settings)
    if resume:
        check_resume_provider(settings)
    report = preflight or run_preflight(settings.spec_path, settings.store_path,
                                        settings.provider, sandbox_backend=settings.sandbox_backend)
    if not report.passed:
        raise PreflightFailed(report)
    started = time.monotonic()
    summary = RunSummary(store=str(settings.store_path), total=len(report.rows),
                         provider=settings.provider.name, executor=settings.executor,
                         resume_command=resume_command(settings))
    with _run_lock(settings.store_path), _remote_executor(settings, report) as remote:
        halted = _execute_locked(settings, report, summary, resume=resume, on_cell=on_cell,
                                 on_start=on_start, remote=remote, kill_switch=kill_switch)
        lost = remote is not None and not getattr(remote, "alive", True)
    summary.wall_s = time.monotonic() - started
    if halted:
        summary.halted = halted
        raise (ClusterLost if lost else Halted)(halted, summary)
    return summary


def _execute_locked(settings: RunSettings, report: PreflightReport, summary: RunSummary, *,
                    resume: bool,
                    on_cell: Callable[[CellRecord, RunSummary], None] | None,
                    on_start: Callable[[RunSummary], None] | None,
                    remote: ToolExecutor | None, kill_switch: KillSwitch) -> str | None:
    """The run proper, under the store's run lock. Returns the halt reason, if any."""
    from runner.sandbox import ToolSandbox, select_backend
    from runner.worlds import closed_loop_checkpoints, write_snapshot

    assert report.spec is not None
    spec, rows = report.spec, report.rows
    throttle = throttle_settings(settings, spec)
    summary.throttle = throttle
    ctx_simulated = settings.provider.simulated
    summary.on_transport_failure = spec.provider.on_transport_failure
    store = _open_or_create_store(settings, report, resume=resume,
                                  executor=remote,
                                  throttle=throttle)
    try:
        summary.committed = store.count - 1
        cell_ids = set()
        for rec in store.records(1):
            committed = CellRecord.from_json(rec.body, f"record {rec.seq}")
            cell_ids.add(committed.cell_id)
            summary.stop_reasons[committed.result.stop_reason.value] += 1
            summary.cost_usd += committed.result.outcome.cost_usd
            summary.failures.add(committed)
        replay = None
        if resume:
            summary.orphan_attempts = len(_attempts_only(store.orphan_attempts(cell_ids)))
            if not settings.provider.simulated:
                replay = replay_cache(store, cell_ids)
        end = len(rows) if settings.limit is None else min(len(rows), settings.limit)
        summary.target = end
        todo = rows[summary.committed:end]
        if on_start is not None:
            on_start(summary)
        with tempfile.TemporaryDirectory(prefix="ect-worlds-") as tmp:
            snapdir = Path(tmp)
            for world in spec.worlds:
                write_snapshot(world, snapdir)
            limits = sandbox_limits(spec.sandbox)
            ctx = _Context(
                spec=spec,
                checkpoints={c.checkpoint_id: c for c in closed_loop_checkpoints()},
                provider_factory=_make_provider_factory(spec, settings.provider, report.credential,
                                                        throttle, replay),
                store=store,
                executor=remote or LocalExecutor(
                    ToolSandbox(select_backend(settings.sandbox_backend), snapdir, limits),
                    settings.concurrency),
                attempts=[0],
                tool_calls=[0],
                simulated=settings.provider.simulated,
                kill_switch=kill_switch,
                halt_on_transport=spec.provider.on_transport_failure == "halt",
                throttle=throttle.throttle() if ctx_simulated else None,
            )
            flag = [""]
            with _sigint_flag(flag, resume_command(settings)):
                try:
                    halted = anyio.run(_drive, ctx, settings, todo, summary, flag, on_cell)
                except BaseExceptionGroup as group:
                    raise _first_ect_error(group) from group
        summary.provider_attempts = ctx.attempts[0]
        summary.tool_calls = ctx.tool_calls[0]
        summary.tool_retries = ctx.tool_retries[0]
        summary.replayed_attempts = replay.replayed if replay is not None else 0
        if halted:
            _journal_halt(store, rows, summary, halted)
        summary.accounting = store_accounting(
            store, cell_ids | {r.cell_id for r in rows[:summary.committed]})
        store.checkpoint()
    finally:
        store.close()
    return halted


def _journal_halt(store: Store, rows: list[ScheduleRow], summary: RunSummary,
                  reason: str) -> None:
    """Journal the halt (when, at which cell, why) beside the attempts: the accounting of
    ``ect store show``, ``ect view`` and the report lists every halt of the run."""
    from runner.providers._http import utc_now

    nxt = rows[summary.committed] if summary.committed < len(rows) else None
    transport = bool(summary.transport_halts)
    cell = summary.transport_halts[0] if transport else (nxt.cell_id if nxt else "")
    row = next((r.row for r in rows if r.cell_id == cell), None)
    entry = HaltEntry(utc_now(), cell, row, "transport" if transport else "stop", reason)
    seq = store.attempt_begin(halt_entry(entry))
    store.attempt_end(seq, {"halt": "recorded"})


@contextmanager
def _remote_executor(settings: RunSettings,
                     report: PreflightReport) -> Iterator[RayExecutor | None]:
    """The Ray executor for ``--executor ray`` (connected, every node preflighted), else None.

    Started before the store is opened so the header can record every node's preflight; a
    cluster that cannot be reached, or has no node that passes, refuses the run (exit 3).
    """
    if settings.executor != "ray":
        yield None
        return
    from runner.study._ray import NodeExpectations, RayExecutor

    assert report.spec is not None and report.lock is not None
    spec = report.spec
    expectations = NodeExpectations.for_run(
        report.lock, spec.worlds, settings.sandbox_backend, spec.sandbox, report.probes)
    executor = RayExecutor.start(settings.ray_address, expectations)
    try:
        yield executor
    finally:
        executor.close()


def _first_ect_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first deliberate error in a task group's exception group (so the CLI can report it in
    one line) -- an interrupt, an ``EctError`` or an ``OSError`` (a full disk) --, else the
    group itself: anything else is a bug and keeps its traceback."""
    if group.subgroup(lambda e: isinstance(e, KeyboardInterrupt)) is not None:
        return KeyboardInterrupt()
    matched = group.subgroup(lambda e: isinstance(e, EctError | OSError))
    while matched is not None:
        first = matched.exceptions[0]
        if not isinstance(first, BaseExceptionGroup):
            return first
        matched = first
    return group


def _halt_reason(ctx: _Context, summary: RunSummary, flag: list[str]) -> str | None:
    if flag[0]:
        return flag[0]
    return ctx.kill_switch.halt_reason(spent_usd=summary.cost_usd, calls=ctx.attempts[0])


async def _drive(ctx: _Context, settings: RunSettings, todo: list[ScheduleRow],
                 summary: RunSummary, flag: list[str],
                 on_cell: Callable[[CellRecord, RunSummary], None] | None) -> str | None:
    """Start cells in canonical order (at most ``concurrency`` in flight); commit in order.

    Returns the halt reason when a kill switch stopped the run before every cell started.
    """
    done: dict[int, tuple[Trajectory, CellRecord]] = {}
    ready = [anyio.Event() for _ in todo]
    slots = anyio.Semaphore(settings.concurrency)
    halted: list[str | None] = [None]

    async def worker(i: int) -> None:
        try:
            done[i] = await _run_cell(ctx, todo[i])
        except ExecutorLost as e:  # no node left: halt here, the cell runs again on resume
            halted[0] = halted[0] or str(e)
        except TransportFailed as e:  # no outcome: not committed, runs again on resume
            halted[0] = halted[0] or str(e)
            summary.transport_halts.append(e.cell_id)
            log.warning("provider.transport_failure", row=todo[i].row, cell_id=e.cell_id,
                        role=e.role, kind=e.failure.kind, status=e.failure.status,
                        policy="halt", committed=False)
        finally:
            ready[i].set()
            slots.release()

    async def launcher() -> None:
        for i in range(len(todo)):
            await slots.acquire()
            reason = halted[0] or _halt_reason(ctx, summary, flag)
            if reason is not None:
                halted[0] = reason
                slots.release()
                for event in ready[i:]:
                    event.set()  # wake the committer: nothing more will start
                return
            tg.start_soon(worker, i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(launcher)
        for i in range(len(todo)):
            await ready[i].wait()
            if i not in done:
                break  # halted before cell i started
            trajectory, record = done.pop(i)
            # The spend is counted before the append is awaited (it runs in a worker thread),
            # so the launcher, which may run meanwhile, checks the ceiling against it.
            summary.stop_reasons[trajectory.stop_reason.value] += 1
            summary.cost_usd += trajectory.cost_usd
            summary.failures.add(record)
            await anyio.to_thread.run_sync(ctx.store.append, record.to_json())
            summary.committed += 1
            summary.committed_now += 1
            summary.provider_attempts = ctx.attempts[0]  # so far: on_cell shows it live
            summary.tool_calls = ctx.tool_calls[0]
            if summary.committed % settings.checkpoint_every == 0:
                await anyio.to_thread.run_sync(ctx.store.checkpoint)
            failed = record_failures(record)
            for f in failed:
                log.warning("provider.failure", row=record.row, cell_id=record.cell_id,
                            pipeline=record.schedule_row.policy, role=f.role, kind=f.kind,
                            failure_class=f.failure_class, status=f.status, committed=True)
            log.info("cell.committed", row=record.row, cell_id=record.cell_id,
                     stop_reason=trajectory.stop_reason.value,
                     result_digest=record.result_digest, provider_failures=len(failed),
                     transport_failures=sum(f.failure_class == "transport" for f in failed))
            if on_cell is not None:
                on_cell(record, summary)
    return halted[0]
