"""Claims of idempotency keys across processes: a side effect paid once whatever the tool
returns or raises, a claim freed or left unknown, owners that died, were never reaped or
whose pid was reused, a key a person resolves, older ledger formats."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from runner.control import (
    IdempotencyLedger,
    LedgerError,
    StopReason,
    ToolResult,
)
from tests.control.helpers_pay_processes import (
    _PAYER,
    KEY,
    _child,
    _pay_controller,
    _pay_in_process,
    _payer,
    _until,
)


# -- 1. at most once for every result ----------------------------------------------------------
@pytest.mark.child_process
@pytest.mark.parametrize("mode", ["bigint", "datetime"])
def test_a_result_that_is_not_json_still_pays_once_across_processes(tmp_path: Path,
                                                                      mode: str) -> None:
    """Defect 1: the result's body was not recorded and the claim was deleted, so the same run
    repeated on the same ledger paid a second time."""
    ledger, paid = tmp_path / "keys.sqlite", tmp_path / "paid.txt"
    first = _pay_in_process(ledger, paid, mode)
    second = _pay_in_process(ledger, paid, mode)
    assert paid.read_text("utf-8").splitlines() == ["paid"]  # charged once
    assert first["reason"] == "goal_met" and first["trace"] == ["tool"]
    assert (second["reason"], second["kind"], second["trace"]) == (
        "needs_human", "ResultNotStored", [])  # the tool did not run again
    assert second["detail"].startswith(
        "pay with idempotency key 'order-5512' already happened, but its result could not be "
        "stored (dict: {")
    recorded = IdempotencyLedger(ledger).get(KEY)
    assert recorded is not None and recorded[1].ok
    assert set(recorded[1].data) == {"result_not_storable"}


@pytest.mark.child_process
def test_a_tool_that_raises_after_paying_leaves_its_key_unknown_across_processes(
        tmp_path: Path) -> None:
    """Defect 8c: a TimeoutError from the tool after the charge went through freed the key, so
    a retry paid again; the controller's own timeout already marked such a key unknown."""
    ledger, paid = tmp_path / "keys.sqlite", tmp_path / "paid.txt"
    first = _pay_in_process(ledger, paid, "raises")
    assert (first["reason"], first["detail"]) == (
        "tool_error", "pay failed fatally: TimeoutError: the provider's reply timed out")
    assert [c.unknown for c in IdempotencyLedger(ledger).claims()] == [True]
    second = _pay_in_process(ledger, paid, "bigint")
    assert (second["reason"], second["kind"]) == ("needs_human", "UnknownOutcome")
    assert paid.read_text("utf-8").splitlines() == ["paid"]


def test_a_tool_returning_a_failure_still_frees_its_key(tmp_path: Path) -> None:
    """The tool says it did not happen (a returned failure): the key is free for a retry."""
    ledger = IdempotencyLedger(tmp_path / "keys.sqlite")
    ctl = _pay_controller(ledger)
    failed = ctl.run("pay", _payer, lambda call: ToolResult.failure("declined", fatal=True))
    assert failed.reason is StopReason.TOOL_ERROR and ledger.claims() == []


def test_a_misused_async_execute_frees_its_claim(tmp_path: Path) -> None:
    """Defect 5: run() with a plain execute returning a coroutine raised TypeError and left the
    claim in flight: a retry then waited until its deadline (or the claim's hour)."""
    ledger = IdempotencyLedger(tmp_path / "keys.sqlite")

    async def later() -> ToolResult:
        return ToolResult.success({"paid": True})

    with pytest.raises(TypeError, match="execute returned an awaitable"):
        _pay_controller(ledger).run("pay", _payer, lambda call: later())
    assert ledger.claims() == []
    paid: list[int] = []
    retry = _pay_controller(ledger, max_seconds=30).run(
        "retry", _payer, lambda call: paid.append(1) or ToolResult.success({"paid": True}))  # type: ignore[func-returns-value]
    assert retry.completed and paid == [1]


# -- 3. liveness of claims ---------------------------------------------------------------------
@pytest.mark.child_process
def test_a_killed_but_unreaped_owner_is_dead_across_processes(tmp_path: Path) -> None:
    """Defect 6: os.kill(pid, 0) succeeds on a zombie, so a retry waited for a dead owner."""
    ledger, paid = tmp_path / "keys.sqlite", tmp_path / "paid.txt"
    owner = _child(_PAYER, str(ledger), str(paid), "hangs")
    try:
        _until(paid.exists, "the owner's call")
        os.kill(owner.pid, signal.SIGKILL)  # killed, and not reaped: a zombie
        _until(lambda: Path(f"/proc/{owner.pid}/stat").read_text().rpartition(")")[2].split()[0]
               == "Z", "the owner to become a zombie")
        retry = _pay_controller(IdempotencyLedger(ledger), max_seconds=60).run(
            "retry", _payer, lambda call: ToolResult.success({"paid": True}))
    finally:
        owner.kill()
        owner.communicate(timeout=60)
    assert (retry.reason, retry.stop.kind) == (StopReason.NEEDS_HUMAN, "UnknownOutcome")
    assert f"process {owner.pid}" in retry.stop.detail


def test_a_reused_pid_is_not_mistaken_for_the_owner(tmp_path: Path) -> None:
    """The owner's start time is recorded with the claim: a live process with the same pid but
    another start time (the pid was reused) is not the owner."""
    path = tmp_path / "keys.sqlite"
    ledger = IdempotencyLedger(path)
    assert ledger.claim(KEY, b"call", "r-1", "a") == ("claimed", None)
    with sqlite3.connect(path) as con:
        (proc,) = con.execute("SELECT proc FROM claims").fetchone()
        assert proc.endswith(":" + Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        con.execute("UPDATE claims SET proc = ?", (proc + "0",))  # another process's start time
    assert ledger.claim(KEY, b"call", "r-2", "b")[0] == "unknown"


def test_a_ledger_of_the_second_format_gains_the_owner_identity(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("INSERT INTO meta VALUES ('format', 'ect.idempotency-ledger/2')")
        con.execute("CREATE TABLE keys (key TEXT PRIMARY KEY, call BLOB NOT NULL, result BLOB "
                    "NOT NULL, run_id TEXT NOT NULL, created REAL NOT NULL)")
        con.execute("CREATE TABLE claims (key TEXT PRIMARY KEY, call BLOB NOT NULL, owner TEXT "
                    "NOT NULL, run_id TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, "
                    "expires REAL NOT NULL, unknown INTEGER NOT NULL)")
        con.execute("INSERT INTO claims VALUES ('old', x'63', 'o', 'r-0', ?, ?, ?, 0)",
                    (__import__("socket").gethostname(), os.getpid(), time.time() + 3600))
    ledger = IdempotencyLedger(path)
    assert ledger.claim("old", b"c", "r-1", "b")[0] == "in_flight"  # no identity: pid alone
    assert ledger.claim("new", b"c", "r-1", "b") == ("claimed", None)
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (
            "ect.idempotency-ledger/3",)


@pytest.mark.child_process
def test_resolve_refuses_a_claim_in_flight_under_a_live_owner_across_processes(
        tmp_path: Path) -> None:
    """Defect 8b: resolve(key) freed a claim whose owner was still paying; the retry paid too."""
    ledger, paid = tmp_path / "keys.sqlite", tmp_path / "paid.txt"
    owner = _child(_PAYER, str(ledger), str(paid), "hangs")
    try:
        _until(paid.exists, "the owner's call")
        with pytest.raises(LedgerError, match="still in flight under a live owner"):
            IdempotencyLedger(ledger).resolve(KEY)
        assert [c.unknown for c in IdempotencyLedger(ledger).claims()] == [False]
        IdempotencyLedger(ledger).resolve(KEY, force=True)  # a person says it stopped
        assert IdempotencyLedger(ledger).claims() == []
    finally:
        owner.kill()
        owner.communicate(timeout=60)
