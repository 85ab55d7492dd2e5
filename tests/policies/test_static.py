"""The seven static arms on hand-built snapshots (one per condition)."""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from runner.ect import Contract, values_match
from runner.policies import (
    STATIC_ARMS,
    CriticBehaviour,
    CriticCoreInvariantBroken,
    PlannerBehaviour,
    PolicyError,
    UnknownPolicy,
    decide_static,
    simulated_responder,
)
from runner.providers import SimulatedProvider
from tests.policies import _fixtures as fx
from tests.policies._providers import Forbidden, scripted


def decide(arm: str, snap: object, provider: object = None, **kw: object):  # type: ignore[no-untyped-def]
    return anyio.run(lambda: decide_static(arm, snap, provider or Forbidden(), **kw))  # type: ignore[arg-type]


def decisions(arm: str, provider: object = None, **kw: object) -> dict[str, str]:
    return {c: decide(arm, fx.snapshot(c), provider, **kw).decision for c in fx.CONDITIONS}


def test_weak_signals_complete_whenever_the_agent_signals() -> None:
    for arm in ("completion_token", "heuristic"):
        got = decisions(arm)
        assert got == {c: ("continue" if c == "F8" else "complete") for c in fx.CONDITIONS}, arm


def test_heuristic_needs_a_successful_call() -> None:
    snap = fx.snapshot("C0")
    failed = tuple(dataclasses.replace(c, response={"ok": False, "error": {}}) for c in snap.trace)
    assert decide("heuristic", dataclasses.replace(snap, trace=failed)).decision == "continue"


def test_critic_core_fast_paths_and_stuck_without_model_calls() -> None:
    got = {c: decide("critic_core", fx.snapshot(c)) for c in fx.CONDITIONS}
    assert {c: d.decision for c, d in got.items()} == {
        c: ("stuck" if c == "F8" else "complete") for c in fx.CONDITIONS
    }
    assert all(d.model_calls == 0 and d.provider_result is None for d in got.values())
    assert got["C0"].reasons[0].code == "critic.fast_path_slots_filled"
    assert got["F1"].reasons[0].code == "critic.fast_path_successful_call"


def test_critic_core_invariant_raises_when_no_fast_path_applies() -> None:
    snap = fx.snapshot("F5")  # a slot missing, and now no successful call either
    failed = tuple(dataclasses.replace(c, response={"ok": False, "error": {}}) for c in snap.trace)
    with pytest.raises(CriticCoreInvariantBroken):
        decide("critic_core", dataclasses.replace(snap, trace=failed))


def test_ect_matches_gold_on_every_condition() -> None:
    got = {c: decide("ect", fx.snapshot(c)) for c in fx.CONDITIONS}
    assert {c: d.decision for c, d in got.items()} == {
        c: ("complete" if c == "C0" else "continue") for c in fx.CONDITIONS
    }
    fam = {c: d.families for c, d in got.items()}
    assert "coverage" in fam["F5"] and "replay" in fam["F6"] and "evidence" in fam["F7"]
    assert "scope" in fam["F2"] and "scope" in fam["F4"] and "evidence" in fam["F3"]
    assert "policy" in fam["F8"]  # the recovery-availability rule
    assert all(d.model_calls == 0 for d in got.values())


def test_ect_stuck_without_recovery_and_ablations() -> None:
    f8 = fx.snapshot("F8")
    assert decide("ect", dataclasses.replace(f8, recovery_available=False)).decision == "stuck"
    assert decide("ect", f8, ablate=frozenset({"recovery"})).decision == "stuck"
    # Removing the family that contains a fault lets it through (replay for F6, coverage for F5).
    assert decide("ect", fx.snapshot("F6"), ablate=frozenset({"replay"})).decision == "complete"
    assert decide("ect", fx.snapshot("F5"), ablate=frozenset({"coverage"})).decision == "complete"
    assert decide("ect", fx.snapshot("C0"), ablate=frozenset({"scope"})).decision == "complete"
    with pytest.raises(UnknownPolicy):
        decide("ect", f8, ablate=frozenset({"vibes"}))
    with pytest.raises(PolicyError):
        decide("critic_core", f8, ablate=frozenset({"replay"}))


def _codes(snap: object, ablate: frozenset[str] = frozenset()) -> set[str]:
    return {r.code for r in decide("ect", snap, ablate=ablate).reasons}


def test_ect_single_check_ablation_removes_one_check_only() -> None:
    f3, f7 = fx.snapshot("F3"), fx.snapshot("F7")
    # Removing one check by its reason code keeps the rest of its family; removing the family
    # does not (F3's nested error is an evidence.exec_error).
    assert "evidence.exec_error" in _codes(f3, frozenset({"evidence.unknown_receipt"}))
    assert "evidence.exec_error" not in _codes(f3, frozenset({"evidence"}))
    # A check that gates nothing drops only its own reasons (status-only for F3).
    status = frozenset({"evidence.exec_error", "evidence.invalid"})
    assert _codes(f3, status) == _codes(f3) - status
    # The reference check gates replay: without it, replay runs on the receipts that do
    # resolve, exactly as with the whole evidence family off (F7's forged reference).
    full, single = _codes(f7), _codes(f7, frozenset({"evidence.unknown_receipt"}))
    assert "evidence.unknown_receipt" in full and "evidence.unknown_receipt" not in single
    assert not any(c.startswith("replay.") for c in full)
    assert any(c.startswith("replay.") for c in single)
    assert single == _codes(f7, frozenset({"evidence"}))
    with pytest.raises(UnknownPolicy):
        decide("ect", f3, ablate=frozenset({"internal.exception"}))


def test_postconditions_catch_value_faults_only() -> None:
    got = decisions("postconditions")
    assert got["C0"] == "complete"
    for c in ("F1", "F2", "F5", "F6", "F8"):  # a final value differs from (or lacks) the oracle's
        assert got[c] == "continue", c
    for c in ("F3", "F4", "F7"):  # evidence faults with the right values pass
        assert got[c] == "complete", c


def test_unknown_arm() -> None:
    with pytest.raises(UnknownPolicy):
        decide("vibes", fx.snapshot("C0"))


def test_full_trace_maps_verdicts_and_failures() -> None:
    for verdict, expected in (("accept", "complete"), ("reject", "continue"), ("stuck", "stuck")):
        provider, rec = scripted(verdict)
        d = decide("full_trace", fx.snapshot("C0"), provider)
        assert d.decision == expected and d.model_calls == 1 and d.provider_result is not None
        assert rec.requests[0].role == "critic"
    provider, _ = scripted(failure=True)
    d = decide("full_trace", fx.snapshot("C0"), provider)
    assert (d.decision, d.reasons[0].code) == ("continue", "critic.provider_failure")
    provider, _ = scripted(text="looks fine to me!")
    d = decide("full_trace", fx.snapshot("C0"), provider)
    assert (d.decision, d.reasons[0].code) == ("continue", "critic.unparseable")


def test_self_check_is_a_model_call_only_on_a_completion_signal() -> None:
    provider, rec = scripted("APPROVED")
    assert decide("self_check", fx.snapshot("C0"), provider).decision == "complete"
    assert decide("self_check", fx.snapshot("F8"), provider).decision == "continue"
    assert len(rec.requests) == 1 and rec.requests[0].role == "self_check"
    provider, _ = scripted("REVISE")
    assert decide("self_check", fx.snapshot("C0"), provider).decision == "continue"


def test_simulated_model_arms_follow_their_parameters() -> None:
    def sim(**critic: float) -> SimulatedProvider:
        return SimulatedProvider(simulated_responder(PlannerBehaviour(), CriticBehaviour(**critic)))

    strict = sim(p_accept_unsupported=0.0, p_reject_supported=0.0, p_stuck_on_repeat=0.0,
                 p_self_approve_flawed=0.0)
    assert decisions("full_trace", strict) == {
        c: ("complete" if c == "C0" else "continue") for c in fx.CONDITIONS
    }
    lax = sim(p_accept_unsupported=1.0, p_reject_supported=0.0, p_stuck_on_repeat=0.0)
    assert set(decisions("full_trace", lax).values()) == {"complete"}
    # The self-check only sees its own answer: a missing slot (F1, F5) is all it can notice.
    got = decisions("self_check", strict)
    assert [c for c, d in got.items() if d == "complete"] == ["C0", "F2", "F3", "F4", "F6", "F7"]


def test_arm_list_is_frozen() -> None:
    assert STATIC_ARMS == (
        "completion_token", "self_check", "heuristic", "critic_core", "full_trace",
        "postconditions", "ect",
    )


def _with_tolerance(gold_units: object, claimed_units: object, tol: int) -> fx.FakeSnapshot:
    """C0 with the ``units`` slot given tolerance ``tol``, gold ``gold_units`` and a claim of
    ``claimed_units``."""
    raw = fx.CONTRACT.to_json()
    raw["slots"]["units"]["tolerance"] = {"abs": tol}
    contract = Contract.from_json(raw)
    snap = fx.snapshot("C0")
    task = dataclasses.replace(snap.task, contract=contract,
                               gold={**snap.task.gold, "units": gold_units})
    cert = fx.certificate(snap.ledger, {"units": (claimed_units, ("r-1",)),
                                        "revenue": (700, ("r-2",))})
    return dataclasses.replace(snap, task=task, certificate=cert)


def test_postconditions_tolerance_applies_to_numbers_only() -> None:
    # docs/formats.md §3: "tolerance.abs applies to numbers only; lists and strings compare exactly".
    assert decide("postconditions", _with_tolerance(5, 6, 1)).decision == "complete"
    assert decide("postconditions", _with_tolerance(5, 7, 1)).decision == "continue"
    # A list within the tolerance element by element is still a different list.
    assert decide("postconditions", _with_tolerance([5, 700], [6, 700], 1)).decision == "continue"
    assert decide("postconditions", _with_tolerance([5, 700], [5, 700], 1)).decision == "complete"
    # The same comparison the verifier and the study's scoring use.
    assert not values_match([6, 700], [5, 700], tolerance=1) and values_match(6, 5, tolerance=1)
