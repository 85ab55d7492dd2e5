"""The study commands at the edges: a full disk, read-only directories, hostile specs, SIGTERM,
interrupts in every phase, a record body altered behind the store's back.

Each case runs the shipped CLI in a child process and asserts one ``ect: ...`` line on stderr
(no traceback, no ``Aborted!``), the documented exit code, and that nothing half-written is
left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.store import Store, verify_store
from runner.study import orphan_attempts
from tests.faults import Result, fill, listing, readonly_view, small_tmpfs
from tests.study.conftest import Reference
from tests.study.support import (
    REPO,
    SMALL_ROWS,
    bodies,
    ect_argv,
    reap,
    start_run,
    subprocess_env,
    wait_for_commits,
)

EXIT_USAGE, EXIT_REFUSED, EXIT_HALTED, EXIT_RUNTIME = 2, 3, 4, 5


def cli(*args: str, timeout: float = 300) -> Result:
    res = subprocess.run(ect_argv(*args), cwd=REPO, env=subprocess_env(), capture_output=True,
                         text=True, timeout=timeout, check=False)
    return Result(res.returncode, res.stdout, res.stderr)


# --- a full disk, a read-only directory --------------------------------------------------


def test_run_on_a_full_disk_is_one_line_and_leaves_no_key(reference: Reference) -> None:
    with small_tmpfs(512) as disk:
        filler = fill(disk)
        store = disk / "v2.db"
        res = cli("run", "--study", str(reference.spec), "--store", str(store), "--limit", "2")
        assert res.code == EXIT_RUNTIME, res.err
        assert "No space left on device" in res.one_line_error()
        # Nothing half-written: no empty key (which used to block every later run), no store.
        left = set(listing(disk))
        assert not left & {"v2.db", "v2.db.key", "v2.db.key.pub", "v2.db.checkpoint"}, left
        assert not [n for n in left if ".tmp-" in n or ".creating-" in n], left
        # Space freed: the same command now runs (nothing left over blocks it).
        filler.unlink()
        res = cli("run", "--study", str(reference.spec), "--store", str(store), "--limit", "2",
                  "--quiet")
        assert res.code == 0, res.err
        assert verify_store(store, full=True).ok


def test_a_disk_filling_mid_run_stops_with_exit_5_and_resumes(reference: Reference) -> None:
    with small_tmpfs(16 * 1024) as disk:
        store = disk / "v2.db"
        proc = start_run("--study", str(reference.spec), "--store", str(store))
        log: list[str] = []
        try:
            assert wait_for_commits(proc, 3, log) == 3, "".join(log[-5:])
            filler = fill(disk)
            proc.wait(timeout=120)
        finally:
            _out, err = reap(proc)
        res = Result(proc.returncode, "", err)
        assert res.code == EXIT_RUNTIME, err
        assert "No space left on device" in res.one_line_error()
        committed = len(bodies(store))
        assert 3 <= committed < SMALL_ROWS
        filler.unlink()
        assert verify_store(store, full=True).ok
        res = cli("resume", "--store", str(store), "--study", str(reference.spec), "--quiet",
                  "--limit", str(committed + 2))
        assert res.code == 0, res.err
        assert len(bodies(store)) == committed + 2
        assert verify_store(store, full=True).ok


def test_run_into_a_read_only_directory_is_a_usage_error(reference: Reference,
                                                         tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    with readonly_view(d) as ro:
        res = cli("run", "--study", str(reference.spec), "--store", str(ro / "v2.db"))
        assert res.code == EXIT_USAGE, res.err
        assert "Read-only file system" in res.one_line_error()
    assert listing(d) == {}


def test_export_on_a_full_disk_and_read_only_directory(reference: Reference,
                                                       tmp_path: Path) -> None:
    before = listing(reference.store.parent)
    with small_tmpfs(64) as disk:
        fill(disk)
        res = cli("export", "--store", str(reference.store), "--out", str(disk / "m.json"))
        assert res.code == EXIT_RUNTIME, res.err
        assert "No space left on device" in res.one_line_error()
        assert set(listing(disk)) == set()  # no temporary manifest left behind
    d = tmp_path / "ro"
    d.mkdir()
    with readonly_view(d) as ro:
        res = cli("export", "--store", str(reference.store), "--out", str(ro / "m.json"))
        assert res.code == EXIT_USAGE, res.err
        res.one_line_error()
    # The directory where a file is expected.
    (tmp_path / "adir").mkdir()
    res = cli("export", "--store", str(reference.store), "--out", str(tmp_path / "adir"))
    assert res.code == EXIT_USAGE, res.err
    res.one_line_error()
    # Export signs a checkpoint before it writes the manifest; the store is otherwise as it was.
    sqlite_side = ("-shm", "-wal")  # SQLite's own, created and removed by any reader
    assert {n for n in listing(reference.store.parent) if not n.endswith(sqlite_side)} == \
        {n for n in before if not n.endswith(sqlite_side)}
    assert verify_store(reference.store, full=True).records == SMALL_ROWS + 1


def test_report_into_full_and_read_only_directories(reference: Reference,
                                                    tmp_path: Path) -> None:
    schedule = reference.spec.with_name("v2.schedule.jsonl")
    with small_tmpfs(64) as disk:
        fill(disk)
        res = cli("report", "--store", str(reference.store), "--schedule", str(schedule),
                  "--out", str(disk / "report"), "--replicates", "50")
        assert res.code == EXIT_RUNTIME, res.err
        assert "No space left on device" in res.one_line_error()
        assert not [n for n in listing(disk) if ".tmp" in n]
    d = tmp_path / "ro"
    d.mkdir()
    with readonly_view(d) as ro:
        res = cli("report", "--store", str(reference.store), "--schedule", str(schedule),
                  "--out", str(ro / "report"), "--replicates", "50")
        assert res.code == EXIT_USAGE, res.err
        res.one_line_error()


def test_report_with_a_junk_schedule_is_a_usage_error(reference: Reference,
                                                      tmp_path: Path) -> None:
    junk = tmp_path / "JUNK"
    junk.write_bytes(b"\x00\xffnot a schedule\n")
    res = cli("report", "--store", str(reference.store), "--schedule", str(junk),
              "--out", str(tmp_path / "out"))
    assert res.code == EXIT_USAGE, res.err
    res.one_line_error()


def test_reports_and_replay_read_a_store_on_read_only_media(reference: Reference,
                                                           tmp_path: Path) -> None:
    d = tmp_path / "archive"
    d.mkdir()
    for suffix in ("", ".checkpoint", ".key.pub"):
        shutil.copy2(str(reference.store) + suffix, d / ("ref.db" + suffix))
    with readonly_view(d) as ro:
        res = cli("store", "verify", "--full", str(ro / "ref.db"))
        assert res.code == 0, (res.out, res.err)
        res = cli("replay", "--store", str(ro / "ref.db"), "--study", str(reference.spec))
        assert res.code == 0, res.err
        schedule = reference.spec.with_name("v2.schedule.jsonl")
        res = cli("report", "--store", str(ro / "ref.db"), "--schedule", str(schedule),
                  "--out", str(tmp_path / "report"), "--replicates", "50")
        assert res.code == 0, res.err


# --- hostile and malformed specs ---------------------------------------------------------


def _hostile_specs(tmp_path: Path) -> dict[str, Path]:
    deep_array = tmp_path / "deep_array.toml"
    deep_array.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    deep_table = tmp_path / "deep_table.toml"
    deep_table.write_text("x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n")
    headers = tmp_path / "deep_headers.toml"
    headers.write_text("[" + ".".join(["a"] * 200) + "]\nb = 1\n")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    return {"deep_array": deep_array, "deep_table": deep_table, "deep_headers": headers,
            "junk": junk, "fifo": fifo, "zero": Path("/dev/zero")}


def _refuse_each(specs: dict[str, Path], argv: Callable[[str, Path], list[str]]) -> dict[str, Result]:
    """``cli(*argv(name, spec))`` for every hostile spec, two children at a time (each is a
    fresh interpreter refusing one spec, independent of the others: the second core would
    otherwise sit idle while the first starts up)."""
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(cli, *argv(name, spec), timeout=60)
                   for name, spec in specs.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("command", [
    ("schedule", "build"), ("schedule", "lock"), ("preflight", "--store", "{store}"),
    ("run", "--store", "{store}"), ("resume", "--store", "{existing}"),
    ("export", "--store", "{existing}", "--out", "{out}"),
    ("replay", "--store", "{existing}"), ("demo", "--out", "{out}"),
])
def test_hostile_specs_are_usage_errors_in_every_command(command: tuple[str, ...],
                                                         reference: Reference,
                                                         tmp_path: Path) -> None:
    specs = _hostile_specs(tmp_path)

    def paths(name: str) -> tuple[Path, Path]:  # each spec's own store and output directory
        return tmp_path / f"{name}-new.db", tmp_path / f"{name}-out"

    def argv(name: str, spec: Path) -> list[str]:
        store, out = paths(name)
        return [*(a.format(store=store, existing=reference.store, out=out) for a in command),
                "--study", str(spec)]

    for name, res in _refuse_each(specs, argv).items():
        assert res.code == EXIT_USAGE, (name, res.out, res.err)
        res.one_line_error()
        store, out = paths(name)
        assert not store.exists() and not out.exists(), name


def test_static_refuses_hostile_specs(tmp_path: Path) -> None:
    results = _refuse_each(_hostile_specs(tmp_path), lambda name, spec: [
        "static", "--spec", str(spec), "--out", str(tmp_path / f"{name}-out")])
    for name, res in results.items():
        assert res.code == EXIT_USAGE, (name, res.err)
        res.one_line_error()


# --- signals and interrupts --------------------------------------------------------------


def _all_attempts_ended(store: Path) -> None:
    with Store.open(store) as s:
        assert orphan_attempts(s) == []
        assert all(a.end is not None for a in s.attempts())


def test_sigterm_halts_at_a_cell_boundary_like_ctrl_c(tmp_path: Path,
                                                      reference: Reference) -> None:
    store = tmp_path / "term.db"
    proc = start_run("--study", str(reference.spec), "--store", str(store), "--json",
                     "--concurrency", "2")
    log: list[str] = []
    try:
        assert wait_for_commits(proc, 3, log) == 3, "".join(log[-5:])
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        out, err = reap(proc)
    assert proc.returncode == EXIT_HALTED, err
    assert "halted at a cell boundary: SIGTERM" in "".join(log) + err
    assert "Traceback" not in err
    summary = json.loads(out)
    assert 3 <= summary["committed"] < SMALL_ROWS
    assert summary["committed"] == len(bodies(store))
    assert verify_store(store, full=True).ok
    _all_attempts_ended(store)


def test_a_second_signal_aborts_with_one_line(tmp_path: Path, reference: Reference) -> None:
    store = tmp_path / "twice.db"
    proc = start_run("--study", str(reference.spec), "--store", str(store), "--concurrency", "2")
    log: list[str] = []
    try:
        assert wait_for_commits(proc, 2, log) == 2
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        _out, err = reap(proc)
    assert proc.returncode == EXIT_HALTED, err
    assert "Traceback" not in err and "ExceptionGroup" not in err and "Aborted!" not in err
    assert [ln for ln in err.splitlines() if ln.startswith("ect: ")], err
    assert verify_store(store, full=True).ok  # a verified prefix, whatever was in flight


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_during_start_up_and_preflight_is_one_line(sig: signal.Signals,
                                                             tmp_path: Path,
                                                             reference: Reference) -> None:
    # start-up (imports, 0.3 s in), then preflight: signalled as soon as the run says its
    # preflight begins, not after a fixed delay (on an idle machine the whole 48-cell run can
    # finish within 1.5 s, and an interrupt after the end is rightly ignored)
    for phase in ("start-up", "preflight"):
        store = tmp_path / f"early-{sig.name}-{phase}.db"
        proc = subprocess.Popen(ect_argv("run", "--study", str(reference.spec), "--store",
                                         str(store)),
                                cwd=REPO, env=subprocess_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        seen: list[str] = []
        try:
            if phase == "start-up":
                time.sleep(0.3)
            else:
                assert proc.stderr is not None
                for line in proc.stderr:
                    seen.append(line)
                    if line.startswith("preflight: "):
                        break
            proc.send_signal(sig)
            proc.wait(timeout=120)
        finally:
            out, err = reap(proc)
        err = "".join(seen) + err
        res = Result(proc.returncode, out, err)
        assert res.code == EXIT_HALTED, (phase, err)
        res.one_line_error()
        if store.exists():  # the signal landed after cells started: a verified prefix
            assert verify_store(store, full=True).ok


# --- a record body altered behind the store's back ---------------------------------------


def test_non_utf8_record_body_names_the_record(reference: Reference, tmp_path: Path) -> None:
    copy = tmp_path / "bad.db"
    for suffix in ("", ".checkpoint", ".key", ".key.pub"):
        shutil.copy2(str(reference.store) + suffix, str(copy) + suffix)
    conn = sqlite3.connect(copy, isolation_level=None)
    trigger = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'records_no_update'").fetchone()[0]
    conn.execute("DROP TRIGGER records_no_update")
    body = conn.execute("SELECT body FROM records WHERE seq = 7").fetchone()[0]
    conn.execute("UPDATE records SET body = ? WHERE seq = 7", (body[:40] + b"\xff" + body[41:],))
    conn.execute(trigger)
    conn.close()
    for args in (("store", "show", str(copy)), ("store", "show", str(copy), "--seq", "7"),
                 ("resume", "--store", str(copy), "--study", str(reference.spec))):
        res = cli(*args)
        assert res.code == EXIT_REFUSED, (args, res.err)
        line = res.one_line_error()
        assert "DAMAGED (tamper) at seq 7" in line, line
        assert "UTF-8" not in line.split("DAMAGED (tamper) at seq")[0], line
