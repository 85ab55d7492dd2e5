"""Kill switches: a STOP file beside the store, the cost and call ceilings and Ctrl-C each halt
at a cell boundary (exit code 4 from the CLI) and leave a store that resumes to the digests of
an uninterrupted run."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from runner.errors import StudyError
from runner.store import Store, verify_store
from runner.study import Halted, RunSettings, execute, orphan_attempts, stop_file
from tests.study.conftest import Reference
from tests.study.support import (
    SMALL_ROWS,
    bodies,
    ect,
    reap,
    result_digests,
    run,
    start_run,
    wait_for_commits,
)

EXIT_HALTED = 4


def _assert_resumable_prefix(store: Path, reference: Reference, *, more: int = 3) -> int:
    """The store is a verified canonical prefix of the reference, every cell that started was
    committed (a halt at a cell boundary leaves no orphaned provider attempt), and it resumes
    to the reference's digests."""
    assert verify_store(store, full=True).ok
    with Store.open(store) as s:
        assert orphan_attempts(s) == []
    committed = len(bodies(store))
    got = result_digests(store)
    assert list(got) == list(reference.digests)[:committed]
    end = min(SMALL_ROWS, committed + more)
    summary = run(reference.spec, store, resume=True, limit=end)
    assert summary.committed == end and summary.halted is None
    got = result_digests(store)
    assert list(got) == list(reference.digests)[:end]
    assert all(reference.digests[c] == d for c, d in got.items())
    return committed


def test_stop_file_halts_mid_run_at_a_cell_boundary(tmp_path: Path, reference: Reference) -> None:
    store = tmp_path / "runs" / "stop.db"
    store.parent.mkdir()
    stop = stop_file(store)
    assert stop == store.parent / "STOP"

    def on_cell(body: dict[str, Any], summary: Any) -> None:
        if summary.committed == 3:
            stop.touch()

    with pytest.raises(Halted) as halted:
        run(reference.spec, store, concurrency=2, on_cell=on_cell)
    summary = halted.value.summary
    assert "STOP file" in halted.value.reason and summary.halted == halted.value.reason
    assert f"ect resume --store {store}" in str(halted.value)
    # The cells already started finish and commit (no orphaned attempts); nothing new starts.
    assert 3 <= summary.committed < SMALL_ROWS
    assert len(bodies(store)) == summary.committed
    # While the file is there, resume halts again before starting a cell.
    with pytest.raises(Halted):
        run(reference.spec, store, resume=True)
    assert len(bodies(store)) == summary.committed
    stop.unlink()
    _assert_resumable_prefix(store, reference)


def test_stop_file_cli_exit_code(tmp_path: Path, reference: Reference) -> None:
    store = tmp_path / "stop.db"
    stop_file(store).touch()
    done = ect("run", "--study", str(reference.spec), "--store", str(store), "--json")
    assert done.returncode == EXIT_HALTED, done.stderr
    # a STOP file there from the start is named before any preflight, with how to remove it
    # (issue 39); nothing is run and no store is made
    assert done.stderr.startswith(f"ect: {stop_file(store)} exists: ")
    assert f"remove it (rm {stop_file(store)})" in done.stderr and "preflight" not in done.stderr
    assert done.stdout == "" and not store.exists()
    stop_file(store).unlink()
    again = ect("run", "--study", str(reference.spec), "--store", str(store), "--json",
                "--limit", "2")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["committed"] == 2
    _assert_resumable_prefix(store, reference)


def test_cost_ceiling_halts_with_exit_code_4(tmp_path: Path, reference: Reference) -> None:
    store = tmp_path / "cost.db"
    ceiling = 0.01
    done = ect("run", "--study", str(reference.spec), "--store", str(store),
               "--max-cost-usd", str(ceiling), "--concurrency", "1", "--json")
    assert done.returncode == EXIT_HALTED, done.stderr
    assert "cost ceiling $0.01 reached" in done.stderr
    summary = json.loads(done.stdout)
    assert summary["halted"].startswith("cost ceiling") and 0 < summary["committed"] < SMALL_ROWS
    spent = [b["result"]["outcome"]["cost_usd"] for b in bodies(store)]
    # Halted at the first boundary where the committed spend reached the ceiling.
    assert sum(spent) >= ceiling > sum(spent[:-1])
    _assert_resumable_prefix(store, reference)


def test_call_ceiling_halts_with_exit_code_4(tmp_path: Path, reference: Reference) -> None:
    store = tmp_path / "calls.db"
    done = ect("run", "--study", str(reference.spec), "--store", str(store),
               "--max-calls", "10", "--concurrency", "1", "--json")
    assert done.returncode == EXIT_HALTED, done.stderr
    assert "call ceiling 10 reached" in done.stderr
    summary = json.loads(done.stdout)
    assert 0 < summary["committed"] < SMALL_ROWS and summary["provider_attempts"] >= 10
    per_cell = [sum(len(c["attempts"]) for c in b["audit"]["calls"]) for b in bodies(store)]
    # Concurrency 1: the ceiling was reached by the last committed cell, not before it started.
    assert sum(per_cell) == summary["provider_attempts"] >= 10 > sum(per_cell[:-1])
    _assert_resumable_prefix(store, reference)


def test_ctrl_c_halts_at_a_cell_boundary_with_exit_code_4(tmp_path: Path,
                                                         reference: Reference) -> None:
    store = tmp_path / "sigint.db"
    proc = start_run("--study", str(reference.spec), "--store", str(store), "--json")
    log: list[str] = []
    try:
        assert wait_for_commits(proc, 3, log) == 3, "".join(log[-5:])
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        out, err = reap(proc)
    assert proc.returncode == EXIT_HALTED, err
    err = "".join(log) + err
    assert "halted at a cell boundary: Ctrl-C" in err
    summary = json.loads(out)
    assert 3 <= summary["committed"] < SMALL_ROWS
    assert summary["committed"] == len(bodies(store))
    _assert_resumable_prefix(store, reference)


@pytest.mark.parametrize(("ceiling", "message"), [
    ({"max_cost_usd": -1.0}, "invalid run ceiling: max_cost_usd must be >= 0"),
    ({"max_calls": -3}, "invalid run ceiling: max_calls must be >= 0"),
])
def test_a_negative_ceiling_is_refused_before_anything_runs(
        tmp_path: Path, reference: Reference, ceiling: dict[str, Any], message: str) -> None:
    # The study's ceilings are runner.control's KillSwitch, with its validation: a negative
    # ceiling from Python is refused, not taken as "halt before the first cell".
    store = tmp_path / "neg.db"
    with pytest.raises(StudyError) as refused:
        execute(RunSettings(reference.spec, store, **ceiling))
    assert str(refused.value) == message
    assert not store.exists()
