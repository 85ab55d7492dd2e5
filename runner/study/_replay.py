"""``ect replay``: re-score every cell from the store alone (docs/store.md, "Blobs").

For each committed cell the trajectory is run again with the same code, but the provider is a
replay of the stored raw responses (each request the engine rebuilds must hash to the recorded
request digest, so the planner saw exactly what it saw the first time) and the tools are a replay
of the recorded tool responses. The cell is re-scored and its result digest compared with the
recorded one. No network, no credential and no sandbox child are needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from runner.canonical import JsonObject, JsonRecord, loads_strict, raw_digest
from runner.errors import ExitCategory, FormatError, StudyError
from runner.loop import DecisionVerdict
from runner.policies import ToolCallAction
from runner.providers import (
    AttemptObserver,
    ProviderFailure,
    ProviderRequest,
    ProviderResponse,
    ProviderResult,
    RawExchange,
)
from runner.study._records import AuditCall, CellRecord, RunHeader
from runner.study._spec import StudySpec, find_recorded_spec, load_spec
from runner.worlds import TaskCheckpoint

if TYPE_CHECKING:
    from runner.store import Store

__all__ = ["ReplayDiverged", "ReplayMismatch", "ReplayRefused", "ReplayReport", "replay_store"]


class ReplayDiverged(StudyError):
    """The replayed trajectory asked for something the recorded one did not."""

    exit_category = ExitCategory.NEGATIVE


class ReplayRefused(StudyError):
    """The store does not verify in full: nothing recorded in it can be trusted to replay."""

    exit_category = ExitCategory.REFUSED


@dataclass(frozen=True, slots=True)
class ReplayMismatch(JsonRecord):
    """One cell that did not replay to its recorded result."""

    row: int
    cell_id: str
    detail: str


@dataclass
class ReplayReport(JsonRecord):
    cells: int = 0
    reproduced: int = 0
    mismatches: list[ReplayMismatch] = field(default_factory=list)


def _recorded_failure(call: AuditCall) -> ProviderFailure:
    """The provider failure an audited call recorded."""
    assert call.failure is not None  # AuditCall.from_json: a failed call has its failure
    try:
        return call.failure.provider_failure()
    except ValueError as e:
        raise ReplayDiverged(f"the recorded failure cannot be replayed: {e}") from None


class _ReplayProvider:
    """The stored calls of one cell, answered in order (a :class:`runner.providers.Provider`)."""

    def __init__(self, calls: tuple[AuditCall, ...], store: Store, name: str) -> None:
        self._calls = list(calls)
        self._store = store
        self.name = name
        self.model = "replay"
        from runner.providers import is_simulated  # the provider table says

        self.simulated = is_simulated(name)

    async def generate(self, request: ProviderRequest, *,
                       observer: AttemptObserver | None = None) -> ProviderResult:
        if not self._calls:
            raise ReplayDiverged("the replay asked the provider more often than the run did")
        call = self._calls.pop(0)
        sent = raw_digest(request.canonical())  # as the run's _Journaled recorded it
        if call.request != sent:
            raise ReplayDiverged("the rebuilt request differs from the recorded one "
                                 f"({sent} != {call.request})")
        raw = tuple(RawExchange(self._store.get_blob(x.request),
                                self._store.get_blob(x.response) if x.response else None)
                    for x in call.raw)
        if call.parsed is not None:
            response = ProviderResponse.from_json(loads_strict(self._store.get_blob(call.parsed)),
                                                  "parsed")
            return ProviderResult(response, None, call.attempts, raw)
        return ProviderResult(None, _recorded_failure(call), call.attempts, raw)


async def _replay_cell(record: CellRecord, store: Store, header: RunHeader,
                       checkpoints: dict[str, TaskCheckpoint], spec: StudySpec) -> str:
    from runner.study._cell import cell_result, run_cell_trajectory

    row = record.schedule_row
    provider = _ReplayProvider(record.audit.calls, store, header.provider)
    tools = [d for d in record.result.decisions if d.verdict.ran_tool]

    async def execute_tool(world_id: str, tool_id: str, args: JsonObject) -> JsonObject:
        if not tools:
            raise ReplayDiverged("the replay made a tool call the run did not make")
        d = tools.pop(0)
        if (not isinstance(d.action, ToolCallAction) or d.action.tool_id != tool_id
                or d.action.args != args):
            raise ReplayDiverged(f"tool call {tool_id} differs from the recorded one")
        if d.verdict is DecisionVerdict.TOOL_FAILED:
            from runner.sandbox import WorkerFailed

            raise WorkerFailed(d.tool_error or "")
        if d.tool_response is None:
            raise ReplayDiverged(f"tool call {tool_id} has no recorded response")
        return d.tool_response

    trajectory = await run_cell_trajectory(spec, row, checkpoints[row.checkpoint_id],
                                           provider, execute_tool)
    return cell_result(row, trajectory, simulated=header.simulated).digest()


def replay_store(store_path: Path, spec_path: Path | None = None, *,
                 on_cell: Callable[[int, int], None] | None = None) -> ReplayReport:
    """Replay every committed cell of ``store_path`` and compare result digests.

    ``spec_path`` defaults to the spec the store's header records. ``on_cell(done, total)`` is
    called after each cell (for progress output).

    Raises:
        ReplayRefused: the store does not verify in full, or its header is not a run's
            (:class:`RunHeader`).
        SpecError: the spec (``spec_path``, else the one the header records) is malformed, or
            the recorded one is found neither from here nor in the study's folder.
    """
    from runner.store import Store, verify_store
    from runner.worlds import closed_loop_checkpoints

    verified = verify_store(store_path, full=True)
    if verified.damage == "not_a_store":  # a wrong path, named as every command names it
        verified.raise_for_damage()
    if not verified.ok:
        raise ReplayRefused(f"{store_path} does not verify: {verified.label}: {verified.detail}; "
                            "nothing was replayed")
    report = ReplayReport()
    checkpoints = {c.checkpoint_id: c for c in closed_loop_checkpoints()}
    with Store.open(store_path, readonly=True) as store:
        try:
            header = RunHeader.from_header(store.header)
        except FormatError as e:
            raise ReplayRefused(f"{store_path} is not a run store: {e}; nothing was replayed") \
                from e
        spec = load_spec(spec_path or find_recorded_spec(Path(header.spec), store_path))
        total = store.count - 1  # every record after the header is a cell
        for rec in store.records(1):
            if on_cell is not None and report.cells:
                on_cell(report.cells, total)
            report.cells += 1
            try:
                record = CellRecord.from_json(rec.body, f"record {rec.seq}")
            except FormatError as e:
                body = rec.body
                report.mismatches.append(ReplayMismatch(
                    body.get("row", rec.seq) if isinstance(body.get("row"), int) else rec.seq,
                    str(body.get("cell_id", "?")), str(e)))
                continue
            try:
                got = anyio.run(_replay_cell, record, store, header, checkpoints, spec)
            except ReplayDiverged as e:
                report.mismatches.append(ReplayMismatch(record.row, record.cell_id, str(e)))
                continue
            if got == record.result_digest:
                report.reproduced += 1
            else:
                report.mismatches.append(ReplayMismatch(
                    record.row, record.cell_id,
                    f"result digest {got} != recorded {record.result_digest}"))
        if on_cell is not None:
            on_cell(report.cells, total)
    return report
