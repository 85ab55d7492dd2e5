"""The study: spec, canonical schedule, lock, preflight and execution (DESIGN §8).

``ect schedule build|lock``, ``ect preflight``, ``ect run``, ``ect resume``, ``ect export`` and
``ect replay`` are thin layers over this package.
"""

from runner.study._execute import (
    Halted,
    RunSettings,
    RunSummary,
    StoreInUse,
    StoreNotEmpty,
    cell_result_digest,
    deterministic_result,
    execute,
    run_lock_path,
    stop_file,
)
from runner.study._executor import EXECUTORS, LocalExecutor, ToolExecutor
from runner.study._export import IncompleteStore, export_study, key_path_for
from runner.study._lock import (
    LOCK_FORMAT,
    Drift,
    LockError,
    LockMismatch,
    StudyPaths,
    build_lock,
    check_lock,
    generation_config,
    lock_digest,
    read_lock,
    source_tree_digest,
    study_paths,
    write_lock,
    write_schedule,
)
from runner.study._preflight import (
    PREFLIGHT_FORMAT,
    Check,
    PreflightFailed,
    PreflightReport,
    ProviderChoice,
    run_preflight,
)
from runner.study._ray import ClusterUnreachable, NoUsableNode, RayExecutor
from runner.study._replay import ReplayDiverged, ReplayRefused, ReplayReport, replay_store
from runner.study._schedule import (
    CheckpointRef,
    ScheduleError,
    build_schedule,
    cell_seed,
    read_schedule,
    row_digest,
    schedule_bytes,
)
from runner.study._spec import SpecError, StudySpec, file_sha256, load_spec

__all__ = [
    "EXECUTORS",
    "LOCK_FORMAT",
    "PREFLIGHT_FORMAT",
    "Check",
    "CheckpointRef",
    "ClusterUnreachable",
    "Drift",
    "Halted",
    "IncompleteStore",
    "LocalExecutor",
    "LockError",
    "LockMismatch",
    "NoUsableNode",
    "PreflightFailed",
    "PreflightReport",
    "ProviderChoice",
    "RayExecutor",
    "ReplayDiverged",
    "ReplayRefused",
    "ReplayReport",
    "RunSettings",
    "RunSummary",
    "ScheduleError",
    "SpecError",
    "StoreInUse",
    "StoreNotEmpty",
    "StudyPaths",
    "StudySpec",
    "ToolExecutor",
    "build_lock",
    "build_schedule",
    "cell_result_digest",
    "cell_seed",
    "check_lock",
    "deterministic_result",
    "execute",
    "export_study",
    "file_sha256",
    "generation_config",
    "key_path_for",
    "load_spec",
    "lock_digest",
    "read_lock",
    "read_schedule",
    "replay_store",
    "row_digest",
    "run_lock_path",
    "run_preflight",
    "schedule_bytes",
    "source_tree_digest",
    "stop_file",
    "study_paths",
    "write_lock",
    "write_schedule",
]
