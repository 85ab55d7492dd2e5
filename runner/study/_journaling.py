"""Journaling a cell's provider attempts before they are sent, and what resume takes back from the
journal (docs/store.md, docs/providers.md).

:class:`_Journaled` wraps a cell's provider: every attempt is journaled in the store before it is
sent and ended (with the response bytes of a live reply) when it returns. For cells that never
committed, :func:`orphan_attempts` lists the journaled attempts and :func:`replay_cache` gives
the well-formed replies resume replays instead of paying for them again. A transport failure
that survives its retry under ``on_transport_failure = "halt"`` raises :class:`TransportFailed`
(the cell is not committed). Reading the journal as typed entries is :mod:`runner.study._journal`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from runner.canonical import raw_digest
from runner.errors import ExitCategory, StudyError
from runner.providers import (
    AttemptObserver,
    AttemptRecord,
    Provider,
    ProviderFailure,
    ProviderRequest,
    ProviderResult,
    ReplayCache,
    Throttle,
)
from runner.providers._throttle import estimate_tokens
from runner.study._journal import NestedObserver, read_journal
from runner.study._records import (
    CellRecord,
    ScheduleRow,
)

if TYPE_CHECKING:
    from runner.store import JournalRow, Store

__all__ = ["TransportFailed", "orphan_attempts", "replay_cache"]


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
