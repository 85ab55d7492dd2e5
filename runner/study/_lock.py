"""The study lock: digests of everything that defines a run (docs/study.md).

The lock pins the spec bytes, the schedule bytes, the task manifest, the prompts, the frozen
generation config, the stop rules in force, the sandbox pins and the source tree. A lock is never rewritten silently:
:func:`write_lock` refuses to replace a different lock unless asked to, and every consumer
(preflight, run, resume) compares the lock against the files it was given and names each drift.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.canonical import (
    JsonObject,
    atomic_write,
    canonical_bytes,
    digest,
    load_strict_file,
    raw_digest,
)
from runner.errors import ExitCategory, FormatError, StudyError
from runner.study._records import ScheduleRow
from runner.study._schedule import CheckpointRef, build_schedule, read_schedule, schedule_bytes
from runner.study._spec import StudySpec, load_spec

__all__ = [
    "LOCK_FORMAT",
    "Drift",
    "LockError",
    "LockMismatch",
    "StudyPaths",
    "build_lock",
    "check_lock",
    "closed_loop_refs",
    "generation_config",
    "lock_digest",
    "read_lock",
    "source_tree_digest",
    "study_paths",
    "write_lock",
    "write_schedule",
]

LOCK_FORMAT = "ect.lock/1"
_SOURCE_SUFFIXES = (".py", ".txt", ".json", ".toml", ".sb", ".md")


class LockError(StudyError):
    """The lock file is missing or malformed, or would be rewritten silently."""

    exit_category = ExitCategory.REFUSED


class LockMismatch(StudyError):
    """The lock does not match the files it pins; the message names the first drift."""

    exit_category = ExitCategory.REFUSED

    def __init__(self, drifts: list[Drift]) -> None:
        self.drifts = drifts
        first = drifts[0]
        more = f" (and {len(drifts) - 1} more)" if len(drifts) > 1 else ""
        super().__init__(f"lock drift: {first.field}: locked {first.locked}, now {first.actual}{more}")


@dataclass(frozen=True)
class Drift:
    field: str
    locked: str
    actual: str


@dataclass(frozen=True)
class StudyPaths:
    spec: Path
    schedule: Path
    lock: Path


def study_paths(spec_path: str | Path) -> StudyPaths:
    """``schedules/v2.toml`` -> its schedule ``v2.schedule.jsonl`` and lock ``v2.lock.json``."""
    spec = Path(spec_path)
    stem = spec.with_suffix("")
    return StudyPaths(spec, Path(f"{stem}.schedule.jsonl"), Path(f"{stem}.lock.json"))


def closed_loop_refs() -> list[CheckpointRef]:
    from runner.worlds import closed_loop_checkpoints

    return [
        CheckpointRef(
            task_id=c.task.task_id,
            world_id=c.task.world_id,
            family=c.task.family,
            checkpoint_id=c.checkpoint_id,
            kind=c.kind,
            fault=c.fault,
        )
        for c in closed_loop_checkpoints()
    ]


def source_tree_digest(root: Path | None = None) -> str:
    """Digest of every source and package-data file under ``runner/`` (path and bytes)."""
    base = root or Path(__file__).resolve().parent.parent
    entries = []
    for dirpath, dirnames, filenames in os.walk(base):
        # runner/_study is a wheel's copy of the study's data, digested on its own (spec,
        # schedule, sandbox pins): the tree a wheel runs has the checkout's digest
        dirnames[:] = sorted(d for d in dirnames
                             if d != "__pycache__" and not (Path(dirpath) == base and d == "_study"))
        for name in sorted(filenames):
            if not name.endswith(_SOURCE_SUFFIXES):
                continue
            path = Path(dirpath, name)
            rel = path.relative_to(base).as_posix()
            entries.append([rel, hashlib.sha256(path.read_bytes()).hexdigest()])
    entries.sort()
    return raw_digest(canonical_bytes(entries))


def generation_config(spec: StudySpec) -> JsonObject:
    """The frozen generation config, retry policy and price table, as locked."""
    return {
        "model": spec.model.name,
        "temperature": spec.model.temperature,
        "max_output_tokens": spec.model.max_output_tokens,
        "timeout_s": spec.model.timeout_s,
        "retry": {"identical_retries_before_output": spec.identical_retries_before_output,
                  # what a transport failure that survived its retry does ([provider])
                  "on_transport_failure": spec.provider.on_transport_failure},
        "price": {"input_per_mtok": spec.price_input_per_mtok,
                  "output_per_mtok": spec.price_output_per_mtok},
        "budget": {"max_decisions": spec.budget.max_decisions,
                   "max_additional_tool_calls": spec.budget.max_additional_tool_calls},
        "simulated": spec.simulated,
    }


def write_schedule(spec: StudySpec, paths: StudyPaths, *, replace: bool = False) -> list[ScheduleRow]:
    """Build the schedule from the spec and write it; refuse to replace different bytes."""
    rows = build_schedule(spec, closed_loop_refs())
    data = schedule_bytes(rows)
    if paths.schedule.exists() and paths.schedule.read_bytes() != data and not replace:
        raise LockError(f"{paths.schedule} exists with different contents; pass --replace to rebuild it")
    atomic_write(paths.schedule, data)
    return rows


def build_lock(spec: StudySpec, paths: StudyPaths,
               *, extra: Callable[[], JsonObject] | None = None) -> JsonObject:
    """Compute the lock for the files at ``paths`` as they are now."""
    from runner.policies import prompt_digests
    from runner.sandbox import verify_pins
    from runner.worlds import task_manifest_digest

    try:
        schedule_raw = paths.schedule.read_bytes()
    except OSError as e:
        raise LockError(f"cannot read schedule {paths.schedule}: {e.strerror}; run `ect schedule build`") from e
    rows = read_schedule(paths.schedule)
    lock = {
        "format": LOCK_FORMAT,
        "study": spec.name,
        "spec": {"file": paths.spec.name, "sha256": spec.digest},
        "schedule": {"file": paths.schedule.name, "sha256": raw_digest(schedule_raw),
                     "rows": len(rows)},
        "task_manifest": task_manifest_digest(),
        "prompts": dict(sorted(prompt_digests().items())),
        "generation": generation_config(spec),
        # every rule that can end a trajectory: the protocol's limits, the controls beyond it
        # (all off in the frozen study) and the run's own stop events
        "stop_rules": spec.stop_rules_in_force(),
        "sandbox_pins": dict(sorted(verify_pins().items())),
        "source_tree": source_tree_digest(),
    }
    if extra is not None:
        lock.update(extra())
    return lock


def lock_digest(lock: JsonObject) -> str:
    return digest("ect/lock/v1", lock)


def read_lock(path: Path) -> JsonObject:
    try:
        lock = load_strict_file(path)
    except OSError as e:
        raise LockError(f"cannot read lock {path}: {e.strerror}; run `ect schedule lock`") from e
    except FormatError as e:
        raise LockError(f"lock {path} is not valid JSON: {e}") from e
    if not isinstance(lock, dict) or lock.get("format") != LOCK_FORMAT:
        raise LockError(f"{path} is not an {LOCK_FORMAT} lock")
    return lock


def write_lock(spec: StudySpec, paths: StudyPaths, *, replace: bool = False) -> JsonObject:
    """Write the lock for the current files. Refuses to change an existing lock unless ``replace``."""
    lock = build_lock(spec, paths)
    data = canonical_bytes(lock) + b"\n"
    if paths.lock.exists() and paths.lock.read_bytes() != data:
        if not replace:
            old = read_lock(paths.lock)
            drifts = _diff(old, lock)
            what = drifts[0].field if drifts else "contents"
            raise LockError(f"{paths.lock} exists and differs ({what}); pass --replace to rewrite it")
    atomic_write(paths.lock, data)
    return lock


def check_lock(spec_path: str | Path) -> tuple[StudySpec, StudyPaths, JsonObject, list[ScheduleRow]]:
    """Load spec, schedule and lock and check that the lock pins exactly these files.

    Returns (spec, paths, lock, schedule rows).

    Raises:
        LockError: a file is missing or malformed.
        LockMismatch: the lock does not match; every drift is listed on the exception.
    """
    spec = load_spec(spec_path)
    paths = study_paths(spec_path)
    locked = read_lock(paths.lock)
    actual = build_lock(spec, paths)
    drifts = _diff(locked, actual)
    if drifts:
        raise LockMismatch(drifts)
    rows = read_schedule(paths.schedule)
    expected = build_schedule(spec, closed_loop_refs())
    if rows != expected:
        first = next((i for i, (a, b) in enumerate(zip(rows, expected, strict=False)) if a != b),
                     min(len(rows), len(expected)))
        raise LockMismatch([Drift("schedule.rows", f"row {first + 1} as built from the spec",
                                  f"row {first + 1} in {paths.schedule.name}")])
    return spec, paths, locked, rows


def _diff(locked: JsonObject, actual: JsonObject, prefix: str = "") -> list[Drift]:
    drifts: list[Drift] = []
    for key in sorted(set(locked) | set(actual)):
        a, b = locked.get(key), actual.get(key)
        field = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            drifts.extend(_diff(a, b, field + "."))
        elif a != b:
            drifts.append(Drift(field, _short(a), _short(b)))
    return drifts


def _short(value: Any) -> str:
    text = "absent" if value is None else str(value)
    return text if len(text) <= 80 else text[:77] + "..."
