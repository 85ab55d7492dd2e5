"""The public surface of runner.worlds is exactly what INTERFACES.md promises (and resolves)."""

from __future__ import annotations

import runner.worlds as worlds

EXPECTED = {
    # worlds and tools
    "ATTRIBUTES",
    "LEVELS",
    "WORLDS_CLOSED_LOOP",
    "WORLDS_STATIC",
    "WORLDS_STATIC_DEV",
    "WORLDS_STATIC_HELDOUT",
    "World",
    "build_world",
    "write_snapshot",
    "world_snapshot",
    "tools",
    "TOOLS_PATH",
    "NoteBook",
    # adapter
    "TraceCall",
    "to_receipts",
    "ledger_from_trace",
    "receipt_id",
    "call_id",
    "execute_calls",
    # tasks and oracles
    "FAMILIES",
    "REQUIRED_SLOTS",
    "Split",
    "Task",
    "TaskSpec",
    "static_tasks",
    "closed_loop_tasks",
    "get_task",
    "oracle_sql",
    "oracle_python",
    "admit",
    "world_database",
    # solver, faults, grid, checkpoints
    "plan_calls",
    "propose_certificate",
    "naive_certificate",
    "in_scope",
    "STATIC_FAULTS",
    "TRUST_BOUNDARY_FAULT",
    "UNSEEN_FAULTS",
    "STATIC_CONDITIONS",
    "CLOSED_LOOP_FAULTS",
    "FAULTS",
    "Fault",
    "Snapshot",
    "TaskCheckpoint",
    "static_grid",
    "closed_loop_checkpoints",
    "fault_assignment",
    "observed_value",
    # manifest and export
    "TASK_MANIFEST_FORMAT",
    "task_manifest",
    "task_manifest_digest",
    "manifest_counts",
    "export_all",
    # errors
    "OracleDisagreement",
    "UnknownTask",
    "UnknownWorld",
    "ExportRefused",
}


def test_exported_members() -> None:
    assert set(worlds.__all__) == EXPECTED
    assert len(worlds.__all__) == len(EXPECTED)  # no duplicates


def test_errors_are_in_the_world_family() -> None:
    from runner.errors import WorldError

    for name in ("OracleDisagreement", "UnknownTask", "UnknownWorld", "ExportRefused"):
        assert issubclass(getattr(worlds, name), WorldError)
