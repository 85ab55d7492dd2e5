"""The canonical schedule: spec + closed-loop checkpoints -> ordered rows with derived seeds.

Order is part of the format: task (as the worlds package lists them, restricted to the spec's
worlds) -> checkpoint kind (spec order) -> seed index -> policy (spec order). Seeds are derived
by sha256 from the spec's ``seed_root`` and the (task, checkpoint, seed index) triple, so the
policies of one triple see matched nominal inputs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.canonical import canonical_bytes, loads_strict, read_bounded
from runner.errors import ExitCategory, FormatError, StudyError
from runner.study._records import ScheduleRow
from runner.study._spec import StudySpec

__all__ = [
    "CheckpointRef",
    "ScheduleError",
    "build_schedule",
    "cell_seed",
    "read_schedule",
    "schedule_bytes",
]


class ScheduleError(StudyError):
    """The schedule file is malformed or does not match what the spec builds."""

    exit_category = ExitCategory.USAGE


@dataclass(frozen=True)
class CheckpointRef:
    """What the schedule needs to know of one closed-loop checkpoint."""

    task_id: str
    world_id: str
    family: str
    checkpoint_id: str
    kind: str
    fault: str | None


def cell_seed(seed_root: str, task_id: str, kind: str, seed_index: int) -> int:
    material = f"{seed_root}\n{task_id}\n{kind}\n{seed_index}".encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:4], "big") & 0x7FFFFFFF


def build_schedule(spec: StudySpec, checkpoints: Iterable[CheckpointRef]) -> list[ScheduleRow]:
    """Return the canonical rows for ``spec`` over ``checkpoints`` (in the order given)."""
    by_task: dict[str, dict[str, CheckpointRef]] = {}
    order: list[str] = []
    for ref in checkpoints:
        if ref.world_id not in spec.worlds:
            continue
        if ref.task_id not in by_task:
            by_task[ref.task_id] = {}
            order.append(ref.task_id)
        if ref.kind in by_task[ref.task_id]:
            raise ScheduleError(f"task {ref.task_id} has two {ref.kind} checkpoints")
        by_task[ref.task_id][ref.kind] = ref
    rows: list[ScheduleRow] = []
    for task_id in order:
        for kind in spec.checkpoints:
            found = by_task[task_id].get(kind)
            if found is None:
                raise ScheduleError(f"task {task_id} has no {kind} checkpoint")
            for seed_index in range(spec.seeds):
                seed = cell_seed(spec.seed_root, task_id, kind, seed_index)
                for policy in spec.policies:
                    rows.append(ScheduleRow(
                        row=len(rows) + 1,
                        cell_id=f"{task_id}:{kind}:s{seed_index}:{policy}",
                        task_id=task_id,
                        world_id=found.world_id,
                        family=found.family,
                        checkpoint_id=found.checkpoint_id,
                        checkpoint=kind,
                        fault=found.fault,
                        seed_index=seed_index,
                        seed=seed,
                        policy=policy,
                    ))
    return rows


def schedule_bytes(rows: Sequence[ScheduleRow]) -> bytes:
    """The schedule file: one canonical JSON row per line."""
    return b"".join(canonical_bytes(r.to_json()) + b"\n" for r in rows)


def read_schedule(path: str | Path) -> list[ScheduleRow]:
    """Read a schedule file (the one reader of schedules: ``run``, ``report`` and the lock all
    come here), checking every row's shape, canonical form and numbering.

    Raises:
        ScheduleError: unreadable, malformed, or rows out of order.
    """
    path = Path(path)
    try:
        data = read_bounded(path, what="schedule")
    except OSError as e:
        raise ScheduleError(f"cannot read schedule {path}: {e.strerror}") from e
    except FormatError as e:
        raise ScheduleError(str(e)) from e
    rows: list[ScheduleRow] = []
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line:
            continue
        try:
            obj = loads_strict(line)
            row = ScheduleRow.from_json(obj, "row")
        except FormatError as e:
            raise ScheduleError(f"{path}:{lineno}: not a schedule row: {e}") from e
        if row.row != len(rows) + 1:
            raise ScheduleError(f"{path}:{lineno}: expected row {len(rows) + 1}, got {row.row}")
        if canonical_bytes(obj) != line:
            raise ScheduleError(f"{path}:{lineno}: row is not in canonical form")
        rows.append(row)
    return rows
