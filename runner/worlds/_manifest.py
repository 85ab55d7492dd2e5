"""The task manifest: digests pinning every world, task, oracle answer, snapshot and checkpoint.

``task_manifest()`` is a plain JSON object (``format: ect.task-manifest/1``); its
``ect/manifest/v1`` digest is :func:`task_manifest_digest`, pinned by the study lock and by the
golden file ``tests/worlds/golden/task_manifest.json``. Digest domains: descriptors use
``ect/task-descriptor/v1``, gold answers ``ect/value/v1``, ledgers ``ect/ledger/v1``; contracts,
certificates, traces, worlds, snapshots and checkpoints ``ect/manifest/v1`` over their
``to_json()``.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from runner.canonical import digest
from runner.ect import descriptor_digest, ledger_digest
from runner.worlds._grid import (
    STATIC_CONDITIONS,
    closed_loop_checkpoints,
    fault_assignment,
    static_grid,
)
from runner.worlds._tasks import Task, closed_loop_tasks, static_tasks
from runner.worlds._world import WORLDS_CLOSED_LOOP, WORLDS_STATIC, build_world

__all__ = ["MANIFEST_FORMAT", "manifest_counts", "task_manifest", "task_manifest_digest"]

MANIFEST_FORMAT = "ect.task-manifest/1"


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


@functools.cache
def _manifest() -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "worlds": {w: build_world(w).digest() for w in (*WORLDS_STATIC, *WORLDS_CLOSED_LOOP)},
        "static_conditions": list(STATIC_CONDITIONS),
        "tasks": [_task_entry(t) for t in (*static_tasks(), *closed_loop_tasks())],
        "snapshots": [
            {
                "snapshot_id": s.snapshot_id,
                "condition": s.condition,
                "gold_decision": s.gold_decision,
                "ledger_digest": ledger_digest(s.ledger),
                "digest": digest("ect/manifest/v1", s.to_json()),
            }
            for s in static_grid()
        ],
        "checkpoints": [
            {
                "checkpoint_id": c.checkpoint_id,
                "kind": c.kind,
                "fault": c.fault,
                "ledger_digest": ledger_digest(c.ledger),
                "digest": digest("ect/manifest/v1", c.to_json()),
            }
            for c in closed_loop_checkpoints()
        ],
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
