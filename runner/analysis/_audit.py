"""The one closed-loop figure about the judge itself: completions the verifier accepts whose
values differ from gold.

"Supported" is the project's verifier saying ``complete`` plus every value equal to gold
(runner/loop/_scoring.py), and ECT stops as complete only when that same verifier says so. So
ECT's FC is 0 by construction, and its U counts exactly the ECT completions the verifier
accepted with a value off gold: the figure this module computes for every pipeline, from each
committed cell's final certificate and final ledger (the checkpoint's receipts and the cell's
new ones) against the task's dual-oracle gold answer. It is not circular: the verifier never
sees gold. In this simulator it is 0 (every tool answers from the world the gold comes from, a
superseded value is marked invalid); a live run could differ.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from runner.control import StopReason
from runner.ect import CERTIFICATE_FORMAT, Ledger, ledger_digest, values_match, verify_json
from runner.errors import AnalysisError
from runner.study import CellRecord
from runner.worlds import TaskCheckpoint, closed_loop_checkpoints

__all__ = ["VerifiedCompletion", "verified_completions"]


@dataclass(frozen=True, slots=True)
class VerifiedCompletion:
    """One committed cell's completion as the verifier and gold see it."""

    row: int
    policy: str
    task_id: str
    completed: bool
    """The run stopped ``goal_met`` (the pipeline accepted a finish)."""
    verifier_accepts: bool
    """The project's verifier answers ``complete`` for the final certificate and ledger."""
    off_gold: bool
    """The verifier accepts it and some required value differs from gold."""


@functools.cache
def _checkpoints() -> dict[str, TaskCheckpoint]:
    return {cp.checkpoint_id: cp for cp in closed_loop_checkpoints()}


def _one(cell: CellRecord, cp: TaskCheckpoint) -> VerifiedCompletion:
    row = cell.schedule_row
    result = cell.result
    completed = result.stop_reason is StopReason.GOAL_MET and result.final_certificate is not None
    accepts = off = False
    if completed and result.final_certificate is not None:
        ledger = Ledger(cp.ledger.task_id, (*cp.ledger.receipts, *result.new_receipts))
        if ledger_digest(ledger) != result.ledger_digest:
            raise AnalysisError(f"record {row.row}: the checkpoint's receipts and the cell's new "
                                "ones do not give the ledger digest it recorded")
        cert = {"format": CERTIFICATE_FORMAT, **result.final_certificate}
        task = cp.task
        accepts = verify_json(task.contract.to_json(), ledger.to_json(), cert).complete
        if accepts:
            claims = {c.get("slot"): c.get("value") for c in cert.get("claims") or []
                      if isinstance(c, dict)}
            off = not all(
                slot in claims and values_match(claims[slot], task.gold[slot],
                                                tolerance=task.contract.slots[slot].tolerance_abs)
                for slot in task.descriptor.required_slots)
    return VerifiedCompletion(row=row.row, policy=row.policy, task_id=row.task_id,
                              completed=completed, verifier_accepts=accepts, off_gold=off)


def verified_completions(cells: Sequence[CellRecord]
                         ) -> tuple[VerifiedCompletion, ...] | None:
    """Every committed cell's completion, judged by the verifier and against gold; ``None``
    when some record's checkpoint is not one of the closed-loop study's (a store of hand-made
    records has no gold to audit against: the report then shows no audit, and says nothing
    about it rather than a figure over part of the cells).

    Raises:
        AnalysisError: a record's receipts do not give the ledger digest it recorded.
    """
    known = _checkpoints()
    if any(c.schedule_row.checkpoint_id not in known for c in cells):
        return None
    return tuple(_one(c, known[c.schedule_row.checkpoint_id]) for c in cells)
