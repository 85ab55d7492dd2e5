"""One cell of a run: its provider (journaled), its trajectory, its result and its record with the
audit of every provider call (docs/study.md, docs/store.md).

``run`` and ``replay`` build a cell's trajectory and result through the same functions
(:func:`run_cell_trajectory`, :func:`cell_result`), so a replay rebuilds exactly what the run
sent and committed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from runner import __version__
from runner.canonical import JsonObject, canonical_bytes, raw_digest
from runner.control import KillSwitch
from runner.ect import ledger_digest
from runner.errors import StudyError
from runner.loop import ToolCallFn, Trajectory, TrajectoryConfig, run_trajectory, score, trace_bytes
from runner.policies import CellIdentity
from runner.providers import (
    Credential,
    GenerationConfig,
    PriceTable,
    Provider,
    ReplayCache,
    Throttle,
)
from runner.study._executor import ToolExecutor
from runner.study._journaling import _Journaled
from runner.study._preflight import ProviderChoice
from runner.study._records import (
    AuditCall,
    AuditFailure,
    AuditGroup,
    CellRecord,
    CellResult,
    RawExchangeRef,
    ScheduleRow,
)
from runner.study._settings import ThrottleSettings
from runner.study._spec import StudySpec
from runner.worlds import TaskCheckpoint

if TYPE_CHECKING:
    from runner.store import Store

__all__ = ["cell_result", "run_cell_trajectory"]


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
