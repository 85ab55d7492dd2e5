"""Synthetic worlds, tools, six task families, dual oracles, faults and checkpoints (docs/protocol.md).

The benchmark half of the ECT study: every gold answer comes from two independent oracles
(SQL over SQLite, pure Python), never from a model; every fault is a controlled intervention on
a clean admitted task. ``runner/worlds/tools.py`` is stdlib-only: the sandbox worker loads it by
path. docs/protocol.md describes the protocol these objects implement.
"""

from runner.worlds import tools
from runner.worlds._adapter import (
    TOOLS_PATH,
    TraceCall,
    call_id,
    ledger_from_trace,
    receipt_id,
    to_receipts,
)
from runner.worlds._errors import ExportRefused, OracleDisagreement, UnknownTask, UnknownWorld
from runner.worlds._export import export_all
from runner.worlds._families import (
    FAMILIES,
    REQUIRED_SLOTS,
    TaskSpec,
    admit,
    oracle_python,
    oracle_sql,
    world_database,
)
from runner.worlds._faults import (
    CLOSED_LOOP_FAULTS,
    FAULTS,
    STATIC_CONDITIONS,
    STATIC_FAULTS,
    TRUST_BOUNDARY_FAULT,
    UNSEEN_FAULTS,
    Fault,
)
from runner.worlds._grid import (
    Snapshot,
    TaskCheckpoint,
    closed_loop_checkpoints,
    fault_assignment,
    naive_certificate,
    observed_value,
    static_grid,
)
from runner.worlds._manifest import (
    TASK_MANIFEST_FORMAT,
    manifest_counts,
    task_manifest,
    task_manifest_digest,
)
from runner.worlds._notes import NoteBook
from runner.worlds._solver import in_scope, plan_calls, propose_certificate
from runner.worlds._tasks import (
    Split,
    Task,
    closed_loop_tasks,
    execute_calls,
    get_task,
    static_tasks,
    world_snapshot,
)
from runner.worlds._world import (
    ATTRIBUTES,
    LEVELS,
    WORLDS_CLOSED_LOOP,
    WORLDS_STATIC,
    WORLDS_STATIC_DEV,
    WORLDS_STATIC_HELDOUT,
    World,
    build_world,
    write_snapshot,
)

__all__ = [
    "ATTRIBUTES",
    "CLOSED_LOOP_FAULTS",
    "FAMILIES",
    "FAULTS",
    "LEVELS",
    "REQUIRED_SLOTS",
    "STATIC_CONDITIONS",
    "STATIC_FAULTS",
    "TASK_MANIFEST_FORMAT",
    "TOOLS_PATH",
    "TRUST_BOUNDARY_FAULT",
    "UNSEEN_FAULTS",
    "WORLDS_CLOSED_LOOP",
    "WORLDS_STATIC",
    "WORLDS_STATIC_DEV",
    "WORLDS_STATIC_HELDOUT",
    "ExportRefused",
    "Fault",
    "NoteBook",
    "OracleDisagreement",
    "Snapshot",
    "Split",
    "Task",
    "TaskCheckpoint",
    "TaskSpec",
    "TraceCall",
    "UnknownTask",
    "UnknownWorld",
    "World",
    "admit",
    "build_world",
    "call_id",
    "closed_loop_checkpoints",
    "closed_loop_tasks",
    "execute_calls",
    "export_all",
    "fault_assignment",
    "get_task",
    "in_scope",
    "ledger_from_trace",
    "manifest_counts",
    "naive_certificate",
    "observed_value",
    "oracle_python",
    "oracle_sql",
    "plan_calls",
    "propose_certificate",
    "receipt_id",
    "static_grid",
    "static_tasks",
    "task_manifest",
    "task_manifest_digest",
    "to_receipts",
    "tools",
    "world_database",
    "world_snapshot",
    "write_snapshot",
]
