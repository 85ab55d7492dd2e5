"""The study lock: digests of everything that defines a run (docs/study.md).

The lock pins the spec bytes, the schedule bytes, the task manifest, the prompts, the frozen
generation config, the stop rules in force, the sandbox pins and the source tree. A lock is never rewritten silently:
:func:`write_lock` refuses to replace a different lock unless asked to, and every consumer
(preflight, run, resume) compares the lock against the files it was given and names each drift.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from runner.canonical import (
    Count,
    Digest,
    JsonObject,
    JsonRecord,
    NonEmptyStr,
    RecordFormatError,
    at_least,
    atomic_write,
    canonical_bytes,
    digest,
    key,
    load_strict_file,
    raw_digest,
    read_number,
    read_opt_object,
)
from runner.canonical import spec as field_spec
from runner.errors import ExitCategory, FormatError, StudyError
from runner.study._records import ScheduleRow
from runner.study._schedule import CheckpointRef, build_schedule, read_schedule, schedule_bytes
from runner.study._spec import SimulatorTables, StudySpec, load_spec

__all__ = [
    "LOCK_FORMAT",
    "Drift",
    "FilePin",
    "LockError",
    "LockMismatch",
    "LockedGeneration",
    "SchedulePin",
    "StudyLock",
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


def _simulator_tables(obj: object, path: str) -> SimulatorTables:
    """``{table: {parameter: number}}`` (the spec's ``[simulated]`` tables), strictly."""
    tables = _object(obj, path)
    out: SimulatorTables = {}
    for table, values in tables.items():
        params = _object(values, f"{path}.{table}")
        out[table] = {name: read_number(v, f"{path}.{table}.{name}")
                      for name, v in params.items()}
    return out


def _object(obj: object, path: str) -> dict[str, object]:
    found = read_opt_object(obj, path)
    if found is None:
        raise RecordFormatError(path, "expected an object, got null")
    return found


@dataclass(frozen=True, slots=True)
class LockedGeneration(JsonRecord):
    """The frozen generation config, retry policy, price table and protocol budget, as locked
    (the lock's ``generation``)."""

    _path = "generation"

    model: NonEmptyStr
    temperature: float
    max_output_tokens: Annotated[int, at_least(1)]
    timeout_s: float
    identical_retries_before_output: Count = field(
        metadata=key("retry.identical_retries_before_output"))
    # what a transport failure that survived its retry does
    on_transport_failure: NonEmptyStr = field(metadata=key("retry.on_transport_failure"))
    price_input_per_mtok: float = field(metadata=key("price.input_per_mtok"))
    price_output_per_mtok: float = field(metadata=key("price.output_per_mtok"))
    max_decisions: Annotated[int, at_least(1)] = field(metadata=key("budget.max_decisions"))
    max_additional_tool_calls: Count = field(metadata=key("budget.max_additional_tool_calls"))
    simulated: SimulatorTables = field(metadata=field_spec(read=_simulator_tables))

    @classmethod
    def from_spec(cls, spec: StudySpec) -> LockedGeneration:
        return cls(
            model=spec.model.name,
            temperature=spec.model.temperature,
            max_output_tokens=spec.model.max_output_tokens,
            timeout_s=spec.model.timeout_s,
            identical_retries_before_output=spec.identical_retries_before_output,
            on_transport_failure=spec.provider.on_transport_failure,
            price_input_per_mtok=spec.price_input_per_mtok,
            price_output_per_mtok=spec.price_output_per_mtok,
            max_decisions=spec.budget.max_decisions,
            max_additional_tool_calls=spec.budget.max_additional_tool_calls,
            simulated=spec.simulated,
        )

def generation_config(spec: StudySpec) -> LockedGeneration:
    """The frozen generation config, retry policy and price table, as locked."""
    return LockedGeneration.from_spec(spec)


@dataclass(frozen=True, slots=True)
class FilePin(JsonRecord):
    """A file the lock pins: its name beside the spec and the sha256 of its bytes."""

    file: NonEmptyStr
    sha256: Digest


@dataclass(frozen=True, slots=True)
class SchedulePin(JsonRecord):
    """The schedule file the lock pins, with its number of rows."""

    file: NonEmptyStr
    sha256: Digest
    rows: Count


@dataclass(frozen=True, slots=True)
class StudyLock(JsonRecord):
    """The study lock (``<spec>.lock.json``, format ``ect.lock/1``) as a typed, frozen record.

    :meth:`to_json` gives the lock document exactly as it is written (its canonical bytes are
    the file's, its digest the header's ``lock_digest``); :meth:`from_json` is strict: every
    field present, nothing extra, each of its type, errors naming the path.
    """

    _path = "lock"
    _format = LOCK_FORMAT

    study: NonEmptyStr
    spec: FilePin
    schedule: SchedulePin
    task_manifest: Digest
    prompts: dict[str, Digest]  # prompt name -> digest of its frozen text
    generation: LockedGeneration
    # every rule that can end a trajectory, as runner.loop.stop_rules_in_force states them
    stop_rules: JsonObject
    sandbox_pins: dict[str, NonEmptyStr]  # pinned sandbox file -> sha256 hex of its bytes
    source_tree: Digest

    def to_bytes(self) -> bytes:
        """The lock file's bytes (canonical JSON and a newline)."""
        return canonical_bytes(self.to_json()) + b"\n"

    @property
    def digest(self) -> str:
        """``ect/lock/v1`` over the lock (the run header's ``lock_digest``)."""
        return digest("ect/lock/v1", self.to_json())

def write_schedule(spec: StudySpec, paths: StudyPaths, *, replace: bool = False) -> list[ScheduleRow]:
    """Build the schedule from the spec and write it; refuse to replace different bytes."""
    rows = build_schedule(spec, closed_loop_refs())
    data = schedule_bytes(rows)
    if paths.schedule.exists() and paths.schedule.read_bytes() != data and not replace:
        raise LockError(f"{paths.schedule} exists with different contents; pass --replace to rebuild it")
    atomic_write(paths.schedule, data)
    return rows


def build_lock(spec: StudySpec, paths: StudyPaths) -> StudyLock:
    """Compute the lock for the files at ``paths`` as they are now."""
    from runner.policies import prompt_digests
    from runner.sandbox import verify_pins
    from runner.worlds import task_manifest_digest

    try:
        schedule_raw = paths.schedule.read_bytes()
    except OSError as e:
        raise LockError(f"cannot read schedule {paths.schedule}: {e.strerror}; run `ect schedule build`") from e
    rows = read_schedule(paths.schedule)
    return StudyLock(
        study=spec.name,
        spec=FilePin(paths.spec.name, spec.digest),
        schedule=SchedulePin(paths.schedule.name, raw_digest(schedule_raw), len(rows)),
        task_manifest=task_manifest_digest(),
        prompts=dict(sorted(prompt_digests().items())),
        generation=generation_config(spec),
        # every rule that can end a trajectory: the protocol's limits, the controls beyond it
        # (all off in the frozen study) and the run's own stop events
        stop_rules=spec.stop_rules_in_force(),
        sandbox_pins=dict(sorted(verify_pins().items())),
        source_tree=source_tree_digest(),
    )


def lock_digest(lock: StudyLock) -> str:
    return lock.digest


def read_lock(path: Path) -> StudyLock:
    """Read and strictly check a lock file.

    Raises:
        LockError: the file is missing, not JSON, or not an ``ect.lock/1`` lock (the message
            names the offending field).
    """
    try:
        doc = load_strict_file(path)
    except OSError as e:
        raise LockError(f"cannot read lock {path}: {e.strerror}; run `ect schedule lock`") from e
    except FormatError as e:
        raise LockError(f"lock {path} is not valid JSON: {e}") from e
    if not isinstance(doc, dict) or doc.get("format") != LOCK_FORMAT:
        raise LockError(f"{path} is not an {LOCK_FORMAT} lock")
    try:
        return StudyLock.from_json(doc)
    except FormatError as e:
        raise LockError(f"{path} is not a well-formed {LOCK_FORMAT} lock: {e}") from e


def write_lock(spec: StudySpec, paths: StudyPaths, *, replace: bool = False) -> StudyLock:
    """Write the lock for the current files. Refuses to change an existing lock unless ``replace``."""
    lock = build_lock(spec, paths)
    data = lock.to_bytes()
    if paths.lock.exists() and paths.lock.read_bytes() != data:
        if not replace:
            old = read_lock(paths.lock)
            drifts = _diff(old, lock)
            what = drifts[0].field if drifts else "contents"
            raise LockError(f"{paths.lock} exists and differs ({what}); pass --replace to rewrite it")
    atomic_write(paths.lock, data)
    return lock


def check_lock(spec_path: str | Path) -> tuple[StudySpec, StudyPaths, StudyLock, list[ScheduleRow]]:
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


def _diff(locked: StudyLock, actual: StudyLock) -> list[Drift]:
    """Every field where two locks differ, by dotted path (``generation.temperature``)."""
    drifts: list[Drift] = []
    _diff_values(locked.to_json(), actual.to_json(), "", drifts)
    return drifts


def _diff_values(a: object, b: object, field: str, out: list[Drift]) -> None:
    # a generic walk over two JSON documents: objects are compared key by key, anything else
    # by value (an absent key reads as None, shown "absent")
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            _diff_values(a.get(key), b.get(key), f"{field}.{key}" if field else str(key), out)
    elif a != b:
        out.append(Drift(field, _short(a), _short(b)))


def _short(value: object) -> str:
    text = "absent" if value is None else str(value)
    return text if len(text) <= 80 else text[:77] + "..."

