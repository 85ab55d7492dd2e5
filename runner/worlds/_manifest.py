"""The task manifest: digests pinning every world, task, oracle answer, snapshot and checkpoint.

``task_manifest()`` is a plain JSON object (``format: ect.task-manifest/1``); its
``ect/manifest/v1`` digest is :func:`task_manifest_digest`, pinned by the study lock and by the
golden file ``tests/worlds/golden/task_manifest.json``. Digest domains: descriptors use
``ect/task-descriptor/v1``, gold answers ``ect/value/v1``, ledgers ``ect/ledger/v1``; contracts,
certificates, traces (the list of calls) and worlds ``ect/manifest/v1`` over their JSON form. A
snapshot's or checkpoint's ``digest`` is the ``ect/manifest/v1`` digest of its entry (ids, flags
and the digests of its trace, ledger and certificate), so it pins the whole snapshot.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from runner.canonical import digest
from runner.ect import Certificate, Ledger, descriptor_digest, ledger_digest
from runner.worlds._adapter import TraceCall
from runner.worlds._grid import (
    STATIC_CONDITIONS,
    Snapshot,
    TaskCheckpoint,
    closed_loop_checkpoints,
    fault_assignment,
    static_grid,
)
from runner.worlds._tasks import Task, closed_loop_tasks, static_tasks
from runner.worlds._world import WORLDS_CLOSED_LOOP, WORLDS_STATIC, build_world

__all__ = ["TASK_MANIFEST_FORMAT", "manifest_counts", "task_manifest", "task_manifest_digest"]

TASK_MANIFEST_FORMAT = "ect.task-manifest/1"


def _task_entry(task: Task) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "family": task.family,
        "world_id": task.world_id,
        "split": task.split,
        "descriptor_digest": descriptor_digest(task.descriptor),
        "contract_digest": digest("ect/manifest/v1", task.contract.to_json()),
        "gold_digest": digest("ect/value/v1", task.gold),
    }


def manifest_counts() -> dict[str, Any]:
    """What was built, counted (never constants): the shape ``ect tasks manifest`` prints."""
    grid = static_grid()
    heldout_faults = [s for s in grid if s.task.split == "heldout" and s.condition != "C0"]
    return {
        "static": {
            "tasks": len({s.task.task_id for s in grid}),
            "snapshots": len(grid),
            "heldout_fault_snapshots": len(heldout_faults),
        },
        "closed_loop": {
            "tasks": len({c.task.task_id for c in closed_loop_checkpoints()}),
            "checkpoints": len(closed_loop_checkpoints()),
        },
    }


class _Memo:
    """Digests of objects shared between snapshots (clean traces, ledgers), computed once."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[object, str]] = {}

    def trace(self, trace: tuple[TraceCall, ...]) -> str:
        return self._get(trace, lambda: digest("ect/manifest/v1", [c.to_json() for c in trace]))

    def ledger(self, ledger: Ledger) -> str:
        return self._get(ledger, lambda: ledger_digest(ledger))

    def certificate(self, cert: Certificate) -> str:
        return self._get(cert, lambda: digest("ect/manifest/v1", cert.to_json()))

    def _get(self, obj: object, compute: Callable[[], str]) -> str:
        hit = self._seen.get(id(obj))
        if hit is None or hit[0] is not obj:
            hit = (obj, compute())
            self._seen[id(obj)] = hit
        return hit[1]


def _snapshot_entry(s: Snapshot, memo: _Memo) -> dict[str, Any]:
    core = {
        "snapshot_id": s.snapshot_id,
        "task_id": s.task.task_id,
        "condition": s.condition,
        "trace_digest": memo.trace(s.trace),
        "ledger_digest": memo.ledger(s.ledger),
        "certificate_digest": memo.certificate(s.certificate),
        "completion_signal": s.completion_signal,
        "recovery_available": s.recovery_available,
        "repeated_call": s.repeated_call,
        "gold_decision": s.gold_decision,
    }
    return {**core, "digest": digest("ect/manifest/v1", core)}


def _checkpoint_entry(c: TaskCheckpoint, memo: _Memo) -> dict[str, Any]:
    core = {
        "checkpoint_id": c.checkpoint_id,
        "task_id": c.task.task_id,
        "kind": c.kind,
        "fault": c.fault,
        "trace_digest": memo.trace(c.trace),
        "ledger_digest": memo.ledger(c.ledger),
        "naive_certificate_digest": memo.certificate(c.naive_certificate),
        "recovery_calls": [{"tool_id": t, "args": a} for t, a in c.recovery_calls],
        "needs_human": c.needs_human,
    }
    return {**core, "digest": digest("ect/manifest/v1", core)}


@functools.cache
def _manifest() -> dict[str, Any]:
    memo = _Memo()
    return {
        "format": TASK_MANIFEST_FORMAT,
        "worlds": {w: build_world(w).digest() for w in (*WORLDS_STATIC, *WORLDS_CLOSED_LOOP)},
        "static_conditions": list(STATIC_CONDITIONS),
        "tasks": [_task_entry(t) for t in (*static_tasks(), *closed_loop_tasks())],
        "snapshots": [_snapshot_entry(s, memo) for s in static_grid()],
        "checkpoints": [_checkpoint_entry(c, memo) for c in closed_loop_checkpoints()],
        "fault_assignment": fault_assignment(),
        "counts": manifest_counts(),
    }


def task_manifest() -> dict[str, Any]:
    """The manifest (a fresh copy each call: callers may mutate it)."""
    return copy.deepcopy(_manifest())


@functools.cache
def task_manifest_digest() -> str:
    """``ect/manifest/v1`` digest of :func:`task_manifest` (``sha256:<hex>``)."""
    return digest("ect/manifest/v1", _manifest())
