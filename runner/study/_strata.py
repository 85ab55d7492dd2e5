"""Which reason codes each pipeline gave, per fault stratum: what each stratum exercised.

A fault stratum is the set of cells whose checkpoint carries one fault (``F1`` .. ``F8``,
``U1`` .. ``U3``, ``T1``; incomplete checkpoints), or ``clean`` for the clean checkpoints. For
each (stratum, pipeline) :func:`reason_codes_by_stratum` counts, per reason code, the cells in
which any of the pipeline's decisions gave that code (a cell counts once per code however often
the code recurs in it). The codes are the verifier's (``coverage.*``, ``evidence.*``, ...) for
ECT and the policies' own (``critic.*``, ``policy.*``, ``controller.*``) for the critic-backed
pipelines. The report's reason-codes-per-fault table is built from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from runner.canonical import JsonRecord
from runner.policies import PIPELINES
from runner.study._records import CellRecord
from runner.worlds import CLOSED_LOOP_FAULTS

__all__ = ["StratumReasons", "reason_codes_by_stratum"]


@dataclass(frozen=True, slots=True)
class StratumReasons(JsonRecord):
    """The reason codes one pipeline gave on one fault stratum.

    ``cells`` is the number of the stratum's cells run under the pipeline (the denominator);
    ``codes`` maps each reason code to the number of those cells in which a decision of the
    pipeline gave it, in code order.
    """

    stratum: str
    pipeline: str
    cells: int
    codes: dict[str, int]


def _stratum(record: CellRecord) -> str:
    outcome = record.result.outcome
    return "clean" if outcome.checkpoint == "clean" or outcome.fault is None else outcome.fault


def _order(stratum: str) -> tuple[int, str]:
    if stratum == "clean":
        return (0, "")
    if stratum in CLOSED_LOOP_FAULTS:
        return (1 + CLOSED_LOOP_FAULTS.index(stratum), "")
    return (len(CLOSED_LOOP_FAULTS) + 1, stratum)


def _pipeline_order(pipeline: str) -> tuple[int, str]:
    order = list(PIPELINES)
    return (order.index(pipeline), "") if pipeline in order else (len(order), pipeline)


def reason_codes_by_stratum(records: Iterable[CellRecord]) -> list[StratumReasons]:
    """Reason-code counts per (fault stratum, pipeline), from a study's cell records.

    Every (stratum, pipeline) that has a cell gets one entry (``codes`` may be empty: the
    pipeline never said why, e.g. every finish was completed by a fast path). Entries are in
    canonical order: ``clean`` first, then the faults in ``runner.worlds.CLOSED_LOOP_FAULTS``
    order; within a stratum, pipelines in ``runner.policies.PIPELINES`` order.
    """
    cells: dict[tuple[str, str], int] = {}
    codes: dict[tuple[str, str], dict[str, int]] = {}
    for record in records:
        key = (_stratum(record), record.result.outcome.policy)
        cells[key] = cells.get(key, 0) + 1
        seen: set[str] = set()
        for decision in record.result.decisions:
            if decision.pipeline is not None:
                seen.update(decision.pipeline.codes)
        counts = codes.setdefault(key, {})
        for code in seen:
            counts[code] = counts.get(code, 0) + 1
    keys = sorted(cells, key=lambda k: (_order(k[0]), _pipeline_order(k[1])))
    return [StratumReasons(s, p, cells[(s, p)], dict(sorted(codes[(s, p)].items())))
            for s, p in keys]
