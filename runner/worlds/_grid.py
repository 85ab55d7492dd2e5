"""The static grid (432 snapshots) and the closed-loop checkpoints (48), built by the fault
operators of the registry (``runner/worlds/_faults.py``).

Every operator starts from a clean, dual-oracle-admitted task and changes only what its
definition says (docs/protocol.md has the table). A static snapshot is the clean trace and
certificate as the operator leaves them; an incomplete closed-loop checkpoint is the task's
incomplete base (``runner/worlds/_staging.py``) with the calls its operator stages.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.canonical import JsonRecord, spec
from runner.ect import Certificate, Ledger
from runner.errors import WorldError
from runner.worlds._adapter import TraceCall, ledger_from_trace
from runner.worlds._faults import (
    CLOSED_LOOP_FAULTS,
    FAULTS,
    STATIC_CONDITIONS,
    STATIC_FAULTS,
    TRUST_BOUNDARY_FAULT,
    UNSEEN_FAULTS,
    StaticParts,
    fault,
)
from runner.worlds._staging import (
    Call,
    _clean_state,
    _incomplete_base,
    _retrace,
    _Staging,
    naive_certificate,
    observed_value,
)
from runner.worlds._tasks import Task, closed_loop_tasks, static_tasks

__all__ = [
    "CLOSED_LOOP_FAULTS",
    "STATIC_CONDITIONS",
    "STATIC_FAULTS",
    "TRUST_BOUNDARY_FAULT",
    "UNSEEN_FAULTS",
    "Snapshot",
    "TaskCheckpoint",
    "closed_loop_checkpoints",
    "fault_assignment",
    "naive_certificate",
    "observed_value",
    "static_grid",
]

def _task_id(task: Task) -> str:
    return task.task_id


def _calls_json(calls: tuple[Call, ...]) -> list[dict[str, Any]]:
    return [{"tool_id": tool_id, "args": args} for tool_id, args in calls]


_BY_ID = spec(key="task_id", write=_task_id)  # a task is named by its id


@dataclass(frozen=True, slots=True)
class Snapshot(JsonRecord):
    """One static-study snapshot: a trace, its ledger and the certificate proposed at the end."""

    snapshot_id: str
    task: Task = field(metadata=_BY_ID)
    condition: str  # "C0" or a static fault of the registry (STATIC_CONDITIONS)
    trace: tuple[TraceCall, ...]
    ledger: Ledger
    certificate: Certificate
    completion_signal: bool
    recovery_available: bool
    repeated_call: bool
    gold_decision: Literal["complete", "continue"]


@dataclass(frozen=True, slots=True)
class TaskCheckpoint(JsonRecord):
    """A closed-loop starting point: the trace so far and how it can be completed.

    ``recovery_calls`` are the (at most 3) calls after which :func:`propose_certificate`
    verifies ``complete``; empty for a clean checkpoint and for T1, whose conflicting receipts no
    call can resolve (``needs_human``: the loop should escalate). ``naive_certificate`` is what a
    premature finisher would propose from this trace (for a clean checkpoint: the honest one).
    """

    checkpoint_id: str
    task: Task = field(metadata=_BY_ID)
    kind: Literal["clean", "incomplete"]
    fault: str | None
    trace: tuple[TraceCall, ...]
    ledger: Ledger
    recovery_calls: tuple[Call, ...] = field(metadata=spec(write=_calls_json))
    naive_certificate: Certificate
    needs_human: bool


# --- the static grid -------------------------------------------------------------------------


def _snapshot(task: Task, condition: str) -> Snapshot:
    trace, ledger, certificate = _clean_state(task.task_id)
    parts = StaticParts(trace, ledger, certificate)
    if condition != "C0":
        if condition not in STATIC_FAULTS:
            raise WorldError(f"unknown static condition {condition!r}")
        parts = fault(condition).snapshot(task, parts)
    return Snapshot(
        snapshot_id=f"{task.task_id}/{condition}",
        task=task,
        condition=condition,
        trace=parts.trace,
        ledger=parts.ledger,
        certificate=parts.certificate,
        completion_signal=parts.completion_signal,
        recovery_available=condition != "C0",
        repeated_call=parts.repeated_call,
        gold_decision="complete" if condition == "C0" else "continue",
    )


@functools.lru_cache(maxsize=1)
def _static_grid() -> tuple[Snapshot, ...]:
    return tuple(_snapshot(t, c) for t in static_tasks() for c in STATIC_CONDITIONS)


def static_grid() -> list[Snapshot]:
    """The 432 static snapshots in canonical order: tasks in order, each with every condition of
    ``STATIC_CONDITIONS`` (C0, F1..F8)."""
    return list(_static_grid())


# --- the closed-loop set ---------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _assignment() -> dict[tuple[str, str], str]:
    """(world, family) -> the fault applied to that closed-loop task, from the operators'
    ``closed_loop`` pairs; every closed-loop task gets exactly one fault."""
    out: dict[tuple[str, str], str] = {}
    for op in FAULTS:
        for cell in op.closed_loop:
            if cell in out:
                raise WorldError(f"fault registry: {cell} is assigned {out[cell]} and {op.code}")
            out[cell] = op.code
    tasks = {(t.world_id, t.family) for t in closed_loop_tasks()}
    if set(out) != tasks:
        raise WorldError(
            "fault registry: the operators' closed-loop tasks must cover every closed-loop "
            f"task once (unassigned {sorted(tasks - set(out))}, unknown {sorted(set(out) - tasks)})"
        )
    return out


def fault_assignment() -> dict[str, list[str]]:
    """fault -> the two closed-loop task ids it is applied to (deterministic, fixed)."""
    out: dict[str, list[str]] = {f: [] for f in CLOSED_LOOP_FAULTS}
    for task in closed_loop_tasks():
        out[_assignment()[task.world_id, task.family]].append(task.task_id)
    return out


def _incomplete(task: Task, code: str) -> TaskCheckpoint:
    if code not in CLOSED_LOOP_FAULTS:
        raise WorldError(f"unknown closed-loop fault {code!r}")
    op = fault(code)
    base, recovery = _incomplete_base(task)
    s = _Staging(task, [(t, a, None) for t, a in base], recovery, [recovery])
    n_base = len(s.steps)
    op.stage(s)
    trace = _retrace(task.world_id, s.steps)
    ledger = ledger_from_trace(task.task_id, trace)
    injected = op.injected(ledger)
    if op.injects_new_receipts:
        ids = {c.call_id for c in trace[n_base:]}
        injected = [r.receipt_id for r in ledger.receipts if r.call_id in ids]
    r_args = recovery[1]
    stand_in = ((r_args["entity"], r_args["attribute"], r_args["date"])
                if op.stands_in_for_recovery else None)
    naive = naive_certificate(
        task, ledger, include=injected, stand_in=stand_in, transform_overrides=s.overrides
    )
    naive = dataclasses.replace(naive, claims=op.claims(task, ledger, naive.claims))
    return TaskCheckpoint(
        checkpoint_id=f"{task.task_id}/incomplete",
        task=task,
        kind="incomplete",
        fault=code,
        trace=trace,
        ledger=ledger,
        recovery_calls=tuple(s.recovery_calls),
        naive_certificate=naive,
        needs_human=s.needs_human,
    )


def _clean(task: Task) -> TaskCheckpoint:
    trace, ledger, certificate = _clean_state(task.task_id)
    return TaskCheckpoint(
        checkpoint_id=f"{task.task_id}/clean",
        task=task,
        kind="clean",
        fault=None,
        trace=trace,
        ledger=ledger,
        recovery_calls=(),
        naive_certificate=certificate,
        needs_human=False,
    )


@functools.lru_cache(maxsize=1)
def _checkpoints() -> tuple[TaskCheckpoint, ...]:
    out: list[TaskCheckpoint] = []
    for task in closed_loop_tasks():
        out.append(_clean(task))
        out.append(_incomplete(task, _assignment()[task.world_id, task.family]))
    return tuple(out)


def closed_loop_checkpoints() -> list[TaskCheckpoint]:
    """The 48 closed-loop checkpoints: per task (in order) its clean then its incomplete one."""
    return list(_checkpoints())
