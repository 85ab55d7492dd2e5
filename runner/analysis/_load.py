"""Reading the closed-loop inputs: cell outcomes from a run store, and the canonical schedule.

The store is verified in full first (``runner.store.verify_store``); a damaged store is refused
with its typed error. Each record body (written by ``runner.study``) carries ``row``, ``cell_id``,
``schedule_row`` and ``result.outcome``; the loader checks that they agree with one another.

The provider a report names comes from the store header: either a ``"provider"`` object
``{"name", "model", "simulated"}``, or (as ``runner.study`` writes it) a ``"provider"`` name with
a ``"simulated"`` flag, the model then taken from the attempt records in the record audits
(their ``provider``/``model``/``simulated`` fields), which must agree with the header. A header
naming no provider falls back to the audits alone. Ambiguity or contradiction is refused: a
report must say which provider produced it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from runner.analysis._common import ProviderInfo
from runner.analysis._errors import ScheduleUnreadable
from runner.canonical import loads_strict, read_bounded
from runner.errors import AnalysisError, FormatError
from runner.store import Store, verify_store

__all__ = ["StoreOutcomes", "load_outcomes_from_store", "read_schedule_rows"]


@dataclass(frozen=True)
class StoreOutcomes:
    """What a report needs from a store."""

    outcomes: list[dict[str, Any]]
    recorded_schedule_rows: dict[int, dict[str, Any]]
    header: dict[str, Any]
    head: tuple[int, str]
    records: int
    provider: ProviderInfo

    def inputs(self) -> dict[str, Any]:
        """Identifying figures for results.json (no paths, no clock)."""
        return {
            "store_id": str(self.header.get("store_id", "")),
            "store_head_seq": self.head[0],
            "store_head_chain": self.head[1],
            "store_records": self.records,
        }


def _provider_triples(obj: Any) -> Iterator[tuple[str, str, bool]]:
    if isinstance(obj, dict):
        if (
            isinstance(obj.get("provider"), str)
            and isinstance(obj.get("model"), str)
            and isinstance(obj.get("simulated"), bool)
        ):
            yield (obj["provider"], obj["model"], obj["simulated"])
        for v in obj.values():
            yield from _provider_triples(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _provider_triples(v)


def _resolve_provider(header: dict[str, Any], triples: set[tuple[str, str, bool]]) -> ProviderInfo:
    """Header ``provider`` object, or header name + ``simulated`` flag with the model from the
    audits, or the audits alone; anything ambiguous or contradictory is refused."""
    p = header.get("provider")
    if isinstance(p, dict):
        if not (
            isinstance(p.get("name"), str)
            and isinstance(p.get("model"), str)
            and isinstance(p.get("simulated"), bool)
        ):
            raise AnalysisError("store header: provider must be {name, model, simulated}")
        return ProviderInfo(p["name"], p["model"], p["simulated"])
    named = ", ".join(f"{n}/{m}" for n, m, _ in sorted(triples)) or "none"
    if isinstance(p, str):
        simulated = header.get("simulated")
        if not isinstance(simulated, bool):
            raise AnalysisError("store header names a provider but not whether it was simulated")
        mine = {t for t in triples if t[0] == p}
        if triples - mine or any(t[2] != simulated for t in mine):
            raise AnalysisError(
                f"store header names provider {p!r} (simulated={simulated}) but the audits "
                f"record {named}"
            )
        models = sorted({m for _, m, _ in mine})
        if len(models) > 1:
            raise AnalysisError(f"the audits record several models of {p!r}: {', '.join(models)}")
        return ProviderInfo(p, models[0] if models else "not recorded", simulated)
    if len(triples) != 1:
        raise AnalysisError(
            f"the store does not name exactly one provider (header: none; audits: {named})"
        )
    return ProviderInfo(*next(iter(triples)))


def load_outcomes_from_store(path: str | os.PathLike[str]) -> StoreOutcomes:
    """Verify the store in full and return its cell outcomes in record order.

    Raises:
        StoreDamaged (a runner.store error): the store does not verify.
        AnalysisError: a record lacks an outcome, disagrees with itself, or no single provider
            is named.
    """
    verify_store(path, full=True).raise_for_damage()
    outcomes: list[dict[str, Any]] = []
    recorded: dict[int, dict[str, Any]] = {}
    triples: set[tuple[str, str, bool]] = set()
    with Store.open(path, readonly=True) as store:
        header = store.header
        head = store.head
        count = store.count
        for rec in store.records(1):
            body = rec.body
            try:
                outcome = body["result"]["outcome"]
                row, cell_id = body["row"], body["cell_id"]
            except (KeyError, TypeError) as e:
                raise AnalysisError(
                    f"store record {rec.seq} has no result.outcome/row/cell_id"
                ) from e
            if not isinstance(outcome, dict):
                raise AnalysisError(f"store record {rec.seq}: result.outcome is not an object")
            if outcome.get("row") != row or outcome.get("cell_id") != cell_id:
                raise AnalysisError(
                    f"store record {rec.seq}: outcome names row {outcome.get('row')} "
                    f"{outcome.get('cell_id')!r}, the record row {row} {cell_id!r}"
                )
            srow = body.get("schedule_row")
            if isinstance(srow, dict) and isinstance(row, int):
                recorded.setdefault(row, srow)
            triples.update(_provider_triples(body.get("audit")))
            outcomes.append(dict(outcome))
    provider = _resolve_provider(header, triples)
    return StoreOutcomes(outcomes, recorded, header, head, count, provider)


def read_schedule_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The canonical schedule: JSON Lines (one row object per line) or one JSON array."""
    try:
        data = read_bounded(path, what="schedule")
    except OSError as e:
        raise ScheduleUnreadable(f"cannot read schedule {path}: {e.strerror}") from e
    except FormatError as e:
        raise ScheduleUnreadable(str(e)) from e
    try:
        if data.lstrip().startswith(b"["):
            rows = loads_strict(data)
        else:
            rows = [loads_strict(line) for line in data.splitlines() if line.strip()]
    except FormatError as e:
        raise ScheduleUnreadable(f"schedule {path}: {e}") from e
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ScheduleUnreadable(f"schedule {path}: expected row objects")
    if not rows:
        raise ScheduleUnreadable(f"schedule {path} holds no rows")
    for i, r in enumerate(rows, start=1):
        if not (isinstance(r.get("row"), int) and not isinstance(r.get("row"), bool)
                and isinstance(r.get("cell_id"), str)):
            raise ScheduleUnreadable(f"schedule {path}: row {i} has no integer row and string "
                                     "cell_id")
    return rows
