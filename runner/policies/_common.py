"""Small, deterministic readings of a trace or a raw certificate shared by several policies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.canonical import canonical_bytes
from runner.ect import Reason

__all__ = [
    "POLICY_REASON_CODES",
    "any_successful_call",
    "call_key",
    "claimed_values",
    "last_call_repeats",
    "reason",
]

# Reason codes the policies add on top of runner.ect.REASON_CODES (never emitted by the verifier).
POLICY_REASON_CODES: dict[str, str] = {
    "policy.no_finish_request": "the agent did not ask to finish, so there is nothing to authorize",
    "policy.completion_signal": "the agent signalled completion (completion-token arm)",
    "policy.heuristic_complete": "completion signal after at least one transport-successful call",
    "policy.heuristic_no_call": "completion signal but no transport-successful call",
    "policy.repeated_call": "the last tool call repeats the one before it (same tool and args)",
    "policy.recovery_available": "a repeated call, but a recovery call is still available",
    "policy.no_recovery": "a repeated call and no recovery is available: stuck",
    "policy.postcondition_met": "every final value equals the oracle answer (non-deployable)",
    "policy.postcondition_failed": "a final value differs from the oracle answer (non-deployable)",
    "critic.fast_path_slots_filled": "critic-core fast path: finish with every required slot filled",
    "critic.fast_path_successful_call": "critic-core fast path: finish after a successful call",
    "critic.accept": "the model critic accepted the finish",
    "critic.reject": "the model critic rejected the finish",
    "critic.stuck": "the model critic judged the run stuck",
    "critic.provider_failure": "the critic's provider call failed: mapped to continue",
    "critic.unparseable": "the critic's reply was not a valid verdict: mapped to continue",
    "self_check.approved": "the agent's self-check approved its answer",
    "self_check.revise": "the agent's self-check asked for a revision",
    "controller.stuck_recovery": "the controller's one stuck-recovery attempt: continue once",
    "ect.needs_human": "conflicting receipts: the verifier cannot decide, a human must",
}


def reason(code: str, detail: str = "", slot: str | None = None) -> Reason:
    """A :class:`runner.ect.Reason` for a policy-level code (``detail`` defaults to its meaning)."""
    return Reason(code=code, slot=slot, detail=detail or POLICY_REASON_CODES.get(code, ""))


def call_key(tool_id: str, args: Mapping[str, Any]) -> tuple[str, bytes]:
    """Identity of a call: tool id and the canonical bytes of its arguments."""
    try:
        return (tool_id, canonical_bytes(dict(args)))
    except Exception:  # non-canonicalizable args never equal anything else
        return (tool_id, repr(sorted(args.items(), key=str)).encode())


def last_call_repeats(trace: Sequence[Any]) -> bool:
    """True when the most recent call repeats the call right before it (same tool, same args).

    Only a consecutive repeat counts as stagnation: re-reading one entity later in a longer
    sweep (e.g. a replaced receipt) is not the agent looping.
    """
    if len(trace) < 2:
        return False
    return call_key(trace[-1].tool_id, trace[-1].args) == call_key(trace[-2].tool_id, trace[-2].args)


def any_successful_call(trace: Sequence[Any]) -> bool:
    """True when some call reported transport success (``"ok": true``), nested errors included."""
    return any(isinstance(c.response, Mapping) and c.response.get("ok") is True for c in trace)


def claimed_values(certificate_obj: Any) -> dict[str, Any]:
    """``{slot: value}`` read leniently from a raw certificate object (malformed parts skipped)."""
    out: dict[str, Any] = {}
    if not isinstance(certificate_obj, Mapping):
        return out
    claims = certificate_obj.get("claims")
    if not isinstance(claims, list):
        return out
    for c in claims:
        if isinstance(c, Mapping) and isinstance(c.get("slot"), str) and "value" in c:
            out.setdefault(c["slot"], c["value"])
    return out
