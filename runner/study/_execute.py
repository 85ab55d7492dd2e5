"""Executing a locked study: run, resume, export, replay (docs/store.md, docs/study.md).

Cells may run concurrently but are committed strictly in canonical order, each one atomically
(``Store.append`` returns only after COMMIT). Every provider attempt is journaled before it is
sent. Kill switches (a ``STOP`` file beside the store, a cost ceiling and a call ceiling, all
three one :class:`runner.control.KillSwitch`; and Ctrl-C) are checked before each cell starts:
in-flight cells finish and commit, then the run halts with :class:`Halted` at a cell boundary,
and ``ect resume`` continues from the verified prefix.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import structlog

from runner import __version__
from runner.canonical import JsonObject, JsonValue, canonical_bytes, raw_digest
from runner.control import KillSwitch
from runner.ect import ledger_digest
from runner.errors import EctError, ExitCategory, FormatError, StudyError
from runner.loop import ToolCallFn, Trajectory, TrajectoryConfig, run_trajectory, score, trace_bytes
from runner.policies import CellIdentity
from runner.providers import (
    AttemptObserver,
    AttemptRecord,
    Credential,
    GenerationConfig,
    PriceTable,
    Provider,
    ProviderFailure,
    ProviderRequest,
    ProviderResult,
    ReplayCache,
    Throttle,
    failure_class,
)
from runner.providers._throttle import estimate_tokens
from runner.study._executor import EXECUTORS, ExecutorLost, LocalExecutor, ToolExecutor
from runner.study._journal import (
    Accounting,
    HaltEntry,
    NestedObserver,
    halt_entry,
    read_journal,
    store_accounting,
)
from runner.study._preflight import PreflightFailed, PreflightReport, ProviderChoice, run_preflight
from runner.study._records import (
    AuditCall,
    AuditFailure,
    AuditGroup,
    CellRecord,
    CellResult,
    RawExchangeRef,
    RunHeader,
    ScheduleRow,
)
from runner.study._spec import StudySpec, sandbox_limits
from runner.worlds import TaskCheckpoint

if TYPE_CHECKING:
    from types import FrameType

    from runner.store import JournalRow, Store
    from runner.study._ray import RayExecutor

__all__ = [
    "ClusterLost",
    "Halted",
    "ProviderMismatch",
    "RecordedRun",
    "ResumeMismatch",
    "RunSettings",
    "RunSummary",
    "StoreInUse",
    "StoreNotEmpty",
    "TransportFailed",
    "cell_result",
    "check_resume_provider",
    "execute",
    "orphan_attempts",
    "resume_command",
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


class TransportFailed(StudyError):
    """A provider call's transport failure survived its single retry under
    ``on_transport_failure = "halt"``: the cell produced no outcome and is not committed (the
    run halts at the next cell boundary; ``ect resume`` runs the cell again)."""

    exit_category = ExitCategory.HALTED

    def __init__(self, cell_id: str, role: str, failure: ProviderFailure, attempts: int) -> None:
        self.cell_id = cell_id
        self.role = role
        self.failure = failure
        status = f" HTTP {failure.status}" if failure.status is not None else ""
        super().__init__(f"provider transport failure in {cell_id} ({role} call: "
                         f"{failure.kind}{status} after {attempts} attempt"
                         f"{'s' if attempts != 1 else ''}: {failure.detail}); "
                         f"on_transport_failure = \"halt\": the cell was not committed")


class StoreNotEmpty(StudyError):
    """``run`` was pointed at a store that already has cells: use ``resume``."""

    exit_category = ExitCategory.REFUSED


class ProviderMismatch(StudyError):
    """``resume`` was asked to continue a store under another provider than it was run with
    (the cells would mix two providers' outputs in one study)."""

    exit_category = ExitCategory.REFUSED


class StoreInUse(StudyError):
    """Another run or resume is writing to this store (two writers would interleave rows)."""

    exit_category = ExitCategory.REFUSED


def orphan_attempts(store: Store) -> list[JournalRow]:
    """The provider attempts (and tool retries) journaled in ``store`` (an open
    ``runner.store.Store``) for cells that never committed, halts left out, each record read
    as a :class:`CellRecord` (the store knows no record shape: it is given the committed cell
    ids).

    Raises:
        RecordFormatError: a committed record is not a cell record.
    """
    committed = {CellRecord.from_json(rec.body, f"record {rec.seq}").cell_id
                 for rec in store.records(1)}
    return _attempts_only(store.orphan_attempts(committed))


def _attempts_only(entries: list[JournalRow]) -> list[JournalRow]:
    """The journal's attempt entries without its halt entries (a halt is not an attempt)."""
    return [a for a in entries if "halt" not in a.begin]


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


@dataclass(frozen=True)
class RunSettings:
    spec_path: Path
    store_path: Path
    provider: ProviderChoice = field(default_factory=ProviderChoice)
    concurrency: int = 1
    limit: int | None = None
    max_cost_usd: float | None = None
    max_calls: int | None = None
    sandbox_backend: str | None = None
    # A signed checkpoint after every committed cell: deleting committed cells is then always
    # detectable against the external checkpoint (docs/store.md), at ~1 ms a cell.
    checkpoint_every: int = 1
    # Where sandboxed tool calls run: "local" (this machine) or "ray" (a Ray cluster at
    # ray_address, default $RAY_ADDRESS or "auto"); never part of a cell's result.
    executor: str = "local"
    ray_address: str | None = None
    # The throttle (None: the spec's [provider] default; 0: off). Pacing changes no result.
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    """The pacing of a run's provider attempts; ``None`` means no limit. The run header and the
    run summary record it (:meth:`to_json`); it changes no result, so it is not in the lock."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    def to_json(self) -> dict[str, JsonValue]:
        return {"requests_per_minute": self.requests_per_minute,
                "tokens_per_minute": self.tokens_per_minute}

    def throttle(self) -> Throttle:
        """A fresh limiter with these limits."""
        return Throttle(self.requests_per_minute, self.tokens_per_minute)


def throttle_settings(settings: RunSettings, spec: StudySpec) -> ThrottleSettings:
    """The run's throttle: the settings' values, else the spec's [provider] defaults
    (0 in the settings turns a spec default off); ``None`` means no limit."""
    rpm = (spec.provider.requests_per_minute if settings.requests_per_minute is None
           else settings.requests_per_minute or None)
    tpm = (spec.provider.tokens_per_minute if settings.tokens_per_minute is None
           else settings.tokens_per_minute or None)
    return ThrottleSettings(rpm, tpm)


@dataclass
class FailureCounts:
    """Provider failures counted by class, kind, role and pipeline, and the cells carrying one."""

    by_class: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    by_role: Counter[str] = field(default_factory=Counter)
    by_pipeline: Counter[str] = field(default_factory=Counter)
    cells: list[str] = field(default_factory=list)
    transport_cells: list[str] = field(default_factory=list)

    def add(self, record: CellRecord) -> None:
        found = record_failures(record)
        for f in found:
            self.by_class[f.failure_class] += 1
            self.by_kind[f.kind] += 1
            self.by_role[f.role] += 1
            self.by_pipeline[record.schedule_row.policy] += 1
        if found:
            self.cells.append(record.cell_id)
            if any(f.failure_class == "transport" for f in found):
                self.transport_cells.append(record.cell_id)

    @property
    def total(self) -> int:
        return sum(self.by_class.values())

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "total": self.total,
            "by_class": {c: self.by_class.get(c, 0) for c in ("transport", "model_output")},
            "by_kind": dict(sorted(self.by_kind.items())),
            "by_role": dict(sorted(self.by_role.items())),
            "by_pipeline": dict(sorted(self.by_pipeline.items())),
            "cells": len(self.cells),
            "cells_with_transport_failure": [c for c in sorted(self.transport_cells)],
        }


@dataclass(frozen=True, slots=True)
class CallFailure:
    """One failed provider call of a committed cell, as the accounting counts it: its kind
    (``"sdk_error"`` for one this runner does not know), class, role (``"unknown"`` in a store
    written before calls recorded it) and HTTP status."""

    kind: str
    failure_class: str
    role: str
    status: int | None

    def to_json(self) -> dict[str, JsonValue]:
        return {"kind": self.kind, "class": self.failure_class, "role": self.role,
                "status": self.status}


def record_failures(record: CellRecord) -> list[CallFailure]:
    """Every failed provider call of a committed cell, in call order."""
    return [CallFailure(f.known_kind, failure_class(f.known_kind), f.role or "unknown", f.status)
            for f in (call.failure for call in record.audit.calls) if f is not None]


@dataclass
class RunSummary:
    store: str
    total: int
    committed: int = 0
    committed_now: int = 0
    stop_reasons: Counter[str] = field(default_factory=Counter)
    cost_usd: float = 0.0
    provider_attempts: int = 0
    tool_calls: int = 0
    wall_s: float = 0.0
    halted: str | None = None
    orphan_attempts: int = 0
    provider: str = "simulated"
    executor: str = "local"
    tool_retries: int = 0
    failures: FailureCounts = field(default_factory=FailureCounts)
    throttle: ThrottleSettings | None = None  # None: not set (a summary made outside a run)
    on_transport_failure: str = "halt"
    # transport failures that halted a cell this session (the cell was not committed)
    transport_halts: list[str] = field(default_factory=list)
    # responses journaled for cells that never committed, replayed instead of paid again
    replayed_attempts: int = 0
    # the cells this session aims at: ``total``, or the end row under --limit
    target: int | None = None
    # the command that continues this run as printed (store and credential; see resume_command)
    resume_command: str | None = None
    # every attempt the store's journal holds, failures, halts and billed cost (None: not read)
    accounting: Accounting | None = None

    @property
    def goal(self) -> int:
        """The committed count this session runs to (``--limit`` counted): what an ETA uses."""
        return self.total if self.target is None else min(self.target, self.total)

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "store": self.store,
            "total": self.total,
            "committed": self.committed,
            "committed_now": self.committed_now,
            "stop_reasons": dict(sorted(self.stop_reasons.items())),
            "cost_usd": round(self.cost_usd, 9),
            "provider": self.provider,
            "provider_attempts": self.provider_attempts,
            "tool_calls": self.tool_calls,
            "wall_s": round(self.wall_s, 3),
            "halted": self.halted,
            "orphan_attempts": self.orphan_attempts,
            "executor": self.executor,
            "tool_retries": self.tool_retries,
            "provider_failures": self.failures.to_json(),
            "on_transport_failure": self.on_transport_failure,
            "transport_halts": list(self.transport_halts),
            "replayed_attempts": self.replayed_attempts,
            "throttle": self.throttle.to_json() if self.throttle is not None else {},
            "resume_command": self.resume_command,
            "accounting": self.accounting.to_json() if self.accounting is not None else None,
        }


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


# --- providers ----------------------------------------------------------------------------


def _make_provider_factory(spec: StudySpec, choice: ProviderChoice,
                           credential: Credential | None = None,
                           throttle: ThrottleSettings | None = None,
                           replay: ReplayCache | None = None) -> Callable[[], Provider]:
    """Return a factory giving the provider for one cell (fresh per cell when simulated).

    ``credential`` is the one preflight loaded (a variable is removed from the environment when
    read, so it cannot be read twice); without it the credential is loaded here. The provider
    is built by :func:`runner.providers.build` (the one validation of provider settings).
    """
    from runner.providers import RetryPolicy, build

    if choice.simulated:
        from runner.policies import CriticBehaviour, PlannerBehaviour, simulated_responder

        planner = PlannerBehaviour.from_json(spec.simulated.get("planner", {}))
        critic = CriticBehaviour.from_json(spec.simulated.get("critic", {}))
        return lambda: build(choice.name, model=choice.model,
                             responder=simulated_responder(planner, critic))
    shared = build(choice.name, model=choice.model or spec.model.name, base_url=choice.base_url,
                   credential=credential, credential_file=choice.credential_file,
                   credential_env=choice.credential_env, timeout_s=spec.model.timeout_s,
                   retry_policy=RetryPolicy(max_retries=spec.identical_retries_before_output),
                   # one limiter for every cell: the cells share this provider
                   throttle=(throttle or ThrottleSettings()).throttle())
    if replay is not None:
        shared.replay = replay  # type: ignore[attr-defined]  # both HTTP adapters have it
    return lambda: shared


def replay_cache(store: Store, committed: set[str]) -> ReplayCache:
    """The replies journaled (with their bytes) for cells that never committed that resume may
    replay into those cells' re-runs when the request bytes are identical: only complete,
    well-formed successes (:func:`runner.providers.replayable`); a malformed or truncated body,
    an HTTP error or an attempt that never ended is requested again."""
    from runner.errors import StoreError

    cache = ReplayCache()
    for entry in read_journal(store, exclude=committed):
        attempt = entry.ended
        if attempt is None or attempt.response_sha256 is None:
            continue
        try:
            response = store.get_blob(attempt.response_sha256)
        except StoreError:
            continue  # the bytes were not kept (an older run): the request is sent again
        cache.add(entry.cell_id, attempt, response)
    return cache


class _Journaled:
    """A provider wrapper that journals every attempt in the store before it is sent."""

    def __init__(self, inner: Provider, store: Store, row: ScheduleRow, counter: list[int],
                 halt_on_transport: bool = False, throttle: Throttle | None = None) -> None:
        self._inner = inner
        self.throttle = throttle
        self._halt = halt_on_transport
        self.roles: list[str] = []
        self._store = store
        self._row = row
        self._seqs: dict[str, int] = {}
        self._counter = counter
        # sha256 of each request's canonical form, in call order (replay rebuilds and compares)
        self.requests: list[str] = []
        self.name = inner.name
        self.model = inner.model
        self.simulated = inner.simulated

    async def generate(self, request: ProviderRequest, *,
                       observer: AttemptObserver | None = None) -> ProviderResult:
        canonical = request.canonical()
        if self.throttle is not None and self.simulated:
            # a live adapter paces each HTTP attempt itself; the simulated one is paced here
            await self.throttle.acquire(estimate_tokens(canonical))
        self.requests.append(raw_digest(canonical))
        self.roles.append(request.role)
        result: ProviderResult = await self._inner.generate(
            request, observer=self if observer is None else NestedObserver(observer, self))
        if self._halt and result.failure is not None and result.failure.transport:
            raise TransportFailed(self._row.cell_id, request.role, result.failure,
                                  len(result.attempts))
        return result

    async def begin(self, record: AttemptRecord) -> None:
        # Durable before the attempt is sent (awaited), but off the event loop: the other
        # cells' calls go on while SQLite commits.
        self._counter[0] += 1
        self._seqs[record.attempt_id] = await anyio.to_thread.run_sync(
            self._store.attempt_begin,
            {"cell_id": self._row.cell_id, "row": self._row.row, "attempt": record.to_json()})

    async def end(self, record: AttemptRecord) -> None:
        seq = self._seqs.pop(record.attempt_id)
        await anyio.to_thread.run_sync(self._store.attempt_end, seq,
                                       {"attempt": record.to_json()})

    async def end_with_response(self, record: AttemptRecord, response: bytes) -> None:
        """The end of an attempt the API answered, its response bytes kept as a blob in the
        same transaction: if the cell never commits, resume replays them instead of paying for
        the same request again."""
        if self.simulated:  # recomputed offline on resume: nothing to keep
            await self.end(record)
            return
        seq = self._seqs.pop(record.attempt_id)
        await anyio.to_thread.run_sync(
            functools.partial(self._store.attempt_end, seq, {"attempt": record.to_json()},
                              blobs=(response,)))


# --- one cell -----------------------------------------------------------------------------


@dataclass
class _Context:
    spec: StudySpec
    checkpoints: dict[str, TaskCheckpoint]
    provider_factory: Callable[[], Provider]
    store: Store
    executor: ToolExecutor
    attempts: list[int]
    tool_calls: list[int]
    simulated: bool
    tool_retries: list[int] = field(default_factory=lambda: [0])
    kill_switch: KillSwitch = field(default_factory=KillSwitch)  # STOP file and ceilings
    halt_on_transport: bool = True  # the lock's on_transport_failure == "halt"
    throttle: Throttle | None = None  # paces the simulated provider (a live one paces its own)


async def run_cell_trajectory(spec: StudySpec, row: ScheduleRow, checkpoint: TaskCheckpoint,
                              provider: Provider, execute_tool: ToolCallFn) -> Trajectory:
    """One cell's trajectory: a fresh pipeline, the row's seed, the spec's budget and prices.

    ``run`` and ``replay`` both go through here, so a replay rebuilds exactly the requests the
    run sent (its provider checks each against the recorded request digest).
    """
    from runner.policies import PipelineParams, make_pipeline

    generation = GenerationConfig(temperature=spec.model.temperature, seed=row.seed,
                                  max_output_tokens=spec.model.max_output_tokens)
    cell = CellIdentity(row.cell_id, row.seed)
    pipeline = make_pipeline(row.policy, provider, PipelineParams(generation=generation, cell=cell))
    config = TrajectoryConfig(
        max_decisions=spec.budget.max_decisions,
        max_additional_tool_calls=spec.budget.max_additional_tool_calls,
        stop_rules=spec.stop_rules,
        generation=generation,
        price=PriceTable(spec.price_input_per_mtok, spec.price_output_per_mtok),
    )
    return await run_trajectory(checkpoint, pipeline, provider, execute_tool, config, cell=cell)


async def _run_cell(ctx: _Context, row: ScheduleRow) -> tuple[Trajectory, CellRecord]:
    provider = _Journaled(ctx.provider_factory(), ctx.store, row, ctx.attempts,
                          halt_on_transport=ctx.halt_on_transport, throttle=ctx.throttle)

    def retried(attempt: JsonObject) -> None:
        # A call lost with its node and re-run elsewhere: journaled, never part of the result.
        ctx.tool_retries[0] += 1
        seq = ctx.store.attempt_begin({"cell_id": row.cell_id, "row": row.row,
                                       "tool_retry": attempt})
        ctx.store.attempt_end(seq, {"tool_retry": "re-run on another node"})

    async def execute_tool(world_id: str, tool_id: str, args: JsonObject) -> JsonObject:
        ctx.tool_calls[0] += 1
        return await ctx.executor.call(world_id, tool_id, args, on_retry=retried)

    trajectory = await run_cell_trajectory(ctx.spec, row, ctx.checkpoints[row.checkpoint_id],
                                           provider, execute_tool)
    # the record's blobs are written off the event loop (one transaction), as is every write
    record = await anyio.to_thread.run_sync(_record, ctx, row, trajectory, provider.requests,
                                            provider.roles)
    return trajectory, record


def cell_result(row: ScheduleRow, t: Trajectory, *, simulated: bool) -> CellResult:
    """The cell result of a finished trajectory (``run`` and ``replay`` both build it here)."""
    base_calls = {c.call_id for c in t.checkpoint.trace}
    return CellResult(
        outcome=score(t, row),
        stop_detail=t.stop_detail,
        decisions=tuple(t.decisions),
        final_certificate=t.accepted.certificate_obj if t.accepted is not None else None,
        ledger_digest=ledger_digest(t.ledger),
        new_receipts=tuple(r for r in t.ledger.receipts if r.call_id not in base_calls),
        notes=t.notes,
        input_tokens=t.input_tokens,
        output_tokens=t.output_tokens,
        simulated=simulated,
        latency_s=t.latency_s,
    )


def _record(ctx: _Context, row: ScheduleRow, t: Trajectory, requests: list[str],
            roles: list[str]) -> CellRecord:
    """The record body. Each audited call keeps the digest of its canonical request, the raw
    exchanges of every attempt and, when it succeeded, the adapter's parsed response (so replay
    works offline for every provider, not only for the simulated one)."""
    result = cell_result(row, t, simulated=ctx.simulated)
    if len(requests) != len(t.provider_results):
        raise StudyError(f"{row.cell_id}: {len(requests)} provider requests but "
                         f"{len(t.provider_results)} results")
    blobs: list[bytes] = []  # every blob of the record, stored in one transaction

    def blob(data: bytes) -> str:
        blobs.append(data)
        return raw_digest(data)

    calls = []
    for request_digest, role, r in zip(requests, roles, t.provider_results, strict=True):
        calls.append(AuditCall(
            request=request_digest,
            parsed=(blob(canonical_bytes(r.response.to_json()))
                    if r.response is not None else None),
            ok=r.ok,
            # a failed call also names its class and the role that made it (the accounting)
            failure=AuditFailure.of(r.failure, role) if r.failure is not None else None,
            attempts=r.attempts,
            raw=tuple(RawExchangeRef(blob(x.request_bytes),
                                     (blob(x.response_bytes)
                                      if x.response_bytes is not None else None))
                      for x in r.raw),
        ))
    first = t.provider_results[0].attempts[0] if t.provider_results and \
        t.provider_results[0].attempts else None
    audit = AuditGroup(
        provider=first.provider if first is not None else None,
        model=first.model if first is not None else None,
        calls=tuple(calls),
    )
    trace = blob(trace_bytes(t))
    ctx.store.put_blobs(blobs)
    return CellRecord(schedule_row=row, result=result, audit=audit,
                      artifacts={"trace": trace},
                      code_version=__version__)


# --- the run ------------------------------------------------------------------------------


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


def _open_or_create_store(settings: RunSettings, report: PreflightReport, *, resume: bool,
                          executor: ToolExecutor | None = None,
                          throttle: ThrottleSettings | None = None) -> Store:
    from runner.store import Store, generate_key, load_signing_key

    key_path = settings.store_path.with_name(settings.store_path.name + ".key")
    if settings.store_path.exists():
        store = Store.open(settings.store_path, signing_key=load_signing_key(key_path))
        cells = store.count - 1  # counted under the run lock, not at preflight
        if not resume and cells > 0:
            store.close()
            raise StoreNotEmpty(f"{settings.store_path} already holds {cells} cells; "
                                f"continue it with `{resume_command(settings)}`")
        if throttle is not None and resume:
            # The header is written once; a resumed session's throttle goes to the log.
            log.info("run.throttle", **throttle.to_json())
        if executor is not None and executor.name != "local":
            # The header is written once; a resumed session's node preflight is kept as a blob.
            log.info("executor.nodes", blob=store.put_blob(canonical_bytes(executor.describe())))
        return store
    if resume:
        raise StudyError(f"{settings.store_path} does not exist: nothing to resume")
    key = load_signing_key(key_path) if key_path.exists() else generate_key(key_path)
    # The lock and the preflight report themselves travel in the store as blobs (named in the
    # header by the sha256 of their bytes), so the store alone says what it was run under.
    assert report.lock is not None and report.lock_digest is not None  # a passing preflight's
    lock_bytes = canonical_bytes(report.lock.to_json())
    preflight_bytes = canonical_bytes(report.to_json())
    executor_bytes = canonical_bytes(executor.describe() if executor is not None
                                     else {"name": "local"})
    header = RunHeader(
        study=report.study,
        lock_digest=report.lock_digest,
        lock_blob=raw_digest(lock_bytes),
        preflight_digest=report.digest,
        preflight_blob=raw_digest(preflight_bytes),
        schedule_rows=len(report.rows),
        spec=str(settings.spec_path),
        provider=report.provider.name,
        simulated=report.provider.simulated,
        # every rule that can end a trajectory (the protocol's limits only, in the frozen study)
        stop_rules=report.spec.stop_rules_in_force() if report.spec is not None else None,
        # the isolation layers in force (Landlock ABI, seccomp mode, cgroups, host uid)
        sandbox_layers=report.sandbox,
        # Where tool calls ran and, for a cluster, every node's preflight (identity, kernel,
        # sandbox layers in force, probe results) and every excluded node with its reason.
        executor=executor.name if executor is not None else "local",
        executor_blob=raw_digest(executor_bytes),
        # the pacing of provider attempts (changes no result, so not in the lock)
        throttle=(throttle or ThrottleSettings()).to_json(),
        # what `ect resume --store S` continues with (with the provider and the throttle)
        run_settings=RecordedRun.of(settings, report.spec).settings_json(),
    )
    return Store.create(settings.store_path, header=header.to_json(), signing_key=key,
                        blobs=(lock_bytes, preflight_bytes, executor_bytes))


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


def check_resume_provider(settings: RunSettings) -> None:
    """A resumed store continues under the provider its header records, or not at all.

    :func:`execute` checks it on ``resume``; a caller that runs the preflight itself may check
    it first (it is cheaper than the preflight and names the real problem).

    Raises:
        ProviderMismatch: the header records another provider than ``settings.provider``.
    """
    if not settings.store_path.exists():
        return  # refused with its own error once the run lock is held
    from runner.store import Store

    with Store.open(settings.store_path, readonly=True) as store:
        try:
            recorded = RunHeader.from_header(store.header).provider
        except FormatError:
            return  # not a run's header: the preflight refuses the store in its own words
    if recorded != settings.provider.name:
        raise ProviderMismatch(f"{settings.store_path} was run with --provider {recorded}; "
                               f"resume it with the same provider")


class ResumeMismatch(ProviderMismatch):
    """``resume`` was given a setting that differs from the one the run header records (the
    field is named; leave the option out and the recorded value is used)."""

    exit_category = ExitCategory.REFUSED


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """What a run was started with, as its header records it: the provider, the model, the
    base URL, the ``--limit``, the concurrency and the throttle (``None``: no limit). ``ect
    resume --store S`` continues with these; only the credential is given again."""

    provider: str
    model: str | None
    base_url: str | None
    limit: int | None
    concurrency: int | None
    requests_per_minute: int | None
    tokens_per_minute: int | None
    complete: bool = True  # False: a header written before it recorded the run's settings

    @classmethod
    def of(cls, settings: RunSettings, spec: StudySpec | None) -> RecordedRun:
        """The settings a run is started with (the model its provider will use)."""
        from runner.providers import PROVIDERS

        choice = settings.provider
        model = choice.model
        if model is None and not choice.simulated and spec is not None:
            model = spec.model.name
        elif model is None and choice.name in PROVIDERS:
            model = PROVIDERS[choice.name].default_model
        throttle = (throttle_settings(settings, spec) if spec is not None
                    else ThrottleSettings(settings.requests_per_minute or None,
                                          settings.tokens_per_minute or None))
        return cls(choice.name, model, choice.base_url, settings.limit, settings.concurrency,
                   throttle.requests_per_minute, throttle.tokens_per_minute)

    def settings_json(self) -> dict[str, JsonValue]:
        """The header's ``run_settings`` (the provider and throttle have fields of their own)."""
        return {"model": self.model, "base_url": self.base_url, "limit": self.limit,
                "concurrency": self.concurrency}

    @classmethod
    def from_header(cls, header: RunHeader) -> RecordedRun:
        def opt_int(obj: JsonObject | None, key: str) -> int | None:
            v = (obj or {}).get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        def opt_str(obj: JsonObject | None, key: str) -> str | None:
            v = (obj or {}).get(key)
            return v if isinstance(v, str) else None

        rs, th = header.run_settings, header.throttle
        return cls(header.provider, opt_str(rs, "model"), opt_str(rs, "base_url"),
                   opt_int(rs, "limit"), opt_int(rs, "concurrency"),
                   opt_int(th, "requests_per_minute"), opt_int(th, "tokens_per_minute"),
                   complete=rs is not None and th is not None)

    @classmethod
    def read(cls, store_path: Path) -> RecordedRun | None:
        """The settings ``store_path``'s header records; None when it is not a run's header."""
        from runner.store import Store

        with Store.open(store_path, readonly=True) as store:
            try:
                return cls.from_header(RunHeader.from_header(store.header))
            except FormatError:
                return None

    def resolve(self, store_path: Path, given: dict[str, object]) -> dict[str, object]:
        """The settings a resume runs with: each option in ``given`` (only those the user typed)
        must equal the record (0 means no limit for the throttle), else it is refused, naming
        the option; every option left out takes the recorded value. ``--limit`` is the one
        exception: it is this session's target, so another value is allowed.

        Raises:
            ResumeMismatch: a given option differs from the record.
        """
        recorded: dict[str, object] = {
            "provider": self.provider, "model": self.model, "base_url": self.base_url,
            "limit": self.limit, "concurrency": self.concurrency,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute}
        if not self.complete:  # an older header: only the provider can be checked
            recorded = {"provider": self.provider}
        out = dict(recorded)
        for name, value in given.items():
            if name not in recorded or name == "limit":
                out[name] = value
                continue
            have = recorded[name]
            same = (value or None) == have if name in ("requests_per_minute",
                                                       "tokens_per_minute") else value == have
            if not same:
                flag = "--" + name.replace("_", "-")
                shown = "none" if have is None else have
                if name == "provider":
                    raise ResumeMismatch(f"{store_path} was run with --provider {shown}; resume "
                                         "it with the same provider (or leave --provider out: "
                                         "the run header records it)")
                raise ResumeMismatch(f"{store_path} was run with {flag} {shown}, not {value}; "
                                     f"leave {flag} out to continue with the recorded value")
        for name in ("requests_per_minute", "tokens_per_minute"):
            if name in recorded and name not in given:
                out[name] = recorded[name] or 0  # recorded None: no limit (not the spec's)
        return out


def resume_command(settings: RunSettings) -> str:
    """The command that continues ``settings``' run as printed: the store and the credential
    (the run header records everything else)."""
    import shlex

    parts = ["ect", "resume", "--store", shlex.quote(str(settings.store_path))]
    choice = settings.provider
    if choice.credential_file is not None:
        parts += ["--credential-file", shlex.quote(choice.credential_file)]
    elif choice.credential_env is not None:
        parts += ["--credential-env", shlex.quote(choice.credential_env)]
    return " ".join(parts)


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
