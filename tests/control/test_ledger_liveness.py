"""Liveness of an idempotency claim's owner, judged in this process against real processes: a
live one, a zombie (killed, not reaped), a reaped one, a reused pid; ``resolve`` refusing a
live owner's claim; what a result that cannot be stored records; a spend that is refused."""

from __future__ import annotations

import math
import os
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import runner.control._ledger as ledger_module
from runner.control import IdempotencyLedger, KillSwitch, LedgerError, ToolResult
from runner.control._ledger import _alive, _boot_id, _proc_state, not_storable, process_identity

HOST = socket.gethostname()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "120"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _zombie(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)  # killed; its parent (this test) has not reaped it
    end = time.monotonic() + 60
    while _stat_fields(proc.pid)[0] != "Z":  # read directly: _PROC may be patched away
        assert time.monotonic() < end, "the child never became a zombie"
        time.sleep(0.01)


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def _asleep(pid: int) -> list[str]:
    """The fields once the process sleeps: a child just started is still running (R) for a moment,
    so a state read twice could differ (CI once read R then S)."""
    end = time.monotonic() + 60
    while (fields := _stat_fields(pid))[0] != "S":
        assert time.monotonic() < end, "the child never went to sleep"
        time.sleep(0.01)
    return fields


def test_the_process_state_and_start_time_are_read_from_proc(
        sleeper: subprocess.Popen[bytes]) -> None:
    fields = _asleep(sleeper.pid)
    assert _proc_state(sleeper.pid) == (fields[0], fields[19])
    assert _boot_id() == Path("/proc/sys/kernel/random/boot_id").read_text().strip() != ""
    assert process_identity(sleeper.pid) == f"{_boot_id()}:{fields[19]}"
    assert process_identity(os.getpid()) != process_identity(sleeper.pid)  # started later


def test_a_command_name_with_parentheses_and_spaces_is_read_past(tmp_path: Path) -> None:
    odd = tmp_path / "s) 1 2 3"  # the command name is "s) 1 2 3": fields follow the last ")"
    odd.symlink_to("/bin/sleep")
    proc = subprocess.Popen([str(odd), "120"])
    try:
        fields = _asleep(proc.pid)
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "s) 1 2 3"
        assert _proc_state(proc.pid) == (fields[0], fields[19]) and fields[0] in "RS"
    finally:
        proc.kill()
        proc.wait()


def test_a_live_owner_is_alive_and_a_zombie_or_reaped_one_is_not(
        sleeper: subprocess.Popen[bytes]) -> None:
    ident = process_identity(sleeper.pid)
    assert _alive(HOST, sleeper.pid) and _alive(HOST, sleeper.pid, ident)
    assert not _alive(HOST, sleeper.pid, ident + "0")  # the pid was reused by another process
    _zombie(sleeper)
    assert not _alive(HOST, sleeper.pid, ident) and not _alive(HOST, sleeper.pid)
    sleeper.wait()  # reaped: no such process
    assert _proc_state(sleeper.pid) is None and process_identity(sleeper.pid) == ""
    assert not _alive(HOST, sleeper.pid)
    assert _alive("another-host", sleeper.pid)  # only its lease tells


def test_without_proc_only_the_pid_is_checked(sleeper: subprocess.Popen[bytes], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "_PROC", tmp_path / "no-proc")
    assert _boot_id() == "" and process_identity(sleeper.pid) == ""
    assert _alive(HOST, sleeper.pid, "any:identity")
    with pytest.raises(subprocess.TimeoutExpired):  # asking sent signal 0, nothing that ends it
        sleeper.wait(timeout=0.5)
    _zombie(sleeper)
    assert _alive(HOST, sleeper.pid)  # a zombie's pid still exists: documented
    sleeper.wait()
    assert not _alive(HOST, sleeper.pid)


def _owned_by(path: Path, key: str, pid: int, identity: str) -> IdempotencyLedger:
    ledger = IdempotencyLedger(path)
    assert ledger.claim(key, b"call", "r-1", "a") == ("claimed", None)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE claims SET pid = ?, proc = ? WHERE key = ?", (pid, identity, key))
    return ledger


def test_resolve_refuses_a_live_owner_and_accepts_a_dead_or_other_one(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    path = tmp_path / "keys.sqlite"
    ident = process_identity(sleeper.pid)
    ledger = _owned_by(path, "k", sleeper.pid, ident)
    with pytest.raises(LedgerError) as e:
        ledger.resolve("k")
    assert str(e.value) == (
        f"idempotency ledger {path}: 'k' is still in flight under a live owner, run r-1 "
        f"(process {sleeper.pid} on {HOST}): wait for it, or resolve(key, force=True) once "
        "you know it stopped")
    _owned_by(path, "reused", sleeper.pid, ident + "0").resolve("reused")  # not the owner
    assert [c.key for c in ledger.claims()] == ["k"]
    with sqlite3.connect(path) as con:  # an expired lease: the owner may be stuck; a person decides
        con.execute("UPDATE claims SET expires = ? WHERE key = 'k'", (time.time() - 1,))
    ledger.resolve("k", ToolResult.success({"paid": True}))
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT run_id FROM keys WHERE key = 'k'").fetchone() == ("r-1",)
    _zombie(sleeper)
    _owned_by(path, "z", sleeper.pid, ident).resolve("z")  # a zombie owner is dead
    assert ledger.claims() == []


@pytest.mark.parametrize(("cost", "kept"), [(0.5, 0.5), (0, 0), (-0.5, 0.0), (math.nan, 0.0),
                                            (math.inf, 0.0), (True, 0.0), ("0.5", 0.0)])
def test_a_result_that_cannot_be_stored_keeps_only_a_valid_cost(cost: Any, kept: float) -> None:
    stored = not_storable(ToolResult(True, {"when": time}, cost_usd=cost))
    assert stored == ToolResult.success(
        {"result_not_storable": "dict: {'when': <module 'time' (built-in)>}"}, cost_usd=kept)


@pytest.mark.parametrize("bad", [True, -1, math.nan, "0.5"])
def test_a_spend_that_is_not_a_finite_number_is_refused(tmp_path: Path, bad: Any) -> None:
    ks = KillSwitch(ledger=tmp_path / "day.sqlite", max_spend_per_day_usd=5.0)
    admission = ks.admit()
    with pytest.raises(ValueError, match="spend must be a finite number >= 0"):
        ks.record_spend(admission, bad)
    ks.record_spend(admission, 1)  # an integer number of dollars is a number
    assert ks.usage()["spend_usd"] == 1.0
