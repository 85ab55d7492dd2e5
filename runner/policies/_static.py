"""The seven static arms of the ECT paper's Table 2, applied to one static snapshot.

Each arm sees the same snapshot view (task descriptor and contract, trace, ledger, certificate,
whether the agent signalled completion, whether a recovery call is still available). Only the
``postconditions`` arm reads the oracle answer (``task.gold``); it is the paper's
non-deployable reference and labelled so. No arm reads the snapshot's condition, fault label or
gold decision: every decision comes from the arm's own logic applied to the snapshot content.

Arms (decision procedure, in order):

- ``completion_token``: complete iff the agent signalled completion.
- ``self_check``: a MODEL CALL (role ``self_check``, prompt ``self_check.txt``) asking the agent
  to check its own answer when it signalled completion; ``APPROVED`` -> complete, ``REVISE`` ->
  continue; no signal -> continue without a call; provider or parse failure -> continue.
- ``heuristic`` (frozen, permissive): complete iff the agent signalled completion and at least one
  call in the trace reported transport success.
- ``critic_core``: a repeated last call (the same call twice in a row) -> stuck; no completion signal -> continue; fast path 1
  (every required slot has a claim with a non-null value) -> complete; fast path 2 (some call
  reported transport success) -> complete; otherwise it would ask its LLM critic, which on a
  static snapshot raises :class:`CriticCoreInvariantBroken` instead.
- ``full_trace``: always one MODEL CALL (role ``critic``, prompt ``full_trace_critic.txt``) with
  the whole trace, ledger, contract and certificate; accept -> complete, reject -> continue,
  stuck -> stuck; provider or parse failure -> continue.
- ``postconditions`` (non-deployable oracle reference): complete iff the agent signalled
  completion and every gold slot has a claim whose value equals the oracle answer within the
  slot's tolerance (numbers only; lists exactly: :func:`runner.ect.values_match`); evidence is
  not looked at.
- ``ect``: :func:`runner.ect.verify`; complete iff it says complete and the agent asked to
  finish; otherwise, a repeated last call is ``stuck`` unless a recovery call is available
  (the recovery-availability rule), else ``continue``. ``ablate`` removes verifier check
  families (through :func:`runner.ect.verify_unsafe_ablated`), single checks named by their
  reason codes (e.g. ``evidence.unknown_receipt``: see :func:`_ablated_reasons`) and/or
  ``"recovery"`` (the recovery-availability rule: a repeated call is then always ``stuck``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.canonical import JsonRecord, spec
from runner.ect import (
    CHECK_FAMILIES,
    REASON_CODES,
    Reason,
    values_match,
    verify,
    verify_unsafe_ablated,
)
from runner.policies._common import (
    any_successful_call,
    claimed_values,
    last_call_repeats,
    reason,
)
from runner.policies._critics import build_critic_request, parse_critic_verdict
from runner.policies._errors import CriticCoreInvariantBroken, PolicyError, UnknownPolicy
from runner.policies._views import CriticKind
from runner.providers import AttemptObserver, GenerationConfig, Provider, ProviderResult

__all__ = [
    "ABLATIONS",
    "DEFAULT_STATIC_GENERATION",
    "STATIC_ARMS",
    "StaticDecision",
    "critic_core_fast_path",
    "decide_static",
]

STATIC_ARMS: tuple[str, ...] = (
    "completion_token",
    "self_check",
    "heuristic",
    "critic_core",
    "full_trace",
    "postconditions",
    "ect",
)
# What ``ablate`` may name: a verifier check family (``internal`` always fails closed), a single
# check by its reason code (``internal.*`` excepted), or the recovery-availability rule.
ABLATIONS: tuple[str, ...] = (
    *(f for f in CHECK_FAMILIES if f != "internal"),
    *(c for c in REASON_CODES if not c.startswith("internal.")),
    "recovery",
)
# Checks whose failure makes the verifier skip a claim's replay (a cited receipt missing from
# the ledger; a transform it may not run). Removing one of them lets replay run, exactly as
# removing its whole family does in ``verify_unsafe_ablated``.
_GATES_REPLAY = frozenset(
    {"evidence.unknown_receipt", *(c for c in REASON_CODES if c.startswith("transform."))}
)
# The paper's model path: temperature 0.2, seed 2705 for the full-trace critic.
DEFAULT_STATIC_GENERATION = GenerationConfig(temperature=0.2, seed=2705, max_output_tokens=1024)

StaticVerdict = Literal["complete", "continue", "stuck"]
_VERDICT_DECISION: dict[str, StaticVerdict] = {
    "accept": "complete",
    "reject": "continue",
    "stuck": "stuck",
}


@dataclass(frozen=True)
class StaticDecision(JsonRecord):
    """One arm's decision on one snapshot."""

    decision: StaticVerdict
    reasons: tuple[Reason, ...]
    model_calls: int
    provider_result: ProviderResult | None = field(metadata=spec(skip=True))  # audited apart

    @property
    def families(self) -> frozenset[str]:
        return frozenset(r.code.split(".", 1)[0] for r in self.reasons)


def critic_core_fast_path(
    required_slots: tuple[str, ...], trace: Any, certificate_obj: Any
) -> tuple[Literal["complete"], Reason] | None:
    """The critic core's two permissive fast paths for a finish; ``None`` if neither applies."""
    values = claimed_values(certificate_obj)
    if all(values.get(s) is not None for s in required_slots):
        return "complete", reason("critic.fast_path_slots_filled")
    if any_successful_call(trace):
        return "complete", reason("critic.fast_path_successful_call")
    return None


def _check_ablate(arm: str, ablate: frozenset[str]) -> None:
    if not ablate:
        return
    if arm != "ect":
        raise PolicyError(f"ablate applies to the 'ect' arm only, not {arm!r}")
    unknown = sorted(set(ablate) - set(ABLATIONS))
    if unknown:
        raise UnknownPolicy(f"unknown ablation(s) {unknown}; known: {', '.join(ABLATIONS)}")


def _ablated_reasons(contract: Any, ledger: Any, certificate: Any,
                     ablate: frozenset[str]) -> tuple[Reason, ...]:
    """ECT's reasons with the families and single checks (reason codes) in ``ablate`` removed.

    A family goes through :func:`runner.ect.verify_unsafe_ablated`. A single check that gates
    replay (:data:`_GATES_REPLAY`) switches its family off there too, so replay runs as if the
    check were absent, and the family's other reasons are taken from the full verification
    (every other check runs the same with or without the switch). Any other single check only
    drops its own reasons: nothing else depends on it.
    """
    families = {a for a in ablate if a in CHECK_FAMILIES}
    codes = {a for a in ablate if a not in CHECK_FAMILIES}
    switched = families | {c.split(".", 1)[0] for c in codes & _GATES_REPLAY}
    if not switched:
        full = verify(contract, ledger, certificate)
        return tuple(r for r in full.reasons if r.code not in codes)
    base = verify_unsafe_ablated(contract, ledger, certificate, without=frozenset(switched))
    kept: tuple[Reason, ...] = ()
    if switched - families:
        full = verify(contract, ledger, certificate)
        kept = tuple(r for r in full.reasons if r.family in switched - families)
    return tuple(r for r in (*base.reasons, *kept) if r.code not in codes)


def _metadata(arm: str, snapshot: Any, gen: GenerationConfig) -> dict[str, Any]:
    # The snapshot id may spell its condition; the request only gets an opaque hash of it.
    opaque = hashlib.sha256(str(snapshot.snapshot_id).encode("utf-8")).hexdigest()[:16]
    return {"cell_id": f"static/{arm}/{opaque}", "seed": gen.seed, "study": "static", "arm": arm}


async def decide_static(
    arm: str,
    snapshot: Any,
    provider: Provider | None,
    *,
    ablate: frozenset[str] = frozenset(),
    generation: GenerationConfig | None = None,
    metadata: Mapping[str, Any] | None = None,
    observer: AttemptObserver | None = None,
) -> StaticDecision:
    """Decide ``snapshot`` (a :class:`runner.worlds.Snapshot`) with static arm ``arm``.

    ``provider`` is used only by ``self_check`` and ``full_trace``; ``generation`` defaults to
    :data:`DEFAULT_STATIC_GENERATION`; ``metadata`` (never labels) replaces the default request
    metadata ``{"cell_id": "static/<arm>/<opaque>", "seed", "study", "arm"}``; ``observer`` is
    passed to ``provider.generate`` (attempt journaling).

    Raises:
        UnknownPolicy: ``arm`` or an ablation name is unknown.
        PolicyError: ``ablate`` given for an arm other than ``ect``; a model arm without provider.
        CriticCoreInvariantBroken: the critic core would need its model on this snapshot.
    """
    if arm not in STATIC_ARMS:
        raise UnknownPolicy(f"unknown static arm {arm!r}; known: {', '.join(STATIC_ARMS)}")
    ablate = frozenset(ablate)
    _check_ablate(arm, ablate)
    signal = bool(snapshot.completion_signal)
    trace = tuple(snapshot.trace)
    cert_obj = snapshot.certificate.to_json()
    contract = snapshot.task.contract

    if arm == "completion_token":
        if signal:
            return StaticDecision("complete", (reason("policy.completion_signal"),), 0, None)
        return StaticDecision("continue", (reason("policy.no_finish_request"),), 0, None)

    if arm == "heuristic":
        if not signal:
            return StaticDecision("continue", (reason("policy.no_finish_request"),), 0, None)
        if any_successful_call(trace):
            return StaticDecision("complete", (reason("policy.heuristic_complete"),), 0, None)
        return StaticDecision("continue", (reason("policy.heuristic_no_call"),), 0, None)

    if arm == "critic_core":
        if last_call_repeats(trace) or bool(snapshot.repeated_call):
            return StaticDecision("stuck", (reason("policy.repeated_call"),), 0, None)
        if not signal:
            return StaticDecision("continue", (reason("policy.no_finish_request"),), 0, None)
        fast = critic_core_fast_path(contract.descriptor.required_slots, trace, cert_obj)
        if fast is None:
            raise CriticCoreInvariantBroken(
                "critic core found no fast path on a static snapshot and would call its model"
            )
        return StaticDecision(fast[0], (fast[1],), 0, None)

    if arm == "postconditions":
        if not signal:
            return StaticDecision("continue", (reason("policy.no_finish_request"),), 0, None)
        values = claimed_values(cert_obj)
        for slot, gold in snapshot.task.gold.items():
            tol = contract.slots[slot].tolerance_abs if slot in contract.slots else 0
            if slot not in values or not values_match(values[slot], gold, tolerance=tol):
                return StaticDecision(
                    "continue", (reason("policy.postcondition_failed", slot=slot),), 0, None
                )
        return StaticDecision("complete", (reason("policy.postcondition_met"),), 0, None)

    if arm == "ect":
        checks = ablate - {"recovery"}
        if checks:
            found = _ablated_reasons(contract, snapshot.ledger, snapshot.certificate, checks)
        else:
            found = tuple(verify(contract, snapshot.ledger, snapshot.certificate).reasons)
        if not found and signal:
            return StaticDecision("complete", (), 0, None)
        reasons = list(found)
        if not signal:
            reasons.append(reason("policy.no_finish_request"))
        if last_call_repeats(trace) or bool(snapshot.repeated_call):
            if "recovery" in ablate or not snapshot.recovery_available:
                return StaticDecision("stuck", (*reasons, reason("policy.no_recovery")), 0, None)
            reasons.append(reason("policy.recovery_available"))
        return StaticDecision("continue", tuple(reasons), 0, None)

    # Model-backed arms.
    if provider is None:
        raise PolicyError(f"static arm {arm!r} needs a provider")
    gen = generation or DEFAULT_STATIC_GENERATION
    meta = dict(metadata) if metadata is not None else _metadata(arm, snapshot, gen)
    if arm == "self_check" and not signal:
        return StaticDecision("continue", (reason("policy.no_finish_request"),), 0, None)
    kind: CriticKind = "self_check" if arm == "self_check" else "full_trace"
    request = build_critic_request(
        kind,
        contract=contract,
        trace=trace,
        ledger=snapshot.ledger,
        proposal=cert_obj,
        finish_requested=signal,
        generation=gen,
        metadata=meta,
    )
    result = await provider.generate(request, observer=observer)
    if not result.ok:
        return StaticDecision("continue", (reason("critic.provider_failure"),), 1, result)
    verdict = parse_critic_verdict(result)
    if verdict is None:
        return StaticDecision("continue", (reason("critic.unparseable"),), 1, result)
    if kind == "self_check":
        if verdict.verdict == "accept":
            return StaticDecision("complete", (reason("self_check.approved", verdict.reason),), 1, result)
        return StaticDecision("continue", (reason("self_check.revise", verdict.reason),), 1, result)
    code = f"critic.{verdict.verdict}"
    decision = _VERDICT_DECISION[verdict.verdict]
    return StaticDecision(decision, (reason(code, verdict.reason),), 1, result)
