"""End to end through the shipped CLI (every sandbox probe), a real bwrap sandbox and a real store.

One run of the small study: every row committed in canonical order, the store verifies in full,
export writes a manifest the store package accepts, and replay reproduces every cell. The CLI run
(concurrency 2, all probes) gives the same per-cell result digests as the in-process reference
run (concurrency 1, mandatory probes): the probe set and the concurrency change nothing a result
digest covers.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from runner.canonical import digest, load_strict_file
from runner.cli._app import cli
from runner.loop import Outcome
from runner.sandbox import load_probes
from runner.store import verify_store
from runner.study import (
    CellRecord,
    ReplayRefused,
    read_schedule,
    replay_store,
    study_paths,
    verify_export,
)
from tests.sizes import STUDY_CELLS
from tests.study.conftest import Reference
from tests.study.support import SMALL_ROWS, bodies, ect, make_study, tampered_copy


def test_cli_run_export_replay_end_to_end(tmp_path: Path, reference: Reference) -> None:
    spec = make_study(tmp_path / "study")
    store = tmp_path / "runs" / "v2.db"
    store.parent.mkdir()

    done = ect("run", "--study", str(spec), "--store", str(store), "--concurrency", "2",
               "--json", all_probes=True)
    assert done.returncode == 0, done.stderr
    # `ect run` ran the whole preflight first: the five checks and every probe in preflight/.
    assert f"preflight passed ({5 + len(load_probes())} checks)" in done.stderr
    # Without a terminal the progress bar is a periodic line; the last one is always printed.
    assert f"cells {SMALL_ROWS}/{SMALL_ROWS}  " in done.stderr and "(simulated)" in done.stderr
    summary = json.loads(done.stdout)
    assert summary["committed"] == summary["total"] == SMALL_ROWS
    assert summary["halted"] is None and summary["provider"] == "simulated"
    assert summary["tool_calls"] > 0, "no tool call went through the sandbox"
    assert sum(summary["stop_reasons"].values()) == SMALL_ROWS

    # Every row, in canonical order, with its schedule row and consistent digests.
    rows = read_schedule(study_paths(spec).schedule)
    recorded = bodies(store)
    assert [b["row"] for b in recorded] == list(range(1, SMALL_ROWS + 1))
    for want, body in zip(rows, recorded, strict=True):
        assert body["schedule_row"] == want.to_json() and body["cell_id"] == want.cell_id
        assert body["schedule_row_digest"] == digest("ect/schedule-row/v1", want.to_json())
        # The typed record reads back to exactly the body committed (so its digests are the
        # recorded ones), and it checks them itself.
        record = CellRecord.from_json(body)
        assert record.to_json() == body and record.mismatch(want) is None
        assert body["result_digest"] == record.result.digest()
        assert body["audit_digest"] == digest("ect/record/v1", body["audit"])
        assert record.result.outcome.policy == want.policy
        assert body["result"]["simulated"] is True
        assert set(body) == {"row", "cell_id", "schedule_row", "schedule_row_digest", "result",
                             "result_digest", "audit", "audit_digest", "artifacts",
                             "code_version"}

    # Same lock, other concurrency and probe set: identical per-cell result digests.
    assert {b["cell_id"]: b["result_digest"] for b in recorded} == reference.digests

    full = ect("store", "verify", "--full", str(store))
    assert full.returncode == 0, full.stdout + full.stderr
    assert verify_store(store, full=True).ok

    manifest = tmp_path / "manifest.json"
    exported = ect("export", "--store", str(store), "--out", str(manifest))
    assert exported.returncode == 0, exported.stderr
    verify_export(manifest, store)
    doc = load_strict_file(manifest)
    cells = doc["manifest"]["cells"]
    assert cells == [{"row": b["row"], "cell_id": b["cell_id"],
                      "result_digest": b["result_digest"]} for b in recorded]

    replayed = ect("replay", "--store", str(store), "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout) == {"cells": SMALL_ROWS, "reproduced": SMALL_ROWS,
                                           "mismatches": []}


def test_replay_rescores_with_the_current_code(reference: Reference,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay re-runs and re-scores each cell (it does not just re-read stored digests): with the
    scoring changed, every cell is reported as differing, naming the row."""
    import runner.study._cell as cell_module

    real = vars(cell_module)["score"]

    def skewed(trajectory: Any, row: Any) -> Outcome:
        outcome: Outcome = real(trajectory, row)
        return dataclasses.replace(outcome, turns=outcome.turns + 1)

    monkeypatch.setattr(cell_module, "score", skewed)
    report = replay_store(reference.store, reference.spec)
    assert report.cells == SMALL_ROWS and report.reproduced == 0
    assert [m.row for m in report.mismatches] == list(range(1, SMALL_ROWS + 1))
    assert all("result digest" in m.detail for m in report.mismatches)


def test_replay_refuses_a_store_that_does_not_verify(reference: Reference,
                                                      tmp_path: Path) -> None:
    """A record rewritten behind the store's back is not "reproduced": replay verifies the
    store in full first and refuses (exit 3), naming the first bad record."""
    store = tampered_copy(reference.store, tmp_path / "tampered.db", 5)
    with pytest.raises(ReplayRefused, match=r"DAMAGED \(tamper\) at seq 5"):
        replay_store(store, reference.spec)
    result = CliRunner().invoke(cli, ["replay", "--store", str(store), "--study",
                                      str(reference.spec)])
    assert result.exit_code == 3
    assert result.stderr.splitlines()[-1].startswith(
        f"ect: {store} does not verify: DAMAGED (tamper) at seq 5")


@pytest.mark.slow
def test_demo_runs_the_whole_offline_study(tmp_path: Path) -> None:
    """The README's main command: all 576 cells, verified store, signed manifest, reports.
    About two minutes on two cores; run with `pytest -m slow tests/study`."""
    # The full V2 design, locked here (the committed lock goes stale with any source change).
    spec = make_study(tmp_path / "study", worlds=("w10", "w11", "w12", "w13"), seeds=3)
    out = tmp_path / "demo"
    done = ect("demo", "--out", str(out), "--study", str(spec), "--quiet", all_probes=True,
               timeout=1800)
    assert done.returncode == 0, done.stderr
    store, manifest = out / "v2.db", out / "manifest.json"
    assert f"manifest: {manifest}" in " ".join(done.stdout.split())
    assert "simulated provider" in done.stdout
    assert len(bodies(store)) == STUDY_CELLS and verify_store(store, full=True).ok
    verify_export(manifest, store)
    assert (out / "report" / "report.html").is_file()
