"""``ect tasks``: manifest counts, show, list, export round trip through ``ect verify``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from runner.cli._app import cli
from runner.worlds import task_manifest_digest
from tests.sizes import STATIC_SNAPSHOTS


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_manifest_json_prints_real_counts_and_digest() -> None:
    code, out, _ = _run("tasks", "manifest", "--json")
    assert code == 0
    assert json.loads(out) == {
        "static": {"tasks": 48, "snapshots": STATIC_SNAPSHOTS, "heldout_fault_snapshots": 288},
        "closed_loop": {"tasks": 24, "checkpoints": 48},
        "digest": task_manifest_digest(),
    }
    code, out, _ = _run("tasks", "manifest")
    assert code == 0 and f"{STATIC_SNAPSHOTS} snapshots" in out and task_manifest_digest() in out


def test_show_prints_task_contract_gold_and_checkpoints() -> None:
    code, out, _ = _run("tasks", "show", "w11-aggregation-0")
    assert code == 0
    for text in (
        "family    aggregation",
        "total: sum",
        "days: count",
        "gold",
        "checkpoints",
        "w11-aggregation-0/clean",
        "w11-aggregation-0/incomplete: fault U2",
        "recover:",
    ):
        assert text in out, text
    code, out, _ = _run("tasks", "show", "w02-hierarchy_join-0")
    assert code == 0 and "grouped_sum_top_k" in out and "w02-hierarchy_join-0/F8" in out


def test_show_unknown_task_is_a_one_line_usage_error() -> None:
    code, out, err = _run("tasks", "show", "w99-nope-0")
    assert code == 2 and out == ""
    assert err.startswith("ect: unknown task") and err.count("\n") == 1


def test_list_names_all_72_tasks() -> None:
    code, out, _ = _run("tasks", "list")
    assert code == 0 and len(out.splitlines()) == 72


def test_export_then_verify_by_hand(tmp_path: Path) -> None:
    target = tmp_path / "bench"
    code, out, _ = _run("tasks", "export", str(target))
    assert code == 0 and f"{STATIC_SNAPSHOTS} snapshots" in out
    assert len(list((target / "static").glob("*/*/certificate.json"))) == STATIC_SNAPSHOTS
    assert len(list((target / "closed_loop").glob("*/*/certificate.json"))) == 48
    assert len(list((target / "worlds").glob("*.json"))) == 12
    for rel, expected in (
        ("static/w03-top_k-0/C0", 0),
        ("static/w03-top_k-0/F4", 1),
        ("static/w06-missing_data-0/C0", 0),
        ("closed_loop/w10-lookup-0/clean", 0),
        ("closed_loop/w10-lookup-0/incomplete", 1),
    ):
        d = target / rel
        code, out, _ = _run(
            "verify",
            "--contract",
            str(d / "contract.json"),
            "--ledger",
            str(d / "ledger.json"),
            "--certificate",
            str(d / "certificate.json"),
        )
        assert code == expected, (rel, out)
    meta = json.loads((target / "static/w03-top_k-0/F8/snapshot.json").read_text())
    assert meta["gold_decision"] == "continue" and meta["repeated_call"] is True
    # Nothing is overwritten.
    code, _, err = _run("tasks", "export", str(target))
    assert code == 2 and "not empty" in err


def test_help_texts() -> None:
    for sub in ("manifest", "show", "export", "list"):
        code, out, _ = _run("tasks", sub, "--help")
        assert code == 0 and "Usage" in out
