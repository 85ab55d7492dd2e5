"""The run store: one SQLite file, an append-only hash chain of records (docs/store.md)."""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from runner.canonical import (
    JsonObject,
    canonical_bytes,
    digest_bytes,
    is_digest,
    loads_strict,
    raw_digest,
)
from runner.errors import FormatError
from runner.store._check import (
    HEADER_REQUIRED,
    HEADER_RESERVED,
    CheckResult,
    check_connection,
    checkpoint_path,
    parse_header,
)
from runner.store._checkpoint import make_checkpoint, parse_checkpoint, utc_now
from runner.store._db import (
    FORMAT_VERSION,
    GENESIS,
    Journal,
    attempt_chain_hash,
    chain_hash,
    configure,
    connect,
    create_schema,
    translate,
    unreadable,
    wrap,
)
from runner.store._errors import (
    AttemptError,
    AttemptJournalDamaged,
    BlobCorrupt,
    BlobNotFound,
    SignatureInvalid,
    StoreUsageError,
    TamperDetected,
)
from runner.store._fsutil import Hook, atomic_write, fsync_dir
from runner.store._journal_row import JournalRow
from runner.store._keys import Ed25519PrivateKey, encode_public_key
from runner.store._keys import sign as _sign
from runner.store.merkle import Accumulator, inclusion_proof, leaf_hash

__all__ = ["DEFAULT_BUSY_TIMEOUT_S", "Record", "Store"]

DEFAULT_BUSY_TIMEOUT_S = 10.0


def _no_hook(point: str) -> None:
    return None


@dataclass(frozen=True)
class Record:
    """One committed record. ``leaf``/``chain`` are raw 32-byte hashes."""

    seq: int
    body: dict[str, Any]
    leaf: bytes
    chain: bytes

    @property
    def digest(self) -> str:
        """``digest("ect/record/v1", body)``: the record body's domain-separated digest."""
        return digest_bytes("ect/record/v1", canonical_bytes(self.body))


class Store:
    """An open run store. Build with :meth:`create` or :meth:`open`; use as a context manager.

    One connection per Store, serialised by a lock, so a Store may be shared between threads;
    several processes may append to one file (``BEGIN IMMEDIATE`` serialises them).
    """

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        checked: CheckResult,
        signing_key: Ed25519PrivateKey | None,
        hook: Hook,
    ) -> None:
        self._path = path
        self._conn = conn
        self._db = wrap(conn)
        self._header = checked.header
        self._store_id = checked.store_id
        self._public_key = checked.public_key
        self._key = signing_key
        self._hook = hook
        self._lock = threading.RLock()
        self._acc = Accumulator()
        self._closed = False

    # ---- construction -------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        header: dict[str, Any],
        signing_key: Ed25519PrivateKey,
        journal: Journal = "wal",
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        hook: Hook | None = None,
        blobs: Sequence[bytes] = (),
    ) -> Store:
        """Create a new store at ``path`` with record 0 = the header, and a first checkpoint.

        ``blobs`` are stored in the same transaction as the header, so a header that names
        blobs (``lock_blob``, ``preflight_blob``) never exists without them, whenever the
        process dies.

        ``header`` must hold ``lock_digest`` and ``preflight_digest`` (sha256 digests); it must
        not use the reserved keys ``format``, ``store_id``, ``public_key``, ``journal``,
        ``created_utc``, which the store fills in. ``journal="rollback"`` selects the
        documented fallback (rollback journal, ``synchronous=EXTRA``) for filesystems where
        WAL cannot work; it is recorded in the header and never chosen silently.

        Raises:
            StoreUsageError: the path exists or the header is unusable.
            StoreError: a pragma could not be set (e.g. WAL unavailable).
        """
        if not isinstance(header, dict):
            raise TypeError("header must be a dict")
        if not isinstance(signing_key, Ed25519PrivateKey):
            raise TypeError("signing_key must be an Ed25519PrivateKey (see load_signing_key)")
        clash = [k for k in HEADER_RESERVED if k in header]
        if clash:
            raise StoreUsageError(f"header uses reserved keys: {', '.join(clash)}")
        for k in HEADER_REQUIRED:
            if not is_digest(header.get(k)):
                raise StoreUsageError(f"header.{k} must be a sha256 digest string")
        target = Path(path)
        if target.exists():
            raise StoreUsageError(f"{target} already exists; a store is never overwritten")
        if checkpoint_path(target).exists():
            raise StoreUsageError(f"{checkpoint_path(target)} already exists")
        record0 = {
            **header,
            "format": FORMAT_VERSION,
            "store_id": secrets.token_hex(16),
            "public_key": encode_public_key(signing_key.public_key()),
            "journal": journal,
            "created_utc": utc_now(),
        }
        body = canonical_bytes(record0)
        sid = bytes.fromhex(record0["store_id"])
        leaf = leaf_hash(body)
        chain = chain_hash(sid, 0, GENESIS, leaf)
        # Built under a temporary name and renamed, so `path` never names a half-made store.
        tmp = target.parent / f".{target.name}.creating-{secrets.token_hex(4)}"
        conn = connect(tmp, busy_timeout_s=busy_timeout_s)
        try:
            configure(conn, tmp, journal=journal, busy_timeout_s=busy_timeout_s)
            db = wrap(conn)
            conn.execute("BEGIN IMMEDIATE")
            create_schema(db)
            conn.execute(
                "INSERT INTO records (seq, body, leaf, chain) VALUES (0, ?, ?, ?)",
                (body, leaf, chain),
            )
            for data in blobs:
                raw = bytes(data)
                conn.execute(
                    "INSERT INTO blobs (digest, data) VALUES (?, ?) ON CONFLICT(digest) DO NOTHING",
                    (raw_digest(raw), raw),
                )
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            conn.close()
            _unlink_db(tmp)
            raise translate(e, target) from e
        except BaseException:
            conn.close()
            _unlink_db(tmp)
            raise
        conn.close()  # the last close folds the WAL into the file before the rename
        try:
            os.replace(tmp, target)
        except BaseException:
            _unlink_db(tmp)
            raise
        fsync_dir(target.parent)
        store = cls.open(
            target,
            signing_key=signing_key,
            journal=journal,
            busy_timeout_s=busy_timeout_s,
            hook=hook,
            _fresh=True,
        )
        store.checkpoint()
        return store

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        signing_key: Ed25519PrivateKey | None = None,
        journal: Journal | None = None,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        hook: Hook | None = None,
        readonly: bool = False,
        _fresh: bool = False,
    ) -> Store:
        """Open an existing store and verify it (quick: chains, heads, checkpoints).

        ``journal`` defaults to the mode recorded in the header; naming a different one is
        refused. Resume may only continue a store that opens. ``readonly=True`` is for commands
        that only read (show, proof, reports, replay): it works on read-only media too (see
        :func:`runner.store._db.connect`), and every write through it fails.

        Raises:
            StoreDamaged (TamperDetected, TruncationDetected, CheckpointMissing, ...): the
                store does not verify; nothing is changed.
            SignatureInvalid: ``signing_key`` is not the store's key.
            StoreUsageError: ``journal`` disagrees with the store's mode.
            StoreUnavailable: the file cannot be opened (see :func:`runner.store._db.connect`).
        """
        target = Path(path)
        if not target.is_file():
            raise FileNotFoundError(2, "No such store", os.fspath(target))
        try:
            conn = connect(target, busy_timeout_s=busy_timeout_s, readonly=readonly)
        except sqlite3.Error as e:
            raise translate(e, target) from e
        try:
            try:
                row = conn.execute("SELECT body FROM records WHERE seq = 0").fetchone()
            except (sqlite3.Error, UnicodeDecodeError) as e:
                raise unreadable(e, target) from e
            if row is None:
                parse_header(b"")  # raises the header error
            header, _, _ = parse_header(row[0])
            mode = header["journal"]
            if journal is not None and journal != mode:
                raise StoreUsageError(
                    f"{target} was created with journal={mode!r}; refusing to open it as {journal!r}"
                )
            configure(
                conn, target, journal=mode, busy_timeout_s=busy_timeout_s, readonly=readonly
            )
            checked = check_connection(
                conn,
                target,
                full=False,
                external=checkpoint_path(target),
                require_external=not _fresh,
            )
            if signing_key is not None and encode_public_key(
                signing_key.public_key()
            ) != encode_public_key(checked.public_key):
                raise SignatureInvalid("the signing key is not this store's key", seq=0)
        except BaseException:
            conn.close()
            raise
        return cls(target, conn, checked, signing_key, hook or _no_hook)

    # ---- plumbing -----------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _live(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreUsageError(f"{self._path}: the store is closed")
        return self._conn

    def _begin(self) -> None:
        try:
            self._live().execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise translate(e, self._path) from e

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the original error matters more; the connection discards the txn

    def _commit(self) -> None:
        self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``. Any error rolls back without masking the original
        (sqlite errors are translated into the store's own); the write is acknowledged only once
        the block's ``COMMIT`` has returned."""
        self._begin()
        try:
            yield
            self._commit()
        except sqlite3.Error as e:
            self._rollback()
            raise translate(e, self._path) from e
        except BaseException:
            self._rollback()
            raise

    # ---- reading ------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def header(self) -> dict[str, Any]:
        """Record 0's body: the caller's header plus format, store_id, public_key, journal."""
        return dict(self._header)

    @property
    def store_id(self) -> str:
        return self._store_id.hex()

    @property
    def public_key(self) -> str:
        """``ed25519:<base64>`` of the store's checkpoint key."""
        return encode_public_key(self._public_key)

    @property
    def count(self) -> int:
        """Number of committed records, the header included."""
        return self.head[0] + 1

    @property
    def head(self) -> tuple[int, str]:
        """``(seq, chain hash hex)`` of the last committed record."""
        with self._lock:
            try:
                row = (
                    self._live()
                    .execute("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1")
                    .fetchone()
                )
            except sqlite3.Error as e:
                raise translate(e, self._path) from e
        return int(row[0]), bytes(row[1]).hex()

    def records(self, start: int = 1) -> Iterator[Record]:
        """Committed records from ``start`` on, in order (bodies parsed strictly)."""
        seq = start
        while True:
            with self._lock:
                try:
                    rows = (
                        self._live()
                        .execute(
                            "SELECT seq, body, leaf, chain FROM records WHERE seq >= ? "
                            "ORDER BY seq LIMIT 512",
                            (seq,),
                        )
                        .fetchall()
                    )
                except sqlite3.Error as e:
                    raise translate(e, self._path) from e
            if not rows:
                return
            for s, body, leaf, chain in rows:
                yield Record(int(s), _parse_body(int(s), body), bytes(leaf), bytes(chain))
            seq = rows[-1][0] + 1

    def record(self, seq: int) -> Record:
        """The record with sequence number ``seq``.

        Raises:
            StoreUsageError: no such record.
        """
        for rec in self.records(seq):
            if rec.seq == seq:
                return rec
            break
        raise StoreUsageError(f"{self._path}: no record {seq} (store holds {self.count})")

    def leaves(self, size: int | None = None) -> list[bytes]:
        """Leaf hashes of records ``0..size-1`` (all when None)."""
        with self._lock:
            rows = self._live().execute("SELECT leaf FROM records ORDER BY seq").fetchall()
        leaves = [bytes(r[0]) for r in rows]
        return leaves if size is None else leaves[:size]

    def inclusion_proof(self, seq: int, size: int | None = None) -> dict[str, Any]:
        """RFC 9162 inclusion proof of record ``seq`` in the tree of the first ``size`` records.

        ``size`` defaults to the latest signed checkpoint's size when it covers ``seq`` (so the
        proof checks against a signed root), else to the current count.
        """
        latest = self.latest_checkpoint()
        if size is None:
            if latest is not None and seq < latest["checkpoint"]["size"]:
                size = latest["checkpoint"]["size"]
            else:
                size = self.count
        leaves = self.leaves(size)
        if not 0 <= seq < len(leaves):
            raise StoreUsageError(f"no record {seq} in a tree of size {len(leaves)}")
        acc = Accumulator()
        for leaf in leaves:
            acc.append(leaf)
        signed = latest is not None and latest["checkpoint"]["size"] == size
        return {
            "seq": seq,
            "tree_size": size,
            "leaf": leaves[seq].hex(),
            "root": acc.root().hex(),
            "proof": [p.hex() for p in inclusion_proof(leaves, seq)],
            "checkpoint": latest if signed else None,
        }

    # ---- appending ----------------------------------------------------------------------

    def append(self, body: dict[str, Any]) -> int:
        """Append one record; return its sequence number only after COMMIT.

        Raises:
            FormatError: ``body`` is not canonical-JSON representable.
            StoreBusy: another writer held the lock past the busy timeout (not appended).
        """
        return self.append_batch([body])[0]

    def append_batch(self, bodies: Sequence[dict[str, Any]]) -> list[int]:
        """Append several records in one transaction (all or none); return their seqs."""
        prepared = []
        for body in bodies:
            if not isinstance(body, dict):
                raise TypeError("a record body must be a dict")
            data = canonical_bytes(body)
            prepared.append((data, leaf_hash(data)))
        if not prepared:
            return []
        sid = self._store_id
        with self._lock:
            self._hook("append.before_begin")
            with self._transaction():
                conn = self._conn
                seq, prev = conn.execute(
                    "SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                rows = []
                seqs = []
                for data, leaf in prepared:
                    seq += 1
                    prev = chain_hash(sid, seq, prev, leaf)
                    rows.append((seq, data, leaf, prev))
                    seqs.append(seq)
                if len(rows) == 1:
                    conn.execute(
                        "INSERT INTO records (seq, body, leaf, chain) VALUES (?, ?, ?, ?)", rows[0]
                    )
                else:
                    conn.executemany(
                        "INSERT INTO records (seq, body, leaf, chain) VALUES (?, ?, ?, ?)", rows
                    )
                self._hook("append.after_insert")
            self._hook("append.after_commit")
        return seqs

    # ---- attempt journal ----------------------------------------------------------------

    def _append_attempt(self, kind: str, ref: int | None, cell_id: str, body: bytes,
                        blobs: Sequence[bytes] = ()) -> int:
        leaf = leaf_hash(body)
        prepared = [(raw_digest(bytes(b)), bytes(b)) for b in blobs]
        with self._lock:
            with self._transaction():
                conn = self._conn
                if prepared:
                    conn.executemany(
                        "INSERT INTO blobs (digest, data) VALUES (?, ?) "
                        "ON CONFLICT(digest) DO NOTHING", prepared)
                if ref is not None:
                    row = conn.execute(
                        "SELECT kind, cell_id FROM attempts WHERE seq = ?", (ref,)
                    ).fetchone()
                    if row is None or row[0] != "begin":
                        raise AttemptError(f"attempt {ref} was never begun")
                    if conn.execute(
                        "SELECT 1 FROM attempts WHERE kind = 'end' AND ref = ?", (ref,)
                    ).fetchone():
                        raise AttemptError(f"attempt {ref} has already ended")
                last = conn.execute(
                    "SELECT seq, chain FROM attempts ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                seq, prev = (last[0] + 1, last[1]) if last else (0, GENESIS)
                chain = attempt_chain_hash(self._store_id, seq, prev, leaf)
                conn.execute(
                    "INSERT INTO attempts (seq, kind, ref, cell_id, body, leaf, chain) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (seq, kind, ref, cell_id, body, leaf, chain),
                )
        return seq

    def attempt_begin(self, entry: dict[str, Any]) -> int:
        """Journal a provider attempt BEFORE it is sent; returns its attempt seq (durable).

        ``entry`` must carry ``cell_id`` (str); the rest is the caller's (request digest, ...).
        """
        if not isinstance(entry, dict) or not isinstance(entry.get("cell_id"), str):
            raise TypeError("an attempt entry must be a dict with a string cell_id")
        cell_id = entry["cell_id"]
        body = canonical_bytes({"kind": "begin", "cell_id": cell_id, "entry": entry})
        return self._append_attempt("begin", None, cell_id, body)

    def attempt_end(self, attempt_seq: int, entry: dict[str, Any], *,
                    blobs: Sequence[bytes] = ()) -> int:
        """Journal the end of attempt ``attempt_seq``; returns the end entry's seq. ``blobs``
        (the response bytes, say) are stored in the same transaction, under their digests.

        Raises:
            AttemptError: no such begun attempt, or it already ended.
        """
        if not isinstance(entry, dict):
            raise TypeError("an attempt entry must be a dict")
        if not isinstance(attempt_seq, int) or isinstance(attempt_seq, bool):
            raise TypeError("attempt_seq must be an int")
        with self._lock:
            row = (
                self._live()
                .execute(
                    "SELECT cell_id FROM attempts WHERE seq = ? AND kind = 'begin'", (attempt_seq,)
                )
                .fetchone()
            )
            if row is None:
                raise AttemptError(f"attempt {attempt_seq} was never begun")
            cell_id = row[0]
            body = canonical_bytes(
                {"kind": "end", "cell_id": cell_id, "begin_seq": attempt_seq, "entry": entry}
            )
            return self._append_attempt("end", attempt_seq, cell_id, body, blobs)

    def attempts(self) -> list[JournalRow]:
        """Every attempt, in begin order, with its end entry (``None`` while it has not
        ended)."""
        with self._lock:
            rows = (
                self._live()
                .execute("SELECT seq, kind, ref, body FROM attempts ORDER BY seq")
                .fetchall()
            )
        begins: dict[int, tuple[str, JsonObject]] = {}
        ends: dict[int, tuple[JsonObject, int]] = {}
        for seq, kind, ref, body in rows:
            try:
                obj = loads_strict(body)
            except FormatError as e:
                raise AttemptJournalDamaged(
                    f"attempt {seq}: body is not valid JSON ({e}); run `ect store verify "
                    "--full`", seq=seq) from e
            if not (isinstance(obj, dict) and isinstance(obj.get("cell_id"), str)
                    and isinstance(obj.get("entry"), dict)):
                raise AttemptJournalDamaged(
                    f"attempt {seq}: not a journal entry; run `ect store verify --full`",
                    seq=seq)
            if kind == "begin":
                begins[seq] = (obj["cell_id"], obj["entry"])
            elif ref in begins:
                ends[ref] = (obj["entry"], seq)
        return [JournalRow(seq, cell_id, begin, *ends.get(seq, (None, None)))
                for seq, (cell_id, begin) in begins.items()]

    def orphan_attempts(self, committed: Collection[str]) -> list[JournalRow]:
        """Attempts (ended or not) whose ``cell_id`` is not in ``committed``, the caller's ids of
        the cells its committed records hold (the store reads no field of a record body):
        calls that were made, and possibly paid for, by a trajectory that never committed."""
        done = set(committed)
        return [a for a in self.attempts() if a.cell_id not in done]

    # ---- blobs --------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` under ``"sha256:" + hex(sha256(data))`` (idempotent); return it."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError("blob data must be bytes")
        raw = bytes(data)
        digest = raw_digest(raw)
        with self._lock:
            with self._transaction():
                self._conn.execute(
                    "INSERT INTO blobs (digest, data) VALUES (?, ?) ON CONFLICT(digest) DO NOTHING",
                    (digest, raw),
                )
        return digest

    def put_blobs(self, blobs: Sequence[bytes]) -> list[str]:
        """Store several blobs in one transaction (all or none); return their digests in order.
        The same as calling :meth:`put_blob` for each, with one commit instead of one each."""
        prepared: list[tuple[str, bytes]] = []
        for data in blobs:
            if not isinstance(data, bytes | bytearray | memoryview):
                raise TypeError("blob data must be bytes")
            raw = bytes(data)
            prepared.append((raw_digest(raw), raw))
        if not prepared:
            return []
        with self._lock:
            with self._transaction():
                self._conn.executemany(
                    "INSERT INTO blobs (digest, data) VALUES (?, ?) ON CONFLICT(digest) DO NOTHING",
                    prepared,
                )
        return [d for d, _ in prepared]

    def get_blob(self, digest: str) -> bytes:
        """The bytes stored under ``digest``, re-hashed before they are returned.

        Raises:
            BlobNotFound: nothing stored under ``digest``.
            BlobCorrupt: the stored bytes do not hash to ``digest``.
        """
        if not is_digest(digest):
            raise BlobNotFound(f"{digest!r} is not a sha256 digest")
        with self._lock:
            row = (
                self._live()
                .execute("SELECT data FROM blobs WHERE digest = ?", (digest,))
                .fetchone()
            )
        if row is None:
            raise BlobNotFound(f"no blob {digest}")
        data = bytes(row[0])
        if raw_digest(data) != digest:
            raise BlobCorrupt(f"blob {digest} does not match its bytes")
        return data

    # ---- checkpoints --------------------------------------------------------------------

    def latest_checkpoint(self) -> dict[str, Any] | None:
        """The newest checkpoint recorded in the store (signed note), or None."""
        with self._lock:
            row = (
                self._live()
                .execute("SELECT body FROM checkpoints ORDER BY id DESC LIMIT 1")
                .fetchone()
            )
        return None if row is None else parse_checkpoint(loads_strict(row[0])).to_json()

    def checkpoint(self) -> dict[str, Any]:
        """Sign the current state and record it: first the external ``<path>.checkpoint``
        (atomic: temp, fsync, rename, fsync dir), then a row in the store. Holds the write lock
        throughout, so the external file is never older than the newest stored checkpoint
        except by a crash after the rename (which verification accepts).

        Raises:
            StoreUsageError: the store was opened without its signing key.
        """
        if self._key is None:
            raise StoreUsageError(
                "checkpoint needs the store's signing key (open with signing_key)"
            )
        with self._lock:
            with self._transaction():
                conn = self._conn
                rows = conn.execute(
                    "SELECT leaf FROM records WHERE seq >= ? ORDER BY seq", (self._acc.size,)
                ).fetchall()
                for (leaf,) in rows:
                    self._acc.append(bytes(leaf))
                size, head = conn.execute(
                    "SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                size += 1
                if size != self._acc.size:
                    raise StoreUsageError(f"{self._path}: record numbering is not contiguous")
                last = conn.execute(
                    "SELECT seq, chain FROM attempts ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                asize, ahead = (last[0] + 1, bytes(last[1])) if last else (0, GENESIS)
                note = make_checkpoint(
                    self._key,
                    store_id=self.store_id,
                    size=size,
                    root=self._acc.root(),
                    chain_head=bytes(head),
                    attempts_size=asize,
                    attempts_head=ahead,
                )
                data = canonical_bytes(note)
                atomic_write(checkpoint_path(self._path), data, hook=self._hook, point="checkpoint")
                conn.execute("INSERT INTO checkpoints (body) VALUES (?)", (data,))
            self._hook("checkpoint.after_commit")
        return note

    def sign(self, message: bytes) -> str:
        """Sign ``message`` with the store's key (used by manifest export)."""
        if self._key is None:
            raise StoreUsageError("signing needs the store's signing key (open with signing_key)")
        return _sign(self._key, message)


def _parse_body(seq: int, body: bytes) -> dict[str, Any]:
    """A record body, parsed strictly; a body that does not parse was altered after commit
    (quick verification trusts the stored leaves), so it is reported as tampering at ``seq``."""
    try:
        obj = loads_strict(body)
    except FormatError as e:
        raise TamperDetected(
            f"record {seq} body is not valid JSON ({e})", seq=seq
        ) from e
    if not isinstance(obj, dict):
        raise TamperDetected(f"record {seq} body is not a JSON object",
                             seq=seq)
    return obj


def _unlink_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(os.fspath(path) + suffix).unlink(missing_ok=True)
