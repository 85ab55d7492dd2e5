"""The attempt journal read as typed entries (docs/store.md, docs/providers.md).

The store journals, before anything is sent, every provider attempt of every cell (committed
or not), every tool call re-run on another node and every halt of a run; it knows no field of
an entry beyond its ``cell_id``. :func:`read_journal` reads each entry back as a
:class:`JournalEntry` whose provider attempt is an :class:`runner.providers.AttemptRecord`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runner.canonical import JsonObject, JsonRecord, derived, rounded, sorted_map, spec
from runner.errors import EctError
from runner.providers import AttemptObserver, AttemptRecord, PriceTable, Usage

if TYPE_CHECKING:
    from runner.store import Store

__all__ = ["Accounting", "CellAccount", "HaltEntry", "JournalEntry", "NestedObserver", "account",
           "halt_entry", "read_journal", "store_accounting"]


class NestedObserver:
    """Two attempt observers as one: the caller's ``outer`` around the journal's ``inner``.

    ``outer.begin``, then ``inner.begin`` (the journal's entry is durable before the attempt is
    sent; a caller that refuses the attempt leaves no entry), the attempt, then ``inner.end``
    and ``outer.end``. An answered attempt's response bytes go to each observer that keeps
    them (``end_with_response``); the other gets ``end``. This is how a journaled provider
    passes its caller's observer through (``_Journaled.generate``) instead of dropping it.
    """

    def __init__(self, outer: AttemptObserver, inner: AttemptObserver) -> None:
        self.outer = outer
        self.inner = inner

    async def begin(self, record: AttemptRecord) -> None:
        await self.outer.begin(record)
        await self.inner.begin(record)

    async def end(self, record: AttemptRecord) -> None:
        await self.inner.end(record)
        await self.outer.end(record)

    async def end_with_response(self, record: AttemptRecord, response: bytes) -> None:
        for observer in (self.inner, self.outer):
            keep = getattr(observer, "end_with_response", None)
            if keep is not None:
                await keep(record, response)
            else:
                await observer.end(record)


@dataclass(frozen=True, slots=True)
class HaltEntry(JsonRecord):
    """A run that halted: when (UTC), at which cell (the first one not committed), why, and the
    kind of halt (``transport``: a transport failure survived its retry; ``stop``: a STOP file,
    a ceiling, an interrupt or a lost cluster)."""

    utc: str
    cell_id: str
    row: int | None
    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journaled event: a provider attempt (``begun`` set; ``ended`` None while it was in
    flight when the run stopped), a tool call re-run on another node (``tool_retry``) or a
    halt (``halt``)."""

    seq: int
    cell_id: str
    row: int | None
    begun: AttemptRecord | None = None
    ended: AttemptRecord | None = None
    tool_retry: bool = False
    halt: HaltEntry | None = None

    @property
    def is_attempt(self) -> bool:
        return self.begun is not None


def halt_entry(halt: HaltEntry) -> JsonObject:
    """The journal entry a halt is written as (begun and ended at once)."""
    return {"cell_id": halt.cell_id, "row": halt.row, "halt": halt.to_json()}


def _row(obj: JsonObject) -> int | None:
    row = obj.get("row")
    return row if isinstance(row, int) and not isinstance(row, bool) else None


def read_journal(store: Store, *, exclude: Collection[str] = ()) -> list[JournalEntry]:
    """Every journal entry of ``store`` in begin order, except those of the cells in
    ``exclude``.

    Raises:
        RecordFormatError: an entry's attempt is not an attempt record (the path names it).
    """
    done = set(exclude)
    out: list[JournalEntry] = []
    for raw in store.attempts():
        if raw.cell_id in done:
            continue
        begin, end = raw.begin, raw.end
        path = f"attempt {raw.seq}"
        if "halt" in begin:
            out.append(JournalEntry(raw.seq, raw.cell_id, _row(begin),
                                    halt=HaltEntry.from_json(begin["halt"], f"{path}.halt")))
        elif "tool_retry" in begin:
            out.append(JournalEntry(raw.seq, raw.cell_id, _row(begin), tool_retry=True))
        else:
            ended = (AttemptRecord.from_json(end["attempt"], f"{path}.end.attempt")
                     if end is not None and "attempt" in end else None)
            out.append(JournalEntry(raw.seq, raw.cell_id, _row(begin),
                                    begun=AttemptRecord.from_json(begin.get("attempt"),
                                                                  f"{path}.attempt"),
                                    ended=ended))
    return out


# --- accounting ---------------------------------------------------------------------------


@dataclass
class CellAccount(JsonRecord):
    """One cell's provider attempts, as the journal holds them (committed or not)."""

    attempts: int = 0
    retries: int = 0
    failures: Counter[str] = field(default_factory=Counter,  # by kind, per failed attempt
                                   metadata=spec(write=sorted_map))
    billed_usd: float = field(default=0.0, metadata=spec(write=rounded(9)))
    # the part of billed_usd estimated (no usage in the reply)
    estimated_usd: float = field(default=0.0, metadata=spec(write=rounded(9)))



FAILURE_CLASSES = ("transport", "model_output")


def class_counts(by_class: Counter[str]) -> dict[str, int]:
    """The writer of failures by class: every class, in :data:`FAILURE_CLASSES` order, 0 when
    none failed."""
    return {c: by_class.get(c, 0) for c in FAILURE_CLASSES}


def _shown_cells(cells: dict[str, CellAccount]) -> dict[str, JsonObject]:
    """The writer of the per-cell accounts: only the cells with a retry or a failure, sorted."""
    return {c: a.to_json() for c, a in sorted(cells.items()) if a.retries or a.failures}


@dataclass
class Accounting(JsonRecord):
    """Every provider attempt a store's journal holds -- of committed cells and of cells that
    never committed, retried and failed ones included -- and every halt, with what the attempts
    that reached the model are billed.

    An attempt *reached the model* when the API answered it with a 2xx status or its reply
    carried usage; its cost is the price table times its usage, or, for a 2xx reply without
    usage (a truncated or malformed body), an estimate: the usage of an attempt of the same
    request bytes that has one, else the mean usage of the attempts that have one
    (``estimated_attempts``/``estimated_usd``). An HTTP error (429, 5xx, 4xx), a timeout before
    any response, a closed connection or an attempt in flight when the run stopped is counted
    as not billed (``unbilled_attempts``, ``in_flight``): the APIs this runner talks to do not
    bill those.
    """

    attempts: int = 0
    retries: int = 0
    failed_attempts: int = derived(lambda a: sum(a.by_class.values()))
    by_class: Counter[str] = field(default_factory=Counter,  # failed attempts
                                   metadata=spec(key="failures_by_class", write=class_counts))
    by_kind: Counter[str] = field(default_factory=Counter,
                                  metadata=spec(key="failures_by_kind", write=sorted_map))
    billed_attempts: int = 0
    billed_usd: float = field(default=0.0, metadata=spec(write=rounded(9)))
    estimated_attempts: int = 0
    estimated_usd: float = field(default=0.0, metadata=spec(write=rounded(9)))
    unbilled_attempts: int = 0
    in_flight: int = 0
    orphan_attempts: int = 0  # attempts of cells that never committed
    # what those cost (billed, estimates included)
    orphan_usd: float = field(default=0.0, metadata=spec(write=rounded(9)))
    tool_retries: int = 0
    halts: list[HaltEntry] = field(default_factory=list)
    # written: only the cells with a retry or a failure
    cells: dict[str, CellAccount] = field(default_factory=dict,
                                          metadata=spec(write=_shown_cells))

    def line(self, committed_usd: float) -> str:
        """One line for a person: attempts, retries, failures, halts and the billed cost beside
        the committed cells' cost."""
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.by_kind.items())) or "none"
        est = (f", of which ${self.estimated_usd:.4f} estimated for {self.estimated_attempts} "
               "reply(ies) without usage" if self.estimated_attempts else "")
        return (f"provider attempts: {self.attempts} ({self.retries} retries; "
                f"{self.failed_attempts} failed: {kinds}); {len(self.halts)} halt(s); billed "
                f"${self.billed_usd:.4f} for {self.billed_attempts} attempt(s) that reached the "
                f"model{est}; committed cells' cost ${committed_usd:.4f}")


def _price_of(usage: Usage, price: PriceTable) -> float:
    return price.cost_usd(usage)


def account(entries: list[JournalEntry], price: PriceTable,
            committed: Collection[str] = ()) -> Accounting:
    """The :class:`Accounting` of a journal's entries under ``price``; ``committed`` names the
    cells whose records are committed (the others' attempts are counted as orphans)."""
    from runner.providers import failure_class

    done = set(committed)
    acc = Accounting()
    usage_of: dict[str, Usage] = {}
    with_usage: list[Usage] = []
    for e in entries:
        if e.ended is not None and e.ended.usage is not None:
            usage_of.setdefault(e.ended.request_sha256, e.ended.usage)
            with_usage.append(e.ended.usage)
    mean = (Usage(round(sum(u.input_tokens for u in with_usage) / len(with_usage)),
                  round(sum(u.output_tokens for u in with_usage) / len(with_usage)),
                  0) if with_usage else None)
    if mean is not None:
        mean = Usage(mean.input_tokens, mean.output_tokens,
                     mean.input_tokens + mean.output_tokens)
    for e in entries:
        if e.halt is not None:
            acc.halts.append(e.halt)
            continue
        if e.tool_retry:
            acc.tool_retries += 1
            continue
        begun = e.begun
        assert begun is not None
        cell = acc.cells.setdefault(e.cell_id, CellAccount())
        acc.attempts += 1
        cell.attempts += 1
        orphan = e.cell_id not in done
        if orphan:
            acc.orphan_attempts += 1
        if begun.retry:
            acc.retries += 1
            cell.retries += 1
        a = e.ended
        if a is None:
            acc.in_flight += 1
            continue
        if a.error_class is not None:
            acc.by_class[failure_class(a.error_class)] += 1
            acc.by_kind[a.error_class] += 1
            cell.failures[a.error_class] += 1
        reached = a.usage is not None or (a.status is not None and 200 <= a.status < 300)
        if not reached:
            acc.unbilled_attempts += 1
            continue
        acc.billed_attempts += 1
        usage = a.usage
        estimated = usage is None
        if usage is None:
            usage = usage_of.get(a.request_sha256, mean)
        cost = _price_of(usage, price) if usage is not None else 0.0
        acc.billed_usd += cost
        cell.billed_usd += cost
        if orphan:
            acc.orphan_usd += cost
        if estimated:
            acc.estimated_attempts += 1
            acc.estimated_usd += cost
            cell.estimated_usd += cost
    return acc


def store_accounting(store: Store, committed: Collection[str]) -> Accounting | None:
    """The accounting of a run store, priced with the lock it was run under (its header's
    ``lock_blob``); None for a store that is not a run's (no run header or no lock blob)."""
    from runner.canonical import loads_strict
    from runner.study._lock import StudyLock
    from runner.study._records import RunHeader

    try:
        header = RunHeader.from_header(store.header)
        lock = StudyLock.from_json(loads_strict(store.get_blob(header.lock_blob)), "lock")
    except EctError:
        return None
    g = lock.generation
    return account(read_journal(store), PriceTable(g.price_input_per_mtok,
                                                   g.price_output_per_mtok), committed)
