"""The SQLite ledgers pinned exactly: what each refusal and error says, the boundaries of a
reservation and a settlement (to the micro-dollar), and that reading never creates a file."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.control import IdempotencyLedger, KillSwitch, LedgerError, ToolResult
from runner.control._errors import DailySpendCeiling
from runner.control._ledger import Claim, Lease, SpendLedger

DAY = "2026-03-14"


def test_reading_never_creates_a_ledger(tmp_path: Path) -> None:
    idem = IdempotencyLedger(tmp_path / "i.sqlite")
    assert idem.get("k") is None
    spend = SpendLedger(tmp_path / "s.sqlite")
    assert spend.usage(DAY) == {"runs": 0, "spend_usd": 0.0, "reserved_usd": 0.0}
    spend.settle(None, DAY, 0.0)  # nothing to settle: nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_each_ledger_records_its_format_and_refuses_the_other(tmp_path: Path) -> None:
    idem = IdempotencyLedger(tmp_path / "i.sqlite")
    for key, result in (("k", ToolResult(True, {"v": 1}, "a note", False, 0.25)),
                        ("f", ToolResult(False, None, "down", True, 0.5))):
        idem.put(key, b"call", result, "r-1")
        assert idem.get(key) == (b"call", result)
    with sqlite3.connect(tmp_path / "i.sqlite") as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (
            "ect.idempotency-ledger/3",)
    with pytest.raises(LedgerError) as e:
        SpendLedger(tmp_path / "i.sqlite").usage(DAY)
    assert str(e.value) == (f"ledger {tmp_path / 'i.sqlite'} is a ect.idempotency-ledger/3 file, "
                            "not ect.control-ledger/2")


def test_unusable_ledger_files_are_named(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError) as e:
        SpendLedger(junk).admit(DAY, None, None)
    assert str(e.value) == (f"ledger {junk} is not a usable SQLite ect.control-ledger/2 file: "
                            "file is not a database")
    with pytest.raises(LedgerError) as o:
        IdempotencyLedger(tmp_path).put("k", b"c", ToolResult.success(1), "r")  # a directory
    assert str(o.value) == f"cannot open ledger {tmp_path}: unable to open database file"


def test_open_leases_count_against_the_spend_ceiling(tmp_path: Path) -> None:
    book = SpendLedger(tmp_path / "s.sqlite")
    book.admit(DAY, None, 1.0)
    lease, left = book.reserve(DAY, "r-1", 0.5, 1.0)
    assert lease == Lease(lease.lease_id, DAY, "r-1", 0.5) and left == 1.0  # type: ignore[union-attr]
    exact, left = book.reserve(DAY, "r-2", 0.5, 1.0)  # exactly what is left: granted
    assert exact is not None and left == 0.5
    book.settle(lease, DAY, 0.5)  # 0.5 spent + 0.5 still reserved: the ceiling is reached
    with pytest.raises(Exception) as e:
        book.admit(DAY, None, 1.0)
    assert (e.value.kind, e.value.runs, e.value.spend_usd) == ("spend", 1, 1.0)  # type: ignore[attr-defined]
    ks = KillSwitch(ledger=tmp_path / "s.sqlite", max_spend_per_day_usd=1.0,
                    clock=lambda: datetime(2026, 3, 14, 12, tzinfo=UTC))
    with pytest.raises(DailySpendCeiling) as d:
        ks.admit()
    assert str(d.value) == "daily spend ceiling reached: $1.0000 of $1.0000 on 2026-03-14 (UTC)"


def test_reservations_to_the_micro_dollar(tmp_path: Path) -> None:
    book = SpendLedger(tmp_path / "s.sqlite")
    # a zero lease is never granted; up_to takes what is left (None: everything left)
    zero, left = book.reserve(DAY, "r", 0.0, 0.000001)
    assert zero is None and left == 0.000001
    lease, left = book.reserve(DAY, "r", None, 0.000001, up_to=True)
    assert lease is not None and lease.amount_usd == 0.000001 and left == 0.000001
    book.settle(lease, DAY, 0.000001)  # one micro-dollar spent is recorded
    assert book.usage(DAY) == {"runs": 0, "spend_usd": 0.000001, "reserved_usd": 0.0}
    none, left = book.reserve(DAY, "r", 5.0, 0.000001, up_to=True)
    assert none is None and left == 0.0
    whole, left = book.reserve("2026-01-02", "r", 5.0, 1.0)  # by default all of it or nothing
    assert whole is None and left == 1.0
    book.settle(None, DAY, 0.000001)
    assert book.usage(DAY)["spend_usd"] == 0.000002


def test_a_bad_idempotency_entry_is_named(tmp_path: Path) -> None:
    idem = IdempotencyLedger(tmp_path / "i.sqlite")
    idem.put("k", b"call", ToolResult.success(1), "r-1")
    with sqlite3.connect(tmp_path / "i.sqlite") as con:
        con.execute("UPDATE keys SET result = ? WHERE key = 'k'", (b'{"ok": true}',))
    with pytest.raises(LedgerError) as e:
        idem.get("k")
    assert str(e.value) == f"idempotency ledger {tmp_path / 'i.sqlite'}: bad entry for 'k'"


def test_a_spend_ledger_lease_lives_an_hour_by_default(tmp_path: Path) -> None:
    import time

    book = SpendLedger(tmp_path / "s.sqlite")
    lease, _ = book.reserve(DAY, "r", 0.5, 1.0)
    assert lease is not None
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        (expires,) = con.execute("SELECT expires FROM leases").fetchone()
    assert 3570 < expires - time.time() <= 3600


# -- idempotency claims: free, in flight, done, unknown -----------------------------------------
def _dead_pid() -> int:
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()  # reaped: no process has this id now
    return child.pid


def _set(path: Path, sql: str, *args: object) -> None:
    with sqlite3.connect(path) as con:
        con.execute(sql, args)


def test_a_claim_is_in_flight_for_others_until_it_is_done(tmp_path: Path) -> None:
    import os
    import socket

    idem = IdempotencyLedger(tmp_path / "i.sqlite")
    assert idem.claim("k", b"call", "r-1", "a") == ("claimed", None)
    assert idem.claim("k", b"call", "r-1", "a") == ("claimed", None)  # its own claim again
    outcome, held = idem.claim("k", b"call", "r-2", "b")
    assert outcome == "in_flight" and isinstance(held, Claim)
    assert (held.key, held.run_id, held.host, held.pid, held.unknown) == (
        "k", "r-1", socket.gethostname(), os.getpid(), False)
    assert 3500 < held.expires - time.time() <= 3600
    assert held.describe() == f"run r-1 (process {os.getpid()} on {socket.gethostname()})"
    assert idem.claims() == [held]
    idem.release("k", "b")  # not b's claim: nothing changes
    assert idem.claim("k", b"call", "r-2", "b")[0] == "in_flight"
    result = ToolResult.success({"paid": True})
    idem.put("k", b"call", result, "r-1")
    assert idem.claim("k", b"call", "r-2", "b") == ("done", (b"call", result))
    assert idem.claims() == [] and idem.get("k") == (b"call", result)


def test_a_failed_claim_frees_the_key_and_a_cut_off_one_is_unknown(tmp_path: Path) -> None:
    idem = IdempotencyLedger(tmp_path / "i.sqlite", claim_ttl_s=60)
    idem.claim("k", b"call", "r-1", "a")
    assert 0 < idem.claims()[0].expires - time.time() <= 60
    idem.release("k", "a")
    assert idem.claims() == [] and idem.claim("k", b"call", "r-2", "b") == ("claimed", None)
    idem.abandon("k", "a")  # not a's claim any more: nothing changes
    assert idem.claim("k", b"call", "r-3", "c")[0] == "in_flight"
    idem.abandon("k", "b")
    outcome, held = idem.claim("k", b"call", "r-3", "c")
    assert outcome == "unknown" and isinstance(held, Claim) and held.unknown
    assert [c.unknown for c in idem.claims()] == [True]
    with pytest.raises(ValueError) as e:
        IdempotencyLedger(tmp_path / "j.sqlite", claim_ttl_s=0)
    assert str(e.value) == "claim_ttl_s must be > 0"
    assert IdempotencyLedger(tmp_path / "j.sqlite", claim_ttl_s=0.5).claim_ttl_s == 0.5


@pytest.mark.parametrize(("change", "args", "outcome"), [
    ("UPDATE claims SET expires = ?", (1.0,), "unknown"),  # its lease expired
    ("UPDATE claims SET pid = ?", (_dead_pid(),), "unknown"),  # its process is gone
    ("UPDATE claims SET pid = ?, host = 'elsewhere'", (_dead_pid(),), "in_flight"),  # ask nobody
])
def test_a_claim_whose_owner_is_gone_is_unknown_and_stays_so(
        tmp_path: Path, change: str, args: tuple[object, ...], outcome: str) -> None:
    path = tmp_path / "i.sqlite"
    idem = IdempotencyLedger(path)
    idem.claim("k", b"call", "r-1", "a")
    _set(path, change, *args)
    assert idem.claim("k", b"call", "r-2", "b")[0] == outcome
    assert [c.unknown for c in idem.claims()] == [outcome == "unknown"]


def test_a_person_resolves_an_unknown_key(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite"
    idem = IdempotencyLedger(path)
    idem.claim("k", b"the call", "r-1", "a")
    idem.abandon("k", "a")
    paid = ToolResult.success({"paid": True})
    idem.resolve("k", paid)  # it happened
    assert idem.get("k") == (b"the call", paid) and idem.claims() == []
    idem.claim("j", b"call", "r-1", "a")
    with pytest.raises(LedgerError) as e:  # in flight under a live owner (this process)
        idem.resolve("j")
    assert str(e.value) == (
        f"idempotency ledger {path}: 'j' is still in flight under a live owner, run r-1 "
        f"(process {os.getpid()} on {socket.gethostname()}): wait for it, or "
        "resolve(key, force=True) once you know it stopped")
    idem.resolve("j", force=True)  # a person knows it did not happen: free again
    assert idem.get("j") is None and idem.claim("j", b"call", "r-2", "b") == ("claimed", None)
    with pytest.raises(LedgerError) as e:
        idem.resolve("nothing")
    assert str(e.value) == f"idempotency ledger {path}: no claim of 'nothing' to resolve"


def test_an_idempotency_ledger_of_the_first_format_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("INSERT INTO meta VALUES ('format', 'ect.idempotency-ledger/1')")
        con.execute("CREATE TABLE keys (key TEXT PRIMARY KEY, call BLOB NOT NULL, "
                    "result BLOB NOT NULL, run_id TEXT NOT NULL, created REAL NOT NULL)")
        con.execute("INSERT INTO keys VALUES ('k', x'63', ?, 'r-0', 0)",
                    (b'{"cost_usd":0,"data":1,"error":null,"fatal":false,"ok":true}',))
    idem = IdempotencyLedger(path)
    assert idem.get("k") == (b"c", ToolResult.success(1))  # kept
    assert idem.claim("j", b"call", "r-1", "a") == ("claimed", None)  # claims work
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (
            "ect.idempotency-ledger/3",)


def test_a_result_that_is_not_json_is_recorded_as_done_and_ends_the_claim(tmp_path: Path) -> None:
    """Issue 38, defect 1: a result with no canonical encoding was not recorded at all, so the
    key was free again and a repeated run paid twice. It is recorded as done, not storable."""
    idem = IdempotencyLedger(tmp_path / "i.sqlite")
    idem.claim("k", b"call", "r-1", "a")
    idem.put("k", b"call", ToolResult.success({"txn": 2**60}, cost_usd=0.5), "r-1")
    assert idem.claims() == []
    assert idem.get("k") == (b"call", ToolResult.success(
        {"result_not_storable": "dict: {'txn': 1152921504606846976}"}, cost_usd=0.5))
    assert idem.claim("k", b"call", "r-2", "b")[0] == "done"


def test_a_bad_entry_met_by_a_claim_is_named(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite"
    idem = IdempotencyLedger(path)
    idem.put("k", b"call", ToolResult.success(1), "r-1")
    _set(path, "UPDATE keys SET result = ? WHERE key = 'k'", b'{"ok": true}')
    with pytest.raises(LedgerError) as e:
        idem.claim("k", b"call", "r-2", "b")
    assert str(e.value) == f"idempotency ledger {path}: bad entry for 'k'"
