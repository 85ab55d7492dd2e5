"""``--json`` on the commands that print results (issue 29): one JSON document on stdout, the
same facts the text prints, progress (if any) on stderr."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import runner.study
from runner.cli._app import cli
from tests.study.conftest import Reference


def _json(*args: str) -> Any:
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_tasks_list_and_show() -> None:
    tasks = _json("tasks", "list", "--json")
    assert {"task_id": "w10-lookup-0", "split": "closed_loop", "family": "lookup",
            "world_id": "w10"} in tasks
    shown = _json("tasks", "show", "w10-lookup-0", "--json")
    assert shown["task_id"] == "w10-lookup-0" and shown["contract"]["format"] == "ect.contract/1"
    assert [c["checkpoint_id"] for c in shown["checkpoints"]] == [
        "w10-lookup-0/clean", "w10-lookup-0/incomplete"]
    assert shown["plan"] and set(shown["gold"]) == set(shown["contract"]["slots"])


def test_evals_run() -> None:
    report = _json("evals", "run", "--json")
    assert report["ok"] is True and report["failed"] == 0
    assert report["passed"] == len(report["cases"]) > 0
    assert all(c["passed"] and c["observed"] == c["expected"] for c in report["cases"])


def test_export_and_report(reference: Reference, tmp_path: Path) -> None:
    store = tmp_path / "ref.db"
    for suffix in ("", ".checkpoint", ".key", ".key.pub"):
        shutil.copy2(str(reference.store) + suffix, str(store) + suffix)  # key stays 0600
    out = tmp_path / "m.json"
    exported = _json("export", "--store", str(store), "--out", str(out), "--study",
                     str(reference.spec), "--json")
    manifest = json.loads(out.read_text("utf-8"))["manifest"]
    assert exported == {"out": str(out), "cells": len(manifest["cells"]),
                        "audit_groups": len(manifest["audit_groups"]),
                        "merkle_root": manifest["merkle_root"], "signed": True}
    res = _json("report", "--store", str(store), "--out", str(tmp_path / "report"),
                "--schedule", str(reference.spec.with_name("v2.schedule.jsonl")),
                "--replicates", "200", "--json")
    assert res == json.loads((tmp_path / "report" / "results.json").read_text("utf-8"))
    assert {"h2", "h3", "h4"} <= set(res)


def test_demo_smoke_run(reference: Reference, tmp_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    real = runner.study.run_preflight  # the network and write denials only: the probes' cost
    monkeypatch.setattr(runner.study, "run_preflight",
                        lambda *a, **k: real(*a, **{**k, "probes": "mandatory"}))
    out = tmp_path / "demo"
    doc = _json("demo", "--study", str(reference.spec), "--out", str(out), "--limit", "2", "-q",
                "--json")
    assert doc == {"committed": 2, "total": 48, "simulated": True, "gates": {},
                   "outputs": {"store": str(out / "v2.db"),
                               "public key": str(out / "v2.db.key.pub")}}
