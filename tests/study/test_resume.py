"""Interrupted runs and concurrency: same lock => same per-cell result digests."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from runner.canonical import load_strict_file
from runner.store import Store, verify_store
from runner.study import (
    RunSettings,
    StoreInUse,
    StoreNotEmpty,
    execute,
    export_study,
    orphan_attempts,
    replay_store,
    verify_export,
)
from tests.study.conftest import Reference
from tests.study.support import (
    SMALL_ROWS,
    bodies,
    ect,
    orphaned_cells,
    preflight,
    reap,
    result_digests,
    run,
    start_run,
    wait_for_commits,
)


def test_kill9_mid_run_then_resume_gives_the_uninterrupted_digests(
        tmp_path: Path, reference: Reference) -> None:
    store = tmp_path / "killed.db"
    proc = start_run("--study", str(reference.spec), "--store", str(store), "--concurrency", "4")
    log: list[str] = []
    try:
        assert wait_for_commits(proc, 5, log) == 5, "".join(log[-5:])
        # Kill while some cell has journaled provider attempts but is not committed yet.
        for _ in range(2000):
            if orphaned_cells(store):
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        reap(proc)
    assert proc.returncode == -signal.SIGKILL

    assert verify_store(store, full=True).ok, "a kill -9 must leave a verified prefix"
    with Store.open(store) as s:
        committed = s.count - 1
        orphans = orphan_attempts(s)
    assert 5 <= committed < SMALL_ROWS
    prefix = bodies(store)
    assert [b["row"] for b in prefix] == list(range(1, committed + 1))
    assert all(reference.digests[b["cell_id"]] == b["result_digest"] for b in prefix)

    # `run` on a store with cells refuses and points at resume.
    with pytest.raises(StoreNotEmpty, match="ect resume"):
        execute(RunSettings(reference.spec, store), preflight=preflight(reference.spec, store))

    resumed = ect("resume", "--store", str(store), "--study", str(reference.spec), "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["committed"] == SMALL_ROWS
    assert summary["committed_now"] == SMALL_ROWS - committed
    assert summary["orphan_attempts"] == len(orphans)
    if orphans:
        cells = {a.cell_id for a in orphans}
        assert (f"{len(orphans)} provider attempt(s) were made for {len(cells)} cell(s) that "
                f"never committed (first: {min(cells)})") in resumed.stderr
    assert len(orphans) > 0, "the kill came between cells: no orphaned attempt to report"

    assert result_digests(store) == reference.digests
    assert verify_store(store, full=True).ok
    # The resumed store exports like an uninterrupted one and replays cell by cell.
    manifest = tmp_path / "manifest.json"
    export_study(store, manifest, reference.spec)
    verify_export(manifest, store)
    assert [c["result_digest"] for c in load_strict_file(manifest)["manifest"]["cells"]] == \
        list(reference.digests.values())
    replayed = replay_store(store, reference.spec)
    assert replayed.reproduced == SMALL_ROWS and not replayed.mismatches


def test_concurrency_4_gives_the_digests_of_concurrency_1(tmp_path: Path,
                                                           reference: Reference) -> None:
    store = tmp_path / "c4.db"
    summary = run(reference.spec, store, concurrency=4)
    assert summary.committed == SMALL_ROWS
    recorded = bodies(store)
    assert [b["row"] for b in recorded] == list(range(1, SMALL_ROWS + 1))
    assert {b["cell_id"]: b["result_digest"] for b in recorded} == reference.digests


def test_resume_with_a_limit_then_to_the_end(tmp_path: Path, reference: Reference) -> None:
    """--limit runs a canonical prefix; resume continues it; nothing runs twice."""
    store = tmp_path / "limited.db"
    first = run(reference.spec, store, limit=5)
    assert first.committed == first.committed_now == 5
    again = run(reference.spec, store, resume=True, limit=5)
    assert again.committed == 5 and again.committed_now == 0
    rest = run(reference.spec, store, resume=True, concurrency=2, limit=11)
    assert rest.committed == 11 and rest.committed_now == 6
    got = result_digests(store)
    assert list(got) == list(reference.digests)[:11]
    assert all(reference.digests[c] == d for c, d in got.items())


def test_a_second_writer_is_refused_while_a_run_holds_the_store(tmp_path: Path,
                                                                 reference: Reference) -> None:
    """Two runners on one store would each commit "the next row"; the second is refused
    (exit 3) while the first holds the store, and the first finishes undisturbed."""
    store = tmp_path / "busy.db"
    proc = start_run("--study", str(reference.spec), "--store", str(store))
    log: list[str] = []
    try:
        assert wait_for_commits(proc, 2, log) == 2, "".join(log[-5:])
        os.kill(proc.pid, signal.SIGSTOP)  # frozen mid-run, still holding the store
        try:
            with pytest.raises(StoreInUse, match=f"another run is writing to {store}"):
                run(reference.spec, store, resume=True)
            second = ect("resume", "--store", str(store), "--study", str(reference.spec))
            assert second.returncode == 3, second.stderr
            assert f"ect: another run is writing to {store}" in second.stderr
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        proc.wait(timeout=300)
    finally:
        reap(proc)
    assert proc.returncode == 0
    assert result_digests(store) == reference.digests
    # The lock dies with its holder: a resume now starts (and has nothing left to do).
    assert run(reference.spec, store, resume=True).committed_now == 0
