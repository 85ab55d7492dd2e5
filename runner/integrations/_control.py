"""``ect_stopping_rule``: ECT as a :class:`runner.control.StoppingRule` for any agent loop.

The rule rebuilds the ledger from the run's own trace (every executed tool call, in order) each
time it is evaluated, so it is a pure read of the run state, reproducible from a stored trace.
It checks ``state.proposal`` — the output of the :class:`runner.control.Finish` being checked —
as the submission: a finish is accepted only when that certificate verifies. Between finishes
(no proposal) it has nothing to check and reports nothing, so the directive the model reads is
what the last rejected finish lacked (its slots, and its reason codes in the note).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.control import PredicateReport, RunState, StoppingRule
from runner.ect import Contract, Decision
from runner.integrations._receipts import Extractor, ToolEvent
from runner.integrations._session import EctSession

__all__ = ["ect_stopping_rule", "session_from_trace"]

_CONFLICT_QUESTION = "Two valid receipts disagree about one value; which source is authoritative?"


def session_from_trace(
    contract: Contract | Mapping[str, Any], extract: Extractor, state: RunState
) -> EctSession:
    """An :class:`EctSession` holding the receipts of every tool call executed in ``state``."""
    session = EctSession(contract, extract)
    n = 0
    for record in state.trace:
        if record.kind != "tool" or record.tool is None or record.result is None:
            continue  # deduplicated calls were not re-executed: their first result is on record
        n += 1
        res = record.result
        session.record(
            ToolEvent(
                call_id=f"c-{n:04d}",
                tool=record.tool,
                args=dict(record.args or {}),
                result=res.data if res.ok else None,
                error=None if res.ok else (res.error or "tool call failed"),
            )
        )
    return session


def report_of(decision: Decision, required: tuple[str, ...]) -> PredicateReport:
    """A verifier decision as a stopping-rule report (missing slots, or codes when global)."""
    if decision.complete:
        return PredicateReport(satisfied=required)
    codes = tuple(dict.fromkeys(decision.codes))
    missing = decision.missing_slots or codes
    escalate = _CONFLICT_QUESTION if "evidence.conflicting_receipts" in codes else None
    return PredicateReport(
        satisfied=tuple(s for s in required if s not in missing),
        missing=missing,
        escalate=escalate,
        detail="; ".join(f"{r.code} [{r.slot or '-'}]" for r in decision.reasons[:6]),
    )


def ect_stopping_rule(
    contract: Contract | Mapping[str, Any], extract: Extractor, *, name: str = "ect"
) -> StoppingRule:
    """A stopping rule that accepts a finish only when its output is a verifying certificate.

    Args:
        contract: the trusted contract of the task.
        extract: which values each tool result holds (e.g. :func:`scoped_value`).
        name: the rule's name in reports.

    The finish output (``Finish(output)``) is the submission: ``{"claims": [...]}`` or a list of
    claims (sealed against this run's ledger) or a full certificate (verified as given). Two
    valid receipts that disagree end the run ``needs_human``.
    """
    parsed = contract if isinstance(contract, Contract) else Contract.from_json(contract)
    required = parsed.descriptor.required_slots

    def evaluate(state: RunState) -> PredicateReport:
        if state.proposal is None:
            return PredicateReport(detail="no certificate proposed yet")
        session = session_from_trace(parsed, extract, state)
        return report_of(session.check(state.proposal), required)

    return StoppingRule(name, evaluate=evaluate)
