"""Reading the closed-loop inputs: cell records from a run store.

The store is verified in full first (``runner.store.verify_store``); a damaged store is refused
with its typed error. Each record body is read as a :class:`runner.study.CellRecord`, whose
strict reader checks that its row, cell id, schedule row, outcome and digests agree; the
canonical schedule is read by :func:`runner.study.read_schedule`, the one schedule reader.

The header is read once, strictly, by :class:`runner.study.StoreHeader` (whose study part is
:meth:`runner.study.RunHeader.from_header`), and the study lock the store carries by
:meth:`runner.study.StudyLock.from_json`. The provider a report names comes from the header:
either a ``"provider"`` object ``{"name", "model", "simulated"}``, or (as ``runner.study``
writes it) a ``"provider"`` name with a ``"simulated"`` flag, the model then taken from the
attempt records in the record audits (their ``provider``/``model``/``simulated`` fields), which
must agree with the header. A header naming no provider falls back to the audits alone.
Ambiguity or contradiction is refused: a report must say which provider produced it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from runner.analysis._common import ProviderInfo
from runner.analysis._honesty import flat_parameters
from runner.canonical import JsonObject, loads_strict
from runner.errors import AnalysisError, FormatError, StoreError
from runner.loop import Outcome
from runner.store import Store, verify_store
from runner.study import CellRecord, StoreHeader, StudyLock

__all__ = ["StoreOutcomes", "load_outcomes_from_store"]


@dataclass(frozen=True)
class StoreOutcomes:
    """What a report needs from a store."""

    cells: list[CellRecord]
    header: StoreHeader
    head: tuple[int, str]
    records: int
    provider: ProviderInfo
    lock: StudyLock | None = None
    """The study lock the run was made under (the store's ``lock_blob``), if the store has one."""

    @property
    def outcomes(self) -> list[Outcome]:
        return [c.result.outcome for c in self.cells]

    def simulator_parameters(self) -> tuple[dict[str, float] | None, str]:
        """The simulated provider's parameters the run used, by dotted spec name, read from the
        lock the store carries (``generation.simulated``), and where they were read from."""
        if self.lock is None:
            return None, "not recorded: the store carries no study lock with simulator tables"
        digest = self.header.lock_digest or ""
        return (flat_parameters(self.lock.generation.simulated),
                f"the study lock recorded in the store ({digest})")

    def inputs(self) -> JsonObject:
        """Identifying figures for results.json (no paths, no clock)."""
        return {
            "store_id": self.header.store_id or "",
            "store_head_seq": self.head[0],
            "store_head_chain": self.head[1],
            "store_records": self.records,
        }


def _resolve_provider(header: StoreHeader, triples: set[tuple[str, str, bool]]) -> ProviderInfo:
    """Header ``provider`` object, or header name + ``simulated`` flag with the model from the
    audits, or the audits alone; anything ambiguous or contradictory is refused."""
    p = header.provider
    if p is not None and p.model is not None and p.simulated is not None:  # the object form
        return ProviderInfo(p.name, p.model, p.simulated)
    named = ", ".join(f"{n}/{m}" for n, m, _ in sorted(triples)) or "none"
    if p is not None:
        simulated = p.simulated
        if simulated is None:
            raise AnalysisError("store header names a provider but not whether it was simulated")
        mine = {t for t in triples if t[0] == p.name}
        if triples - mine or any(t[2] != simulated for t in mine):
            raise AnalysisError(
                f"store header names provider {p.name!r} (simulated={simulated}) but the audits "
                f"record {named}"
            )
        models = sorted({m for _, m, _ in mine})
        if len(models) > 1:
            raise AnalysisError(f"the audits record several models of {p.name!r}: "
                                f"{', '.join(models)}")
        return ProviderInfo(p.name, models[0] if models else "not recorded", simulated)
    if len(triples) != 1:
        raise AnalysisError(
            f"the store does not name exactly one provider (header: none; audits: {named})"
        )
    return ProviderInfo(*next(iter(triples)))


def load_outcomes_from_store(path: str | os.PathLike[str]) -> StoreOutcomes:
    """Verify the store in full and return its cell outcomes in record order.

    Raises:
        StoreDamaged (a runner.store error): the store does not verify.
        AnalysisError: a record is not a well-formed cell record (it disagrees with itself), or
            no single provider is named.
    """
    verify_store(path, full=True).raise_for_damage()
    cells: list[CellRecord] = []
    triples: set[tuple[str, str, bool]] = set()
    with Store.open(path, readonly=True) as store:
        try:
            header = StoreHeader.from_header(store.header)
        except FormatError as e:
            raise AnalysisError(f"the store's header is not a run header: {e}") from e
        head = store.head
        count = store.count
        lock: StudyLock | None = None
        if header.lock_blob is not None:
            try:
                lock = StudyLock.from_json(loads_strict(store.get_blob(header.lock_blob)),
                                           "study lock")
            except (StoreError, FormatError) as e:
                raise AnalysisError(f"the store's study lock blob is unreadable: {e}") from e
        for rec in store.records(1):
            try:
                cell = CellRecord.from_json(rec.body, f"store record {rec.seq}")
            except FormatError as e:
                raise AnalysisError(f"not a cell record: {e}") from e
            triples.update(cell.audit.attempt_providers())
            cells.append(cell)
    provider = _resolve_provider(header, triples)
    return StoreOutcomes(cells, header, head, count, provider, lock)
