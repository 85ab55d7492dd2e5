"""Outcome scoring (docs/protocol.md, part 2): one judge of "supported" for every pipeline.

A proposal is *fully supported* (the ECT paper's definition, the same judge for every pipeline)
when both hold:

1. the project's verifier (:func:`runner.ect.verify_json`) answers ``complete`` for it against
   the trusted contract and the ledger it was proposed on (every required slot present, every
   cited receipt valid, successful and in scope, cardinality met, every value replayed);
2. every required slot has exactly one claim whose value equals the dual-oracle gold value
   (within the contract's numeric tolerance; lists and strings exactly:
   :func:`runner.ect.values_match`), citing only receipts of that ledger that succeeded and
   validated: a check written apart from the verifier, so a verifier bug cannot pass a wrong
   value.

A pipeline's own acceptance is never the judge: the critic core's fast path or a critic can
accept a proposal the verifier rejects, and that completion is then unsupported.

Definitions (one cell):

- ``supported_completion``: the run stopped ``goal_met`` and its final certificate is fully
  supported against the final ledger.
- ``premature_unsupported``: an *incomplete* checkpoint's run stopped ``goal_met`` without
  supported completion (the primary endpoint).
- ``clean_false_continuation``: on a *clean* checkpoint, the pipeline answered anything but
  ``complete`` to a proposal that was fully supported (against the ledger of that decision).
- ``recoverable_stuck``: the paper's rule only: the termination pipeline itself answered
  ``stuck`` (its last verdict; the run then ended ``no_progress``) while a recovery was still
  possible (an incomplete checkpoint whose recovery calls fit in the calls left). A
  ``no_progress`` stop from a stop control beyond the protocol (``runner.control``'s
  no-progress detector, when a caller turns it on) is not a stuck decision and never counts.
- ``successful_recovery``: on an incomplete checkpoint, after the first rejected finish the run
  executed a tool call that produced a valid receipt inside a required slot's scope that the
  checkpoint's ledger did not already hold.
- ``postcondition_ok``: the recorded side effects are consistent (no idempotency-key conflict)
  and, when the run completed, the final answer equals gold.
"""

from __future__ import annotations

from runner.canonical import JsonObject
from runner.control import StopReason
from runner.ect import CERTIFICATE_FORMAT, Ledger, Receipt, values_match, verify_json
from runner.loop._outcome import Outcome, ScoredRow
from runner.loop._trajectory import DecisionVerdict, Trajectory
from runner.policies import FinishAction
from runner.worlds import in_scope

__all__ = ["score"]

def _claims(proposal: FinishAction | None) -> list[JsonObject]:
    """The claims of a proposed certificate (open JSON: malformed claims are left out)."""
    claims = proposal.certificate_obj.get("claims") if proposal is not None else None
    return [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []


def _supported_slots(trajectory: Trajectory,
                     proposal: FinishAction | None) -> tuple[set[str], int]:
    """Slots with exactly one supported claim, and the number of unsupported claims."""
    task = trajectory.checkpoint.task
    receipts = {r.receipt_id: r for r in trajectory.ledger.receipts}
    seen: dict[str, int] = {}
    supported: set[str] = set()
    unsupported = 0
    for claim in _claims(proposal):
        slot = claim.get("slot")
        spec = task.contract.slots.get(slot) if isinstance(slot, str) else None
        evidence = claim.get("evidence")
        ok = (
            spec is not None
            and slot in task.gold
            and isinstance(evidence, list)
            and len(evidence) > 0
            and all(isinstance(e, str) and _usable(receipts.get(e)) for e in evidence)
            and values_match(claim.get("value"), task.gold[slot], tolerance=spec.tolerance_abs)
        )
        if isinstance(slot, str):
            seen[slot] = seen.get(slot, 0) + 1
        if ok:
            supported.add(slot)  # type: ignore[arg-type]
        else:
            unsupported += 1
    return {s for s in supported if seen.get(s) == 1}, unsupported


def _usable(receipt: Receipt | None) -> bool:
    return receipt is not None and receipt.exec_status == "ok" and receipt.validation == "valid"


def _fully_supported(trajectory: Trajectory, proposal: FinishAction | None,
                     ledger: Ledger) -> bool:
    """The verifier says ``complete`` for ``proposal`` against ``ledger`` and every value
    equals gold."""
    if proposal is None:
        return False
    task = trajectory.checkpoint.task
    required = set(task.descriptor.required_slots)
    slots, unsupported = _supported_slots(trajectory, proposal)
    if unsupported or not required <= slots:
        return False
    wire = {"format": CERTIFICATE_FORMAT, **proposal.certificate_obj}
    return verify_json(task.contract.to_json(), ledger.to_json(), wire).decision == "complete"


def _ledger_at(trajectory: Trajectory, decision_index: int) -> Ledger:
    """The ledger as it was when decision ``decision_index`` was made (receipts of the
    checkpoint's calls and of the calls executed at earlier decisions)."""
    base = len(trajectory.checkpoint.trace)
    executed = sum(1 for d in trajectory.decisions
                   if d.verdict is DecisionVerdict.EXECUTED and d.index < decision_index)
    calls = {c.call_id for c in trajectory.trace[: base + executed]}
    return Ledger(trajectory.ledger.task_id,
                  tuple(r for r in trajectory.ledger.receipts if r.call_id in calls))


def _recovered(trajectory: Trajectory) -> bool:
    cp = trajectory.checkpoint
    first_reject = next((d.index for d in trajectory.decisions if d.verdict.rejected_finish),
                        None)
    if first_reject is None:
        return False
    before = {(r.scope.entity, r.scope.attribute, r.scope.level, r.scope.date)
              for r in cp.ledger.receipts if _usable(r)}
    new_calls = {d_call_id for d_call_id in _calls_after(trajectory, first_reject)}
    scopes = [spec.scope for spec in cp.task.contract.slots.values()]
    for r in trajectory.ledger.receipts:
        if r.call_id not in new_calls or not _usable(r):
            continue
        key = (r.scope.entity, r.scope.attribute, r.scope.level, r.scope.date)
        if key not in before and any(in_scope(r, s) for s in scopes):
            return True
    return False


def _calls_after(trajectory: Trajectory, decision_index: int) -> set[str]:
    base = len(trajectory.checkpoint.trace)
    executed = [d for d in trajectory.decisions if d.verdict is DecisionVerdict.EXECUTED]
    out: set[str] = set()
    for n, d in enumerate(executed, start=1):
        if d.index > decision_index:
            out.add(trajectory.trace[base + n - 1].call_id)
    return out


def score(trajectory: Trajectory, row: ScoredRow) -> Outcome:
    """The cell outcome (the shape runner.analysis reads), from the trajectory and its row."""
    cp = trajectory.checkpoint
    incomplete = cp.kind == "incomplete"
    goal = trajectory.stop_reason is StopReason.GOAL_MET
    supported = goal and _fully_supported(trajectory, trajectory.accepted, trajectory.ledger)
    _, unsupported_claims = _supported_slots(trajectory, trajectory.accepted)
    false_continuation = False
    if cp.kind == "clean":
        for d in trajectory.decisions:
            if (d.verdict.rejected_finish and isinstance(d.action, FinishAction)
                    and _fully_supported(trajectory, d.action, _ledger_at(trajectory, d.index))):
                false_continuation = True
                break
    calls_left = max(0, trajectory.calls_budget - trajectory.tool_calls)
    recoverable = (incomplete and not cp.needs_human and len(cp.recovery_calls) <= calls_left)
    recovered = incomplete and _recovered(trajectory)
    conflicts = "conflict" in trajectory.note_statuses
    return Outcome(
        row=row.row,
        cell_id=row.cell_id,
        task_id=cp.task.task_id,
        world_id=cp.task.world_id,
        family=cp.task.family,
        checkpoint=cp.kind,
        fault=cp.fault,
        policy=trajectory.policy,
        seed=row.seed,
        stop_reason=trajectory.stop_reason,
        final_decision=trajectory.pipeline_verdicts[-1] if trajectory.pipeline_verdicts else "none",
        premature_unsupported=incomplete and goal and not supported,
        supported_completion=supported,
        clean_false_continuation=false_continuation,
        recoverable_stuck=(trajectory.stop_reason is StopReason.NO_PROGRESS
                           and trajectory.pipeline_verdicts[-1:] == ["stuck"] and recoverable),
        successful_recovery=recovered,
        recovered_then_supported=recovered and supported,
        unsupported_claims=unsupported_claims if goal else 0,
        turns=trajectory.turns,
        tool_calls=trajectory.tool_calls,
        input_tokens=trajectory.input_tokens,
        output_tokens=trajectory.output_tokens,
        latency_s=trajectory.latency_s,
        cost_usd=trajectory.cost_usd,
        postcondition_ok=(not conflicts) and (supported if goal else True),
    )
