"""The fault registry: one operator per fault, and everything that lists faults reads it."""

from __future__ import annotations

import dataclasses

import pytest

import runner.worlds._grid as grid
from runner.ect import verify
from runner.errors import WorldError
from runner.worlds import (
    CLOSED_LOOP_FAULTS,
    FAULTS,
    STATIC_CONDITIONS,
    STATIC_FAULTS,
    TRUST_BOUNDARY_FAULT,
    UNSEEN_FAULTS,
    Fault,
    Task,
    closed_loop_tasks,
    fault_assignment,
    static_grid,
    static_tasks,
)
from runner.worlds._faults import StaticParts, _check, fault
from runner.worlds._staging import _clean_state


def test_the_code_tuples_are_read_from_the_registry() -> None:
    codes = [f.code for f in FAULTS]
    assert STATIC_FAULTS == tuple(f.code for f in FAULTS if f.kind == "static")
    assert UNSEEN_FAULTS == tuple(f.code for f in FAULTS if f.kind == "unseen")
    assert [TRUST_BOUNDARY_FAULT] == [f.code for f in FAULTS if f.kind == "trust_boundary"]
    assert STATIC_CONDITIONS == ("C0", *STATIC_FAULTS)
    assert list(CLOSED_LOOP_FAULTS) == codes == ["F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8",
                                                  "U1", "U2", "U3", "T1"]
    assert [fault(c) for c in codes] == list(FAULTS)
    with pytest.raises(WorldError, match="unknown fault 'F9'"):
        fault("F9")


def test_the_assignment_is_the_operators_closed_loop_tasks() -> None:
    by_task = {(t.world_id, t.family): t.task_id for t in closed_loop_tasks()}
    assert fault_assignment() == {
        f.code: sorted(by_task[cell] for cell in f.closed_loop) for f in FAULTS
    }


def _without(code: str) -> tuple[Fault, ...]:
    return tuple(f for f in FAULTS if f.code != code)


def test_the_assignment_must_cover_every_closed_loop_task_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grid._assignment.cache_clear()
    try:
        monkeypatch.setattr(grid, "FAULTS", _without("U2"))
        with pytest.raises(WorldError, match=r"unassigned \[\('w11', 'aggregation'\)"):
            grid.fault_assignment()
        grid._assignment.cache_clear()

        class Twice(Fault):
            code = "F9"
            description = "takes a task F1 already has"
            closed_loop = (("w10", "aggregation"),)

        monkeypatch.setattr(grid, "FAULTS", (*FAULTS, Twice()))
        with pytest.raises(WorldError, match="assigned F1 and F9"):
            grid.fault_assignment()
    finally:
        grid._assignment.cache_clear()


def test_a_malformed_registry_is_refused() -> None:
    class NoSnapshot(Fault):
        code = "F9"
        description = "a static fault that forgot its snapshot"

    class Unseen(Fault):
        code = "U9"
        kind = "unseen"
        description = "an unseen fault"

    with pytest.raises(WorldError, match="F9 builds no static snapshot"):
        _check((*FAULTS, NoSnapshot()))
    with pytest.raises(WorldError, match="needs a new code"):
        _check((*FAULTS, FAULTS[0]))
    with pytest.raises(WorldError, match="F8 is out of order"):
        _check((*FAULTS[:7], Unseen(), *FAULTS[7:]))
    with pytest.raises(WorldError, match="exactly one trust-boundary"):
        _check(_without(TRUST_BOUNDARY_FAULT))
    assert _check((*FAULTS[:11], Unseen(), FAULTS[11]))["U9"].legend() == "closed loop, unseen: an unseen fault"
    with pytest.raises(WorldError, match="U1 is a unseen fault: it has no static snapshot"):
        task = static_tasks()[0]
        fault("U1").snapshot(task, StaticParts(*_clean_state(task.task_id)))


def test_a_new_static_fault_is_one_operator() -> None:
    # What adding F9 takes: one subclass; its snapshot comes from the clean one and the
    # verifier turns it away (here: a certificate bound to another task's descriptor).
    class F9(Fault):
        code = "F9"
        description = "the certificate names another task"

        def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
            cert = dataclasses.replace(clean.certificate, task_id="another-task")
            return dataclasses.replace(clean, certificate=cert)

    registry = _check((*FAULTS[:8], F9(), *FAULTS[8:]))
    assert [c for c, f in registry.items() if f.kind == "static"][-1] == "F9"
    task = static_tasks()[0]
    clean = StaticParts(*_clean_state(task.task_id))
    assert verify(task.contract, clean.ledger, clean.certificate).decision == "complete"
    faulty = registry["F9"].snapshot(task, clean)
    assert verify(task.contract, faulty.ledger, faulty.certificate).decision == "continue"
    assert registry["F9"].legend() == "the certificate names another task"


def test_each_static_snapshot_is_its_operators() -> None:
    grid_by_id = {s.snapshot_id: s for s in static_grid()}
    task = static_tasks()[5]
    clean = StaticParts(*_clean_state(task.task_id))
    for code in STATIC_FAULTS:
        parts = fault(code).snapshot(task, clean)
        s = grid_by_id[f"{task.task_id}/{code}"]
        assert (s.trace, s.ledger, s.certificate) == (parts.trace, parts.ledger, parts.certificate)
        assert (s.completion_signal, s.repeated_call) == (code != "F8", code == "F8")
        assert s.gold_decision == "continue" and s.recovery_available
