"""Static grid and closed-loop checkpoints, checked against the real ECT verifier."""

from __future__ import annotations

from collections import Counter

import pytest

from runner.ect import Ledger, verify
from runner.worlds import (
    CLOSED_LOOP_FAULTS,
    STATIC_CONDITIONS,
    TaskCheckpoint,
    TraceCall,
    call_id,
    closed_loop_checkpoints,
    closed_loop_tasks,
    fault_assignment,
    ledger_from_trace,
    plan_calls,
    propose_certificate,
    static_grid,
    static_tasks,
    to_receipts,
    tools,
    world_snapshot,
)
from tests.sizes import STATIC_SNAPSHOTS

# The reason families each static fault's definition implies: "required" must be present and
# nothing outside "allowed" may appear. Faults that trip several families are listed in
# docs/protocol.md (F2/F4 -> also replay; F3 -> also replay; F7 -> also scope).
STATIC_EXPECTED: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "F1": (frozenset({"coverage"}), frozenset({"coverage"})),
    "F2": (frozenset({"scope"}), frozenset({"scope", "replay"})),
    "F3": (frozenset({"evidence"}), frozenset({"evidence", "replay"})),
    "F4": (frozenset({"scope"}), frozenset({"scope", "replay"})),
    "F5": (frozenset({"coverage"}), frozenset({"coverage"})),
    "F6": (frozenset({"replay"}), frozenset({"replay"})),
    "F7": (frozenset({"evidence"}), frozenset({"evidence", "scope"})),
    "F8": (frozenset(), frozenset({"coverage", "scope"})),
}


def test_static_grid_shape_and_canonical_order() -> None:
    grid = static_grid()
    assert len(grid) == STATIC_SNAPSHOTS
    expected = [f"{t.task_id}/{c}" for t in static_tasks() for c in STATIC_CONDITIONS]
    assert [s.snapshot_id for s in grid] == expected
    heldout = [s for s in grid if s.task.split == "heldout" and s.condition != "C0"]
    assert len(heldout) == 288 and len({s.task.task_id for s in heldout}) == 36
    assert Counter(s.gold_decision for s in grid) == {"complete": 48, "continue": 384}


def test_faults_keep_the_task_and_its_gold() -> None:
    grid = static_grid()
    for i in range(0, len(grid), 9):
        clean = grid[i]
        for s in grid[i + 1 : i + 9]:
            assert s.task is clean.task
            assert s.certificate.descriptor_digest == clean.certificate.descriptor_digest


def test_every_clean_snapshot_verifies_complete() -> None:
    for s in static_grid():
        if s.condition == "C0":
            d = verify(s.task.contract, s.ledger, s.certificate)
            assert d.complete, (s.snapshot_id, d.to_json())
            assert (s.completion_signal, s.repeated_call, s.recovery_available) == (
                True,
                False,
                False,
            )
            assert {c.slot: c.value for c in s.certificate.claims} == s.task.gold


@pytest.mark.parametrize("fault", list(STATIC_EXPECTED))
def test_every_fault_snapshot_verifies_continue_with_its_reason_family(fault: str) -> None:
    required, allowed = STATIC_EXPECTED[fault]
    for s in static_grid():
        if s.condition != fault:
            continue
        d = verify(s.task.contract, s.ledger, s.certificate)
        assert d.decision == "continue", s.snapshot_id
        assert required <= d.families <= allowed, (s.snapshot_id, sorted(d.families))
        # Ledgers are always what the trusted adapter makes of the trace.
        assert ledger_from_trace(s.task.task_id, s.trace) == s.ledger


def test_fault_specific_reason_codes() -> None:
    codes: dict[str, Counter[str]] = {}
    for s in static_grid():
        d = verify(s.task.contract, s.ledger, s.certificate)
        codes.setdefault(s.condition, Counter()).update({r.code for r in d.reasons})
    assert codes["F1"]["coverage.missing_slot"] == 48
    assert codes["F3"]["evidence.exec_error"] == 48
    assert codes["F5"]["coverage.missing_slot"] == 48
    assert codes["F6"]["replay.mismatch"] == 48
    assert codes["F7"]["evidence.unknown_receipt"] == 48
    assert codes["F4"]["scope.date_mismatch"] == 48
    # F2: another entity's receipt; where every store is in scope it duplicates a scope key.
    assert codes["F2"]["scope.entity_mismatch"] + codes["F2"]["scope.duplicate_key"] == 48
    assert set(codes["F8"]) <= {"coverage.missing_slot", "scope.cardinality"}


def test_f8_snapshots_repeat_a_call_with_recovery_available() -> None:
    for s in static_grid():
        if s.condition != "F8":
            continue
        assert s.repeated_call and s.recovery_available and not s.completion_signal
        keys = [(c.tool_id, tuple(sorted(c.args.items()))) for c in s.trace]
        assert keys[-1] == keys[-2]
        assert len(s.certificate.claims) < len(s.task.contract.slots) or any(
            len(c.evidence) < s.task.contract.slots[c.slot].cardinality.min  # type: ignore[union-attr]
            for c in s.certificate.claims
        )


def test_plan_calls_cover_the_contract_from_the_contract_alone() -> None:
    for t in (*static_tasks(), *closed_loop_tasks()):
        calls = plan_calls(t.contract)
        assert calls == plan_calls(t.contract)
        assert all(tool in tools.TOOL_SCHEMAS for tool, _ in calls)


# --- closed loop ------------------------------------------------------------------------------


def test_closed_loop_set_shape() -> None:
    cps = closed_loop_checkpoints()
    assert len(cps) == 48
    tasks = closed_loop_tasks()
    assert [c.checkpoint_id for c in cps] == [
        f"{t.task_id}/{k}" for t in tasks for k in ("clean", "incomplete")
    ]
    assert {t.world_id for t in tasks} == {"w10", "w11", "w12", "w13"}
    assert Counter(t.family for t in tasks) == {f: 4 for f in Counter(t.family for t in tasks)}


def test_fault_assignment_gives_each_fault_two_tasks() -> None:
    assignment = fault_assignment()
    assert list(assignment) == list(CLOSED_LOOP_FAULTS)
    flat = [tid for ids in assignment.values() for tid in ids]
    assert all(len(ids) == 2 for ids in assignment.values())
    assert sorted(flat) == sorted(t.task_id for t in closed_loop_tasks())
    for ids in assignment.values():
        a, b = ids
        assert a.split("-")[0] != b.split("-")[0] and a.split("-", 1)[1] != b.split("-", 1)[1]
    assert assignment == fault_assignment()
    by_task = {c.task.task_id: c.fault for c in closed_loop_checkpoints() if c.kind == "incomplete"}
    assert {f: sorted(ids) for f, ids in assignment.items()} == {
        f: sorted(t for t, g in by_task.items() if g == f) for f in CLOSED_LOOP_FAULTS
    }


def test_clean_checkpoints_are_supported() -> None:
    for c in closed_loop_checkpoints():
        if c.kind == "clean":
            assert c.fault is None and c.recovery_calls == () and not c.needs_human
            assert verify(c.task.contract, c.ledger, c.naive_certificate).complete
            assert verify(
                c.task.contract, c.ledger, propose_certificate(c.task.contract, c.ledger)
            ).complete


def _recover(c: TaskCheckpoint) -> Ledger:
    """Replay the recovery calls through the real tools and the trusted adapter."""
    trace = list(c.trace)
    receipts = list(c.ledger.receipts)
    snap = world_snapshot(c.task.world_id)
    for tool_id, args in c.recovery_calls:
        cid = call_id(len(trace) + 1)
        response = tools.call_tool(snap, tool_id, args)
        trace.append(TraceCall(cid, tool_id, dict(args), response))
        receipts += to_receipts(
            c.task.task_id, cid, tool_id, args, response, first_index=len(receipts) + 1
        )
    ledger = Ledger(c.task.task_id, tuple(receipts))
    assert ledger == ledger_from_trace(c.task.task_id, trace)
    return ledger


def test_every_incomplete_checkpoint_is_unsupported_then_recoverable_within_budget() -> None:
    for c in closed_loop_checkpoints():
        if c.kind != "incomplete":
            continue
        contract = c.task.contract
        assert not verify(contract, c.ledger, propose_certificate(contract, c.ledger)).complete
        assert not verify(contract, c.ledger, c.naive_certificate).complete, c.checkpoint_id
        if c.fault == "T1":
            # Two valid receipts disagree: no call can settle it; the loop must escalate.
            assert c.needs_human and c.recovery_calls == ()
            continue
        assert 1 <= len(c.recovery_calls) <= 3 and not c.needs_human
        ledger = _recover(c)
        d = verify(contract, ledger, propose_certificate(contract, ledger))
        assert d.complete, (c.checkpoint_id, d.to_json())
        cert = propose_certificate(contract, ledger)
        assert {cl.slot: cl.value for cl in cert.claims} == c.task.gold


UNSEEN_EXPECTED = {
    "U1": "evidence.invalid",
    "U2": "scope.duplicate_key",
    "U3": "transform.not_permitted",
    "T1": "evidence.conflicting_receipts",
}


@pytest.mark.parametrize("fault", list(UNSEEN_EXPECTED))
def test_unseen_and_trust_boundary_checkpoints_trip_the_intended_reason(fault: str) -> None:
    hits = [c for c in closed_loop_checkpoints() if c.fault == fault]
    assert len(hits) == 2
    for c in hits:
        d = verify(c.task.contract, c.ledger, c.naive_certificate)
        assert d.decision == "continue"
        assert UNSEEN_EXPECTED[fault] in {r.code for r in d.reasons}, (c.checkpoint_id, d.to_json())


def test_trust_boundary_conflict_survives_recovery_attempts() -> None:
    for c in closed_loop_checkpoints():
        if c.fault != "T1":
            continue
        plan = plan_calls(c.task.contract)
        extra = type(c)(
            **{**{f: getattr(c, f) for f in c.__dataclass_fields__}, "recovery_calls": tuple(plan)}
        )
        ledger = _recover(extra)
        d = verify(c.task.contract, ledger, propose_certificate(c.task.contract, ledger))
        assert "evidence.conflicting_receipts" in {r.code for r in d.reasons}


def test_no_static_snapshot_claims_a_gold_value_its_evidence_does_not_give() -> None:
    """A snapshot is what a real agent could have written from its trace: a claim carries the
    gold value only where what it cites gives it (the closed-loop drafts' rule), except F7,
    whose point is a claim citing a receipt the trace does not hold. Before, F2/F3/F4 kept the
    clean certificate's gold values over a changed ledger, so the postconditions arm (values
    against gold, evidence ignored) accepted every one of them (unsafe) by construction."""
    from runner.ect import values_match
    from tests.worlds.test_drafts import _derivable
    leaks: Counter[str] = Counter()
    for s in static_grid():
        if s.condition == "F7":
            continue
        by_id = {r.receipt_id: r for r in s.ledger.receipts}
        for claim in s.certificate.claims:
            if values_match(claim.value, s.task.gold[claim.slot], tolerance=0) and not _derivable(
                    claim, [by_id[e] for e in claim.evidence if e in by_id]):
                leaks[s.condition] += 1
    assert leaks == Counter()
    # Under a ledger-changing fault every value is what the cited receipts now give, so the
    # gold answer survives only where the substituted evidence happens to give it.
    gold_kept = Counter(
        s.condition for s in static_grid() if s.condition in ("F2", "F3", "F4")
        and all(values_match(c.value, s.task.gold[c.slot], tolerance=0)
                for c in s.certificate.claims))
    assert 0 < sum(gold_kept.values()) < 3 * 48, gold_kept
