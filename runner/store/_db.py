"""The SQLite layer: connection pragmas (asserted by reading them back), schema, triggers.

Every connection the store opens goes through :func:`connect` then :func:`configure`, so no
connection ever runs with weaker settings than the store's mode promises.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Literal

import sqlite_utils

from runner.errors import StoreError
from runner.store._errors import FileCorrupt, NotAStore, StoreBusy, StoreUnavailable

__all__ = [
    "APPLICATION_ID",
    "FORMAT_VERSION",
    "JOURNAL_MODES",
    "SCHEMA_VERSION",
    "TABLES",
    "Journal",
    "attempt_chain_hash",
    "chain_hash",
    "configure",
    "connect",
    "create_schema",
    "expected_schema",
    "foreign_file",
    "is_busy",
    "missing_schema",
    "schema_differences",
    "translate",
    "unreadable",
    "wrap",
]

Journal = Literal["wal", "rollback"]
JOURNAL_MODES: dict[str, tuple[str, str, int]] = {
    # mode -> (PRAGMA journal_mode value, synchronous name, synchronous number read back)
    "wal": ("wal", "FULL", 2),
    "rollback": ("delete", "EXTRA", 3),
}

APPLICATION_ID = 0x45435453  # "ECTS": marks the file as an ect run store
SCHEMA_VERSION = 1
FORMAT_VERSION = "ect.store/1"
TABLES = ("records", "attempts", "checkpoints", "blobs")

GENESIS = b"\x00" * 32
_sha256 = hashlib.sha256


def chain_hash(store_id: bytes, seq: int, prev: bytes, leaf: bytes) -> bytes:
    """``chain_n = sha256(0x02 || store_id || u64be(n) || chain_{n-1} || leaf_n)``."""
    return _sha256(b"\x02" + store_id + seq.to_bytes(8, "big") + prev + leaf).digest()


def attempt_chain_hash(store_id: bytes, seq: int, prev: bytes, leaf: bytes) -> bytes:
    """The attempt journal's own chain: as :func:`chain_hash` with domain byte 0x03."""
    return _sha256(b"\x03" + store_id + seq.to_bytes(8, "big") + prev + leaf).digest()


def is_busy(e: sqlite3.Error) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    msg = str(e).lower()
    return "locked" in msg or "busy" in msg


def _code(e: sqlite3.Error) -> int | None:
    code = getattr(e, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def foreign_file(path: str | os.PathLike[str], checkpoint: str | os.PathLike[str] | None = None,
                 ) -> bool:
    """A file that never was a store: not an SQLite file, and no store checkpoint beside it
    (``checkpoint``, default ``<path>.checkpoint``). A store whose first pages were overwritten
    or cut off keeps its external checkpoint: that is damage (``corrupt``), not a foreign file.
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(16)
    except OSError:
        return False
    beside = Path(checkpoint) if checkpoint is not None else Path(os.fspath(path) + ".checkpoint")
    return magic != b"SQLite format 3\x00" and not beside.exists()


def translate(e: sqlite3.Error, path: str | os.PathLike[str]) -> StoreError:
    """Map a foreign sqlite3 error to the most specific store error."""
    if is_busy(e):
        return StoreBusy(f"{path}: another writer holds the store (busy timeout expired)")
    msg = str(e)
    low = msg.lower()
    code = _code(e)
    if code == sqlite3.SQLITE_CANTOPEN or "unable to open database" in low:
        return StoreUnavailable(f"{path}: cannot open the store file ({msg})")
    if code == sqlite3.SQLITE_FULL or "disk is full" in low:
        return StoreError(f"{path}: No space left on device (the transaction was rolled back)")
    if code == sqlite3.SQLITE_READONLY or "readonly database" in low:
        return StoreUnavailable(f"{path}: the store is read-only here ({msg})")
    if "not a database" in low and foreign_file(path):
        return NotAStore(f"{path}: not an ect run store (not an SQLite file, and no store "
                         "checkpoint beside it)")
    if "malformed" in low or "not a database" in low or "corrupt" in low:
        return FileCorrupt(f"{path}: SQLite reports a damaged file: {msg}")
    if "no such table" in low or "no such column" in low:
        return NotAStore(f"{path}: not an ect run store ({msg})")
    return StoreError(f"{path}: SQLite error: {msg}")


def unreadable(e: sqlite3.Error | UnicodeDecodeError, path: str | os.PathLike[str]) -> StoreError:
    """Map an error raised while *reading* a store for verification: anything SQLite (or its
    text decoding) cannot read back is damage, except a lock held by another process."""
    if isinstance(e, sqlite3.Error):
        err = translate(e, path)
        if isinstance(err, StoreBusy | FileCorrupt | NotAStore | StoreUnavailable):
            return err
        if _code(e) == sqlite3.SQLITE_FULL or "disk is full" in str(e).lower():
            return err  # the machine's state, not damage
    return FileCorrupt(f"{path}: unreadable: {type(e).__name__}: {str(e)[:120]}")


def connect(
    path: str | os.PathLike[str], *, busy_timeout_s: float, readonly: bool = False
) -> sqlite3.Connection:
    """Open a connection in autocommit mode (the store issues BEGIN/COMMIT itself).

    ``readonly`` opens with ``mode=ro``. Where the store's directory is not writable (read-only
    media, an extracted archive, a CI cache) SQLite cannot create the ``-shm`` file WAL needs,
    so the file is opened ``immutable`` instead -- but only when no ``-wal`` file with content
    sits beside it: immutable mode ignores the WAL, and committed records may still be in it.

    Raises:
        StoreUnavailable: read-only media with a non-empty ``-wal`` (copy the store and its
            ``-wal`` somewhere writable), or the file cannot be opened at all.
    """
    p = os.path.abspath(os.fspath(path))
    quiet = readonly and _leaves_no_trace(p)
    if readonly:
        uri = "file:" + urllib.parse.quote(p) + ("?mode=rw" if quiet else "?mode=ro")
        if not quiet and _needs_immutable(p):
            uri += "&immutable=1"
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, timeout=busy_timeout_s, check_same_thread=False
        )
    else:
        conn = sqlite3.connect(
            p, isolation_level=None, timeout=busy_timeout_s, check_same_thread=False
        )
    # Before anything reads the schema: no schema-defined functions run with trust.
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        ok = _pragma(conn, "PRAGMA trusted_schema") == 0
        if quiet:
            conn.execute("PRAGMA query_only = ON")
            ok = ok and _pragma(conn, "PRAGMA query_only") == 1
    except (sqlite3.Error, UnicodeDecodeError) as e:
        conn.close()
        raise unreadable(e, path) from e
    if not ok:
        conn.close()
        raise StoreError(f"{path}: could not turn trusted_schema off")
    return conn


def _leaves_no_trace(p: str) -> bool:
    """Whether a reader should open ``p`` read-write under ``PRAGMA query_only``.

    A ``mode=ro`` connection to a WAL store creates ``-wal`` and ``-shm`` files it cannot
    remove, so a read-only verification would leave both behind. When neither exists (no
    connection has the store open: a WAL connection keeps both while open) and both the file
    and its directory are writable, a connection that may not write (``query_only``, checked
    by SQLite for every statement) removes them on close, as the last connection of a WAL
    database does; its ``-wal`` is empty, so closing writes nothing to the store.
    """
    if os.path.exists(p + "-wal") or os.path.exists(p + "-shm"):
        return False
    return os.access(p, os.W_OK) and os.access(os.path.dirname(p) or ".", os.W_OK)


def _needs_immutable(p: str) -> bool:
    directory = os.path.dirname(p) or "."
    if os.access(directory, os.W_OK):
        return False
    wal = p + "-wal"
    try:
        size = os.stat(wal).st_size
    except FileNotFoundError:
        size = 0
    except OSError as e:
        raise StoreUnavailable(f"{p}: cannot inspect {wal}: {e.strerror}") from e
    if size > 0:
        raise StoreUnavailable(
            f"{p}: on a read-only directory with a non-empty {os.path.basename(wal)} that may hold "
            "committed records; copy the store and its -wal file to a writable directory and "
            "verify the copy"
        )
    return True


def _pragma(conn: sqlite3.Connection, sql: str) -> object:
    row = conn.execute(sql).fetchone()
    return None if row is None else row[0]


def configure(
    conn: sqlite3.Connection,
    path: str | os.PathLike[str],
    *,
    journal: Journal,
    busy_timeout_s: float,
    readonly: bool = False,
) -> None:
    """Apply and assert the store's pragmas on ``conn``.

    Raises:
        StoreError: a pragma did not take (for example WAL on a filesystem without shared
            memory); the message names the explicit fallback ``journal="rollback"``.
    """
    if journal not in JOURNAL_MODES:
        raise ValueError(f"journal must be 'wal' or 'rollback', not {journal!r}")
    mode, sync_name, sync_num = JOURNAL_MODES[journal]
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        conn.execute("PRAGMA trusted_schema = OFF")
        if _pragma(conn, "PRAGMA trusted_schema") != 0:
            raise StoreError(f"{path}: could not turn trusted_schema off")
        conn.execute("PRAGMA cell_size_check = ON")
        # A read-only connection writes nothing, so no durability setting is at stake; its
        # journal mode reads "delete" when the file was opened immutable (read-only media).
        got = mode if readonly else _pragma(conn, f"PRAGMA journal_mode = {mode}")
        if str(got).lower() != mode:
            hint = (
                " (a network filesystem? open with journal='rollback')" if journal == "wal" else ""
            )
            raise StoreError(f"{path}: journal_mode is {got!r}, the store needs {mode!r}{hint}")
        conn.execute(f"PRAGMA synchronous = {sync_name}")
        if not readonly and _pragma(conn, "PRAGMA synchronous") != sync_num:
            raise StoreError(f"{path}: could not set synchronous={sync_name}")
    except (sqlite3.Error, UnicodeDecodeError) as e:
        raise unreadable(e, path) from e


def wrap(conn: sqlite3.Connection) -> sqlite_utils.Database:
    """The sqlite-utils view of a connection the store configured (no plugins, no recursion)."""
    return sqlite_utils.Database(conn, execute_plugins=False, recursive_triggers=False)


def create_schema(db: sqlite_utils.Database) -> None:
    """Create the STRICT tables and the triggers that make them append-only."""
    db.create_table(
        "records",
        {"seq": int, "body": bytes, "leaf": bytes, "chain": bytes},
        pk="seq",
        not_null=["body", "leaf", "chain"],
        strict=True,
    )
    db.create_table(
        "attempts",
        {
            "seq": int,
            "kind": str,
            "ref": int,
            "cell_id": str,
            "body": bytes,
            "leaf": bytes,
            "chain": bytes,
        },
        pk="seq",
        not_null=["kind", "cell_id", "body", "leaf", "chain"],
        strict=True,
    )
    # At most one end per begun attempt.
    db.execute("CREATE UNIQUE INDEX attempts_one_end ON attempts(ref) WHERE kind = 'end'")
    db.create_table(
        "checkpoints", {"id": int, "body": bytes}, pk="id", not_null=["body"], strict=True
    )
    db.create_table(
        "blobs", {"digest": str, "data": bytes}, pk="digest", not_null=["data"], strict=True
    )
    for table in TABLES:
        for op in ("UPDATE", "DELETE"):
            db.execute(
                f"CREATE TRIGGER {table}_no_{op.lower()} BEFORE {op} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
            )
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


_EXPECTED_SCHEMA: list[tuple[str, str, str, str | None]] = []


def expected_schema() -> list[tuple[str, str, str, str | None]]:
    """``(type, name, tbl_name, sql)`` of every schema object a store has, built once."""
    if not _EXPECTED_SCHEMA:
        mem = sqlite3.connect(":memory:", isolation_level=None)
        try:
            create_schema(wrap(mem))
            _EXPECTED_SCHEMA.extend(_schema_rows(mem))
        finally:
            mem.close()
    return _EXPECTED_SCHEMA


def _schema_rows(conn: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
    return [
        (str(t), str(n), str(tb), s)
        for t, n, tb, s in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name"
        )
    ]


def schema_differences(conn: sqlite3.Connection) -> list[str]:
    """Schema objects missing, extra or altered compared with a freshly created store."""
    want = {(t, n): row for row in expected_schema() for t, n in [row[:2]]}
    have = {(t, n): row for row in _schema_rows(conn) for t, n in [row[:2]]}
    out = [f"missing {t} {n}" for (t, n) in want if (t, n) not in have]
    out += [f"extra {t} {n}" for (t, n) in have if (t, n) not in want]
    out += [
        f"altered {t} {n}" for (t, n), row in want.items() if (t, n) in have and have[(t, n)] != row
    ]
    return out


def missing_schema(conn: sqlite3.Connection) -> list[str]:
    """Names of tables or append-only triggers that should exist and do not."""
    have = {
        (t, n)
        for t, n in conn.execute(
            "SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'trigger')"
        )
    }
    missing = [t for t in TABLES if ("table", t) not in have]
    for t in TABLES:
        for op in ("update", "delete"):
            if ("trigger", f"{t}_no_{op}") not in have:
                missing.append(f"{t}_no_{op}")
    return missing


def check_identity(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> None:
    """Raise NotAStore unless the file carries the store's application id and schema version."""
    try:
        app = _pragma(conn, "PRAGMA application_id")
        ver = _pragma(conn, "PRAGMA user_version")
    except (sqlite3.Error, UnicodeDecodeError) as e:
        raise unreadable(e, path) from e
    if app != APPLICATION_ID:
        raise NotAStore(f"{path}: not an ect run store (application_id {app})")
    if ver != SCHEMA_VERSION:
        raise NotAStore(f"{path}: store schema version {ver} is not supported")
