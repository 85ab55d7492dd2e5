"""SQLite ledgers shared by runs and processes: daily spend with leases, idempotency keys.

Both are one SQLite file each (``sqlite3`` from the standard library: its file locking makes
them safe across threads and processes). Every change runs in a ``BEGIN IMMEDIATE`` transaction,
so a read-check-write (may this step reserve $0.30?) is atomic against every other writer.
Money is stored in integer micro-dollars so concurrent additions never drift.
"""

from __future__ import annotations

import contextlib
import math
import os
import reprlib
import socket
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from runner.canonical import canonical_bytes, loads_strict
from runner.control._errors import LedgerError
from runner.control._types import MICRO as _MICRO
from runner.control._types import ToolResult
from runner.control._types import micro as _micro
from runner.errors import FormatError

__all__ = ["KILL_SWITCH_LEDGER_FORMAT", "Claim", "IdempotencyLedger", "Lease", "SpendLedger"]

KILL_SWITCH_LEDGER_FORMAT = "ect.control-ledger/2"
_IDEM_FORMAT = "ect.idempotency-ledger/3"


@dataclass(frozen=True)
class Lease:
    """Spend reserved for one step of one run, settled (released, actual spend added) after."""

    lease_id: int
    day: str
    run_id: str
    amount_usd: float


def _connect(path: Path, fmt: str, schema: str, *, create: bool,
             upgrade: dict[str, tuple[str, ...]] | None = None) -> sqlite3.Connection:
    if not create and not path.exists():
        raise FileNotFoundError(str(path))  # pragma: no mutate (callers catch it; text unread)
    try:
        # no mutate: the busy timeout and autocommit mode show only under minute-long contention
        con = sqlite3.connect(path, timeout=60.0, isolation_level=None)  # pragma: no mutate
    except sqlite3.Error as e:
        raise LedgerError(f"cannot open ledger {path}: {e}") from e
    try:
        con.execute("BEGIN IMMEDIATE")  # pragma: no mutate (SQL)
        try:
            row = con.execute(
                "SELECT value FROM meta WHERE key = 'format'",  # pragma: no mutate (SQL)
            ).fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is None:
            for stmt in ["CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",  # pragma: no mutate (SQL)
                         *schema.split(";")]:
                if stmt.strip():
                    con.execute(stmt)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)",  # pragma: no mutate (SQL)
                        (fmt,))
        elif upgrade is not None and row[0] in upgrade:  # an older format: add what is new
            for stmt in upgrade[row[0]]:
                con.execute(stmt)
            con.execute("UPDATE meta SET value = ? WHERE key = 'format'",  # pragma: no mutate (SQL)
                        (fmt,))
        elif row[0] != fmt:
            raise LedgerError(f"ledger {path} is a {row[0]} file, not {fmt}")
        con.execute("COMMIT")  # pragma: no mutate (SQL)
    except sqlite3.DatabaseError as e:
        con.close()
        raise LedgerError(f"ledger {path} is not a usable SQLite {fmt} file: {e}") from e
    except LedgerError:
        con.close()
        raise
    return con


@contextlib.contextmanager
def _txn(path: Path, fmt: str, schema: str, *, create: bool = True,
         upgrade: dict[str, tuple[str, ...]] | None = None) -> Iterator[sqlite3.Connection]:
    """One atomic read-check-write on the ledger (``BEGIN IMMEDIATE`` ... ``COMMIT``)."""
    con = _connect(path, fmt, schema, create=create, upgrade=upgrade)
    try:
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as e:
            raise LedgerError(f"cannot lock ledger {path}: {e}") from e
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        try:
            con.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            raise LedgerError(f"cannot write ledger {path}: {e}") from e
    finally:
        con.close()


# "pragma: no mutate (SQL)" marks a line holding only SQL text: SQL keywords and names are
# case-insensitive, so mutmut's case-changing mutants of it are equivalent.
_SPEND_SCHEMA = """
CREATE TABLE days (day TEXT PRIMARY KEY, runs INTEGER NOT NULL, spend_micro INTEGER NOT NULL);
CREATE TABLE leases (id INTEGER PRIMARY KEY AUTOINCREMENT, day TEXT NOT NULL, run_id TEXT NOT NULL,
                     amount_micro INTEGER NOT NULL, expires REAL NOT NULL)
"""


class SpendLedger:
    """Runs and spend per UTC day, plus open leases (spend reserved by steps in flight)."""

    def __init__(self, path: str | os.PathLike[str], *, lease_ttl_s: float = 3600.0) -> None:
        self.path = Path(path)
        self.lease_ttl_s = lease_ttl_s

    def _txn(self, create: bool = True) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return _txn(self.path, KILL_SWITCH_LEDGER_FORMAT, _SPEND_SCHEMA, create=create)

    @staticmethod
    def _day_row(con: sqlite3.Connection, day: str) -> tuple[int, int]:
        row = con.execute("SELECT runs, spend_micro FROM days WHERE day = ?",  # pragma: no mutate (SQL)
                          (day,)).fetchone()
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)

    @staticmethod
    def _reserved(con: sqlite3.Connection, day: str) -> int:
        # leases of crashed runs expire
        con.execute("DELETE FROM leases WHERE expires < ?",  # pragma: no mutate (SQL)
                    (time.time(),))
        row = con.execute("SELECT COALESCE(SUM(amount_micro), 0) FROM leases WHERE day = ?",  # pragma: no mutate (SQL)
                          (day,)).fetchone()
        return int(row[0])

    def admit(self, day: str, max_runs: int | None,
              max_spend_usd: float | None) -> tuple[int, float, float]:
        """Count a run unless a ceiling is reached. Returns (runs, spend, reserved) before it.

        Raises ``_Refused(kind, runs, spend_usd)`` when a ceiling is reached."""
        with self._txn() as con:
            runs, spend = self._day_row(con, day)
            reserved = self._reserved(con, day)
            if max_runs is not None and runs >= max_runs:
                raise _Refused("runs", runs, spend / _MICRO)  # pragma: no mutate (spend unread)
            if max_spend_usd is not None and spend + reserved >= _micro(max_spend_usd):
                raise _Refused("spend", runs, (spend + reserved) / _MICRO)
            con.execute("INSERT INTO days VALUES (?, 1, 0) ON CONFLICT(day) DO UPDATE "  # pragma: no mutate (SQL)
                        "SET runs = runs + 1",  # pragma: no mutate (SQL)
                        (day,))
            return runs, spend / _MICRO, reserved / _MICRO

    def reserve(self, day: str, run_id: str, amount_usd: float | None,
                max_spend_usd: float, *, up_to: bool = False) -> tuple[Lease | None, float]:
        """Reserve ``amount_usd`` if today's spend plus open leases leave room for it; with
        ``up_to``, as much of it as is left (None: everything that is left). Never zero.

        Returns (the lease or None when refused, what the ceiling leaves before it)."""
        with self._txn() as con:
            _, spend = self._day_row(con, day)
            left = _micro(max_spend_usd) - spend - self._reserved(con, day)
            amount = left if amount_usd is None else _micro(amount_usd)
            if up_to:
                amount = min(amount, left)
            if amount > left or amount <= 0:
                return None, max(0, left) / _MICRO
            cur = con.execute("INSERT INTO leases (day, run_id, amount_micro, expires) "  # pragma: no mutate (SQL)
                              "VALUES (?, ?, ?, ?)",  # pragma: no mutate (SQL)
                              (day, run_id, amount, time.time() + self.lease_ttl_s))
            assert cur.lastrowid is not None
            return Lease(cur.lastrowid, day, run_id, amount / _MICRO), left / _MICRO

    def settle(self, lease: Lease | None, day: str, spent_usd: float) -> None:
        """Release ``lease`` (if any) and add what the step really spent.

        Raises:
            ValueError: ``spent_usd`` is negative or not a finite number (never credited).
        """
        if (isinstance(spent_usd, bool) or not isinstance(spent_usd, int | float)
                or not math.isfinite(spent_usd) or spent_usd < 0):
            raise ValueError(f"spend must be a finite number >= 0, got {spent_usd!r}")
        spent = _micro(spent_usd)
        if lease is None and spent <= 0:
            return
        with self._txn() as con:
            if lease is not None:
                con.execute("DELETE FROM leases WHERE id = ?",  # pragma: no mutate (SQL)
                            (lease.lease_id,))
            if spent > 0:  # pragma: no mutate (>= 0 only adds a zero that changes no total)
                con.execute("INSERT INTO days VALUES (?, 0, ?) ON CONFLICT(day) DO UPDATE "  # pragma: no mutate (SQL)
                            "SET spend_micro = spend_micro + excluded.spend_micro",  # pragma: no mutate (SQL)
                            (day, spent))

    def usage(self, day: str) -> dict[str, Any]:
        """``{"runs", "spend_usd", "reserved_usd"}`` for ``day``; never creates the file."""
        try:
            with self._txn(create=False) as con:  # pragma: no mutate (None is as falsy as False)
                runs, spend = self._day_row(con, day)
                reserved = self._reserved(con, day)
        except FileNotFoundError:
            return {"runs": 0, "spend_usd": 0.0, "reserved_usd": 0.0}
        return {"runs": runs, "spend_usd": spend / _MICRO, "reserved_usd": reserved / _MICRO}


class _Refused(Exception):
    def __init__(self, kind: str, runs: int, spend_usd: float) -> None:
        self.kind, self.runs, self.spend_usd = kind, runs, spend_usd


_IDEM_SCHEMA = """
CREATE TABLE keys (key TEXT PRIMARY KEY, call BLOB NOT NULL, result BLOB NOT NULL,
                   run_id TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE claims (key TEXT PRIMARY KEY, call BLOB NOT NULL, owner TEXT NOT NULL,
                     run_id TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL,
                     expires REAL NOT NULL, unknown INTEGER NOT NULL,
                     proc TEXT NOT NULL DEFAULT '')
"""
# Older files are upgraded in place on first use: /1 (no claims) gains the claims table, /2 the
# claim owner's process identity (``proc``: boot id and start time, against pid reuse).
_IDEM_UPGRADE: dict[str, tuple[str, ...]] = {
    "ect.idempotency-ledger/1": (_IDEM_SCHEMA.split(";")[1],),
    "ect.idempotency-ledger/2": ("ALTER TABLE claims ADD COLUMN proc TEXT NOT NULL DEFAULT ''",),  # pragma: no mutate (SQL)
}

ClaimOutcome = Literal["claimed", "done", "in_flight", "unknown"]


@dataclass(frozen=True)
class Claim:
    """An attempt of a side-effect call that holds its idempotency key: in flight until it
    records its result (done) or its failure (the key is free again); ``unknown`` once its
    process died mid-call (a zombie counts as dead), its lease expired, its tool raised, or it
    was cancelled or interrupted mid-call."""

    key: str
    run_id: str
    host: str
    pid: int
    expires: float
    unknown: bool

    def describe(self) -> str:
        return f"run {self.run_id} (process {self.pid} on {self.host})"


_PROC = Path("/proc")  # Linux: process states and start times (absent elsewhere)


def _boot_id() -> str:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_bytes().decode().strip()
    except OSError:
        return ""


def _proc_state(pid: int) -> tuple[str, str] | None:
    """(state letter, start time in clock ticks since boot) of ``pid`` from ``/proc/PID/stat``,
    or None when there is no such process. The command name is in parentheses and may hold
    spaces or parentheses itself, so the fields are read after the last ``)``."""
    try:
        data = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = data.rpartition(b")")[2].split()
    return fields[0].decode(), fields[19].decode()  # fields 3 (state), 22 (starttime): proc(5)


def process_identity(pid: int) -> str:
    """``boot id:start time`` of a live process ("" where ``/proc`` does not tell): two
    processes with one pid never share it, so a reused pid is not mistaken for the owner."""
    found = _proc_state(pid)
    return f"{_boot_id()}:{found[1]}" if found is not None else ""


def _alive(host: str, pid: int, identity: str = "") -> bool:
    """False only when the process is known to be gone: same host, and no such process, or a
    zombie (killed, not yet reaped: it runs nothing), or another process that reuses the pid
    (its start time differs from the one recorded with the claim)."""
    if host != socket.gethostname():
        return True  # another machine's process: only its lease expiry tells
    if (_PROC / "self").exists():
        found = _proc_state(pid)
        if found is None or found[0] == "Z":  # gone, or a zombie (killed, not yet reaped)
            return False
        return not identity or identity == f"{_boot_id()}:{found[1]}"
    try:  # no /proc: a signal 0 tells whether the pid exists (a zombie counts as alive)
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists (another user's process)
        pass
    return True


NOT_STORABLE = "result_not_storable"


def not_storable(result: ToolResult) -> ToolResult:
    """What is recorded for a successful result with no canonical JSON encoding: a success whose
    data is ``{"result_not_storable": "<type and the start of its repr>"}`` (and its cost when
    that is a finite number). A later attempt gets this instead of running the call again."""
    cost = result.cost_usd
    finite = isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost)
    what = f"{type(result.data).__name__}: {reprlib.repr(result.data)}"
    return ToolResult.success({NOT_STORABLE: what}, cost_usd=max(float(cost), 0.0) if finite else 0.0)


def _body(result: ToolResult) -> bytes:
    try:
        return canonical_bytes(result.to_json())
    except FormatError:
        return canonical_bytes(not_storable(result).to_json())


class IdempotencyLedger:
    """Idempotency keys of side-effect calls shared by every run (and process) using the same
    file, so a side effect happens at most once across overlapping retries.

    A key moves through these states (all in one SQLite file, every change one transaction):

    - **free**: never claimed, or its last attempt failed (a failed call may be retried);
    - **in flight**: an attempt claimed it before the call ran (owner run, host, process id and
      a lease expiry ``claim_ttl_s`` ahead). Another attempt with the key waits for it;
    - **done**: the call succeeded and its result is recorded; any later attempt with the same
      arguments gets that result instead of running the tool (other arguments are refused);
    - **unknown**: the attempt's process died mid-call, its lease expired, its tool raised, or
      the call was cancelled or interrupted before its result came back: nobody knows whether
      the side effect happened. A later attempt stops ``needs_human``; a person checks and calls
      :meth:`resolve` (with the result when it happened, without when it did not).

    Pass it as ``RunController(..., idempotency=IdempotencyLedger(path))``.
    """

    def __init__(self, path: str | os.PathLike[str], *, claim_ttl_s: float = 3600.0) -> None:
        if not claim_ttl_s > 0:
            raise ValueError("claim_ttl_s must be > 0")
        self.path = Path(path)
        self.claim_ttl_s = claim_ttl_s

    def _txn(self, create: bool = True) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return _txn(self.path, _IDEM_FORMAT, _IDEM_SCHEMA, create=create, upgrade=_IDEM_UPGRADE)

    def _result(self, key: str, body: bytes) -> ToolResult:
        try:
            obj = loads_strict(body)
            return ToolResult(ok=obj["ok"], data=obj["data"], error=obj["error"],
                              fatal=obj["fatal"], cost_usd=obj["cost_usd"])
        except (FormatError, KeyError, TypeError) as e:
            raise LedgerError(f"idempotency ledger {self.path}: bad entry for {key!r}") from e

    def get(self, key: str) -> tuple[bytes, ToolResult] | None:
        """(the call's canonical bytes, its result) recorded for ``key``, or None."""
        try:
            with self._txn(create=False) as con:  # pragma: no mutate (None is as falsy as False)
                row = con.execute("SELECT call, result FROM keys WHERE key = ?",  # pragma: no mutate (SQL)
                                  (key,)).fetchone()
        except FileNotFoundError:
            return None
        if row is None:
            return None
        return bytes(row[0]), self._result(key, bytes(row[1]))

    def claim(self, key: str, call: bytes, run_id: str,
              owner: str) -> tuple[ClaimOutcome, tuple[bytes, ToolResult] | Claim | None]:
        """Claim ``key`` for an attempt about to run, in one transaction. Returns
        ``("claimed", None)`` (run the call), ``("done", (call, result))`` (it already
        happened), ``("in_flight", claim)`` (another attempt is running it: wait) or
        ``("unknown", claim)`` (an earlier attempt's outcome is unknown: ask a person)."""
        with self._txn() as con:
            row = con.execute("SELECT call, result FROM keys WHERE key = ?",  # pragma: no mutate (SQL)
                              (key,)).fetchone()
            if row is not None:
                return "done", (bytes(row[0]), self._result(key, bytes(row[1])))
            sql = "SELECT owner, run_id, host, pid, expires, unknown, proc FROM claims WHERE key = ?"  # pragma: no mutate (SQL)
            held = con.execute(sql, (key,)).fetchone()
            if held is None:
                con.execute("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)",  # pragma: no mutate (SQL)
                            (key, call, owner, run_id, socket.gethostname(), os.getpid(),
                             time.time() + self.claim_ttl_s, process_identity(os.getpid())))
                return "claimed", None
            if held[0] == owner:
                return "claimed", None
            # no mutate: the lease's expiry to the microsecond (< or <=) cannot be tested
            expired = held[4] < time.time()  # pragma: no mutate
            gone = bool(held[5]) or expired or not _alive(held[2], int(held[3]), str(held[6]))
            if gone and not held[5]:
                con.execute("UPDATE claims SET unknown = 1 WHERE key = ?", (key,))  # pragma: no mutate (SQL)
            found = Claim(key, str(held[1]), str(held[2]), int(held[3]), float(held[4]), gone)
            return ("unknown" if gone else "in_flight"), found

    def put(self, key: str, call: bytes, result: ToolResult, run_id: str) -> None:
        """Record a successful call (the first record of a key wins) and end its claim.

        A result that has no canonical JSON encoding (a ``datetime``, an integer beyond 2**53,
        NaN) is recorded as done all the same, with :func:`not_storable` in its place: the
        side effect happened, so no later attempt may run it again."""
        body = _body(result)
        with self._txn() as con:
            con.execute("INSERT OR IGNORE INTO keys VALUES (?, ?, ?, ?, ?)",  # pragma: no mutate (SQL)
                        (key, call, body, run_id, time.time()))
            con.execute("DELETE FROM claims WHERE key = ?", (key,))  # pragma: no mutate (SQL)

    def release(self, key: str, owner: str) -> None:
        """End ``owner``'s claim of a call that failed: the key is free again."""
        with self._txn() as con:
            con.execute("DELETE FROM claims WHERE key = ? AND owner = ?",  # pragma: no mutate (SQL)
                        (key, owner))

    def abandon(self, key: str, owner: str) -> None:
        """Mark ``owner``'s claim unknown: the call was cut off before its result came back."""
        with self._txn() as con:
            con.execute("UPDATE claims SET unknown = 1 WHERE key = ? AND owner = ?",  # pragma: no mutate (SQL)
                        (key, owner))

    def claims(self) -> list[Claim]:
        """Every claim held now (in flight or unknown), oldest key first."""
        try:
            with self._txn(create=False) as con:  # pragma: no mutate (None is as falsy as False)
                sql = "SELECT key, run_id, host, pid, expires, unknown FROM claims ORDER BY key"  # pragma: no mutate (SQL)
                rows = con.execute(sql).fetchall()
        except FileNotFoundError:
            return []
        return [Claim(str(r[0]), str(r[1]), str(r[2]), int(r[3]), float(r[4]), bool(r[5]))
                for r in rows]

    def resolve(self, key: str, result: ToolResult | None = None, *,
                force: bool = False) -> None:
        """A person's decision about a key whose outcome was unknown: with ``result`` the side
        effect happened (it is recorded as done, with the claimed call's arguments); without,
        it did not (the key is free, a retry runs the call).

        Raises:
            LedgerError: no claim of ``key``; or its attempt is still in flight under a live
                owner (its process runs, its lease has not expired) and ``force`` is not set:
                resolving it then would let a retry pay again while the first attempt pays.
        """
        with self._txn() as con:
            sql = "SELECT call, run_id, host, pid, expires, unknown, proc FROM claims WHERE key = ?"  # pragma: no mutate (SQL)
            row = con.execute(sql, (key,)).fetchone()
            if row is None:
                raise LedgerError(f"idempotency ledger {self.path}: no claim of {key!r} to resolve")
            # no mutate: the lease's expiry to the microsecond (>= or >) cannot be tested
            live = not row[5] and row[4] >= time.time()  # pragma: no mutate
            if live and not force and _alive(str(row[2]), int(row[3]), str(row[6])):
                raise LedgerError(f"idempotency ledger {self.path}: {key!r} is still in flight "
                                  f"under a live owner, run {row[1]} (process {row[3]} on "
                                  f"{row[2]}): wait for it, or resolve(key, force=True) once "
                                  "you know it stopped")
            if result is not None:
                con.execute("INSERT OR IGNORE INTO keys VALUES (?, ?, ?, ?, ?)",  # pragma: no mutate (SQL)
                            (key, bytes(row[0]), _body(result), row[1], time.time()))
            con.execute("DELETE FROM claims WHERE key = ?", (key,))  # pragma: no mutate (SQL)
