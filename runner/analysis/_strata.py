"""Reason codes per fault stratum per pipeline: which checks each closed-loop stratum exercised.

A fault stratum is the incomplete checkpoints carrying one fault (``F1`` .. ``F8``, ``U1`` ..
``U3``, ``T1``), or ``clean`` for the clean checkpoints. For each (stratum, pipeline) the count
of a reason code is the number of cells in which any decision of the pipeline gave that code (a
cell counts once per code). The codes are the verifier's (``coverage.*``, ``evidence.*``, ...)
for ECT and the policies' own (``critic.*``, ``policy.*``, ...) for the critic-backed pipelines.

Written here, from the typed cell records, until the study package's own counting function
lands; the two count the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable

from runner.canonical import JsonObject
from runner.policies import PIPELINES
from runner.study import CellRecord
from runner.worlds import CLOSED_LOOP_FAULTS

__all__ = ["reason_codes_per_stratum"]


def _stratum(record: CellRecord) -> str:
    o = record.result.outcome
    return "clean" if o.checkpoint == "clean" or o.fault is None else o.fault


def _rank(name: str, order: tuple[str, ...]) -> tuple[int, str]:
    return (order.index(name), "") if name in order else (len(order), name)


def reason_codes_per_stratum(records: Iterable[CellRecord]) -> list[JsonObject]:
    """``[{"stratum", "pipeline", "cells", "codes": {code: cells}}]`` in canonical order
    (``clean`` first, then the faults in ``runner.worlds.CLOSED_LOOP_FAULTS`` order; pipelines in
    ``runner.policies.PIPELINES`` order). Every (stratum, pipeline) with a cell has an entry."""
    cells: dict[tuple[str, str], int] = {}
    codes: dict[tuple[str, str], dict[str, int]] = {}
    for record in records:
        key = (_stratum(record), record.result.outcome.policy)
        cells[key] = cells.get(key, 0) + 1
        seen: set[str] = set()
        for decision in record.result.decisions:
            reasons = (decision.pipeline or {}).get("reasons")
            for r in reasons if isinstance(reasons, list) else []:
                code = r.get("code") if isinstance(r, dict) else None
                if isinstance(code, str):
                    seen.add(code)
        counts = codes.setdefault(key, {})
        for code in seen:
            counts[code] = counts.get(code, 0) + 1
    strata = ("clean", *CLOSED_LOOP_FAULTS)
    keys = sorted(cells, key=lambda k: (_rank(k[0], strata), _rank(k[1], PIPELINES)))
    return [{"stratum": s, "pipeline": p, "cells": cells[(s, p)],
             "codes": dict(sorted(codes[(s, p)].items()))} for s, p in keys]
