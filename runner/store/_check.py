"""The verification steps shared by ``Store.open``, :func:`verify_store`, salvage and manifests.

Numbered as in docs/store.md ("Verification"). Each step raises the typed
:class:`~runner.store.StoreDamaged` subclass naming the first bad sequence number.
"""

from __future__ import annotations

import os
import re
import sqlite3
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from hashlib import sha256 as _sha256
from itertools import repeat
from pathlib import Path
from typing import Any

from runner.canonical import InputRefused, is_digest, loads_strict, raw_digest, read_bounded
from runner.errors import EctError, FormatError
from runner.store._checkpoint import Checkpoint, parse_checkpoint
from runner.store._db import (
    FORMAT_VERSION,
    GENESIS,
    JOURNAL_MODES,
    attempt_chain_hash,
    chain_hash,
    check_identity,
    schema_differences,
    unreadable,
)
from runner.store._errors import (
    AttemptJournalDamaged,
    BlobCorrupt,
    CheckpointMissing,
    FileCorrupt,
    KeyFileError,
    NotAStore,
    SignatureInvalid,
    StaleCheckpoint,
    StoreUsageError,
    TamperDetected,
    TruncationDetected,
)
from runner.store._keys import Ed25519PublicKey, decode_public_key, encode_public_key
from runner.store.merkle import Accumulator, leaf_hash

__all__ = [
    "HEADER_RESERVED",
    "CheckResult",
    "check_connection",
    "checkpoint_path",
    "parse_header",
    "read_external_checkpoint",
]

HEADER_RESERVED = ("format", "store_id", "public_key", "journal", "created_utc")
HEADER_REQUIRED = ("lock_digest", "preflight_digest")
MAX_CHECKPOINT_BYTES = 64 * 1024  # a checkpoint note is about 500 bytes
_HEX32 = re.compile(r"\A[0-9a-f]{32}\Z")


def checkpoint_path(path: str | os.PathLike[str]) -> Path:
    """The external checkpoint file of the store at ``path``: ``<path>.checkpoint``."""
    return Path(os.fspath(path) + ".checkpoint")


@dataclass
class CheckResult:
    header: dict[str, Any]
    store_id: bytes
    public_key: Ed25519PublicKey
    count: int = 0
    head: bytes = GENESIS
    root: bytes | None = None
    attempts_count: int = 0
    attempts_head: bytes = GENESIS
    latest: Checkpoint | None = None
    external: Checkpoint | None = None
    checkpoints: list[Checkpoint] = field(default_factory=list)


def parse_header(body: bytes) -> tuple[dict[str, Any], bytes, Ed25519PublicKey]:
    """Parse record 0. Raises TamperDetected / NotAStore naming seq 0."""
    try:
        header = loads_strict(body)
    except FormatError as e:
        raise TamperDetected(f"record 0 (header) is not valid JSON: {e}", seq=0) from e
    if not isinstance(header, dict):
        raise TamperDetected("record 0 (header) is not a JSON object", seq=0)
    if header.get("format") != FORMAT_VERSION:
        raise NotAStore(f"store format {header.get('format')!r} is not {FORMAT_VERSION!r}", seq=0)
    sid = header.get("store_id")
    if not isinstance(sid, str) or not _HEX32.match(sid):
        raise TamperDetected("record 0 (header): store_id is not 32 hex digits", seq=0)
    if header.get("journal") not in JOURNAL_MODES:
        raise TamperDetected("record 0 (header): unknown journal mode", seq=0)
    for k in HEADER_REQUIRED:
        if not is_digest(header.get(k)):
            raise TamperDetected(f"record 0 (header): {k} is not a sha256 digest", seq=0)
    try:
        key = decode_public_key(header.get("public_key"))  # type: ignore[arg-type]
    except KeyFileError as e:
        raise TamperDetected(f"record 0 (header): {e}", seq=0) from e
    return header, bytes.fromhex(sid), key


def read_external_checkpoint(path: Path) -> Checkpoint | None:
    """Parse the checkpoint file at ``path``; None when absent. Malformed -> SignatureInvalid."""
    try:
        data = read_bounded(path, limit=MAX_CHECKPOINT_BYTES, what="checkpoint")
    except FileNotFoundError:
        return None
    except InputRefused as e:
        if not e.too_large:  # a FIFO or a device: never read, never waited on
            raise StoreUsageError(str(e)) from e
        raise SignatureInvalid(f"{path} is not a valid signed checkpoint: {e}") from e
    except OSError as e:
        raise StoreUsageError(f"cannot read checkpoint {path}: {e.strerror}") from e
    try:
        return parse_checkpoint(loads_strict(data))
    except FormatError as e:
        raise SignatureInvalid(f"{path} is not a valid signed checkpoint: {e}") from e


def _parse_db_checkpoint(row_id: int, body: bytes) -> Checkpoint:
    try:
        return parse_checkpoint(loads_strict(body))
    except FormatError as e:
        raise TamperDetected(f"stored checkpoint {row_id} is malformed: {e}") from e


def check_connection(
    conn: sqlite3.Connection,
    path: str | os.PathLike[str],
    *,
    full: bool,
    public_key: Ed25519PublicKey | None = None,
    external: Path | None = None,
    require_external: bool = True,
    reopen: Callable[[], sqlite3.Connection] | None = None,
) -> CheckResult:
    """Verify the store behind ``conn``; raise the first damage found, else describe it.

    Quick (``full=False``): steps 1-3, 5-7 over stored leaves: the chain links, the latest
    stored checkpoint and the external checkpoint (signatures and chain head), both journals.
    Full adds step 0 (SQLite integrity_check), re-hashes every body, recomputes the Merkle root at
    every checkpoint, checks every stored checkpoint's signature and every blob (step 8).

    ``reopen`` opens another read-only connection to the same file. With it, full verification
    runs step 0 on that connection in a thread while this one makes the other steps (SQLite
    works without the GIL), and still reports what the steps in order would: when step 0 finds
    damage, that is the error, whatever the later steps found.
    """
    try:
        if not (full and reopen is not None):
            return _check(conn, path, full, public_key, external, require_external, True)
        step0 = _IntegrityCheck(reopen)
        step0.start()
        try:
            res = _check(conn, path, full, public_key, external, require_external, False)
        except Exception:
            step0.settle(conn, path)
            raise
        step0.settle(conn, path)
        return res
    except (sqlite3.Error, UnicodeDecodeError) as e:
        raise unreadable(e, path) from e


def _integrity_check(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> None:
    """Step 0: SQLite's integrity_check (not quick_check: it also proves every index matches
    its table)."""
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    if rows != ["ok"]:
        raise FileCorrupt(f"{path}: SQLite integrity_check: {'; '.join(map(str, rows[:3]))}")


class _IntegrityCheck(threading.Thread):
    """Step 0 on a connection of its own, beside the other steps."""

    def __init__(self, reopen: Callable[[], sqlite3.Connection]) -> None:
        super().__init__(name="ect-store-integrity-check", daemon=True)
        self._reopen = reopen
        self._opened = False
        self._rows: list[Any] = []
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = self._reopen()
        except BaseException:  # no second connection: settle() checks on the first one
            return
        self._opened = True
        try:
            self._rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        except BaseException as e:  # raised by settle(), in the caller's thread
            self._error = e
        finally:
            conn.close()

    def settle(self, conn: sqlite3.Connection, path: str | os.PathLike[str]) -> None:
        """Wait for step 0 and raise what it found (as the first step would have)."""
        self.join()
        if not self._opened:
            _integrity_check(conn, path)
        elif self._error is not None:
            raise self._error
        elif self._rows != ["ok"]:
            raise FileCorrupt(
                f"{path}: SQLite integrity_check: {'; '.join(map(str, self._rows[:3]))}"
            )


def _check(
    conn: sqlite3.Connection,
    path: str | os.PathLike[str],
    full: bool,
    public_key: Ed25519PublicKey | None,
    external: Path | None,
    require_external: bool,
    step0: bool,
) -> CheckResult:
    # 0. The file itself (full only: costs a pass over every page and index), unless a thread
    # of check_connection does it beside the other steps.
    if full and step0:
        _integrity_check(conn, path)
    check_identity(conn, path)
    # 1. Schema: exactly the tables, index and append-only triggers a new store has.
    diffs = schema_differences(conn)
    if diffs:
        raise TamperDetected(f"{path}: schema altered: {', '.join(diffs[:4])}")
    # 2. Header (record 0): format, store id, key; its leaf and chain link.
    row = conn.execute("SELECT seq, body, leaf, chain FROM records ORDER BY seq LIMIT 1").fetchone()
    if row is None or row[0] != 0:
        raise TamperDetected("record 0 (header) is missing", seq=0)
    _, hbody, hleaf, hchain = row
    header, sid, hkey = parse_header(hbody)
    if leaf_hash(hbody) != hleaf:
        raise TamperDetected("record 0 (header): body does not match its leaf hash", seq=0)
    if chain_hash(sid, 0, GENESIS, hleaf) != hchain:
        raise TamperDetected("record 0 (header): chain link does not verify", seq=0)
    if public_key is not None and encode_public_key(public_key) != header["public_key"]:
        raise SignatureInvalid("the store was created for a different public key", seq=0)
    key = public_key or hkey
    res = CheckResult(header=header, store_id=sid, public_key=key)

    # 3. Stored checkpoints: well-formed, this store's, signed (all in full, the latest quick).
    stored = [
        (rid, _parse_db_checkpoint(rid, body))
        for rid, body in conn.execute("SELECT id, body FROM checkpoints ORDER BY id")
    ]
    prev_cp: Checkpoint | None = None
    for i, (rid, cp) in enumerate(stored):
        if cp.store_id != header["store_id"]:
            raise TamperDetected(f"stored checkpoint {rid} belongs to another store")
        if (full or i == len(stored) - 1) and not cp.signed_by(key):
            raise SignatureInvalid(f"stored checkpoint {rid} (size {cp.size}) signature is invalid")
        if prev_cp is not None and (
            cp.size < prev_cp.size or cp.attempts_size < prev_cp.attempts_size
        ):
            raise TamperDetected(f"stored checkpoint {rid} is older than the one before it")
        if cp.size < 1:
            raise TamperDetected(f"stored checkpoint {rid} covers no records")
        prev_cp = cp
    res.checkpoints = [cp for _, cp in stored]
    res.latest = stored[-1][1] if stored else None

    # 4. External checkpoint: present, this store's, signed, not older than the stored ones.
    ext = read_external_checkpoint(external) if external is not None else None
    if ext is None and require_external:
        raise CheckpointMissing(
            f"no external checkpoint {external}: truncation cannot be ruled out"
        )
    if ext is not None:
        if ext.store_id != header["store_id"]:
            raise TamperDetected(f"{external} is the checkpoint of another store")
        if not ext.signed_by(key):
            raise SignatureInvalid(f"{external}: checkpoint signature is invalid for this key")
        if res.latest is not None and (
            ext.size < res.latest.size or ext.attempts_size < res.latest.attempts_size
        ):
            raise StaleCheckpoint(
                f"{external} covers {ext.size} records but the store recorded a checkpoint of "
                f"{res.latest.size}: an older checkpoint was substituted",
                seq=ext.size,
            )
    res.external = ext

    # 5. Records 1..: contiguous, each leaf (full) and chain link; heads at checkpoint sizes.
    anchors = [cp for cp in (res.checkpoints if full else [res.latest]) if cp is not None]
    if ext is not None:
        anchors.append(ext)
    want = {cp.size for cp in anchors}
    chains_at: dict[int, bytes] = {1: hchain}
    roots_at: dict[int, bytes] = {}
    acc = Accumulator() if full else None
    if acc is not None:
        acc.append(hleaf)
        if 1 in want:
            roots_at[1] = acc.root()
    scan = _Scan(sid, hchain, full, want, chains_at, roots_at, acc)
    scan.run(conn)
    expected, prev = scan.expected, scan.prev
    res.count, res.head = expected, prev
    if acc is not None:
        res.root = acc.root()

    # 6. Attempt journal: contiguous, own chain; bodies re-hashed and columns match (full).
    aprev, aexpected = GENESIS, 0
    if full:
        acur = conn.execute(
            "SELECT seq, leaf, chain, body, kind, ref, cell_id FROM attempts ORDER BY seq"
        )
    else:
        acur = conn.execute("SELECT seq, leaf, chain FROM attempts ORDER BY seq")
    begun: set[int] = set()
    for r in acur:
        seq, leaf, chain = r[0], r[1], r[2]
        if seq != aexpected:
            raise AttemptJournalDamaged(f"attempt {aexpected} is missing", seq=aexpected)
        if full:
            if leaf_hash(r[3]) != leaf:
                raise AttemptJournalDamaged(f"attempt {seq}: body does not match its leaf", seq=seq)
            _check_attempt_columns(seq, r[3], r[4], r[5], r[6], begun)
        if attempt_chain_hash(sid, seq, aprev, leaf) != chain:
            raise AttemptJournalDamaged(f"attempt {seq}: chain link does not verify", seq=seq)
        aprev = chain
        aexpected += 1
    res.attempts_count, res.attempts_head = aexpected, aprev

    # 7. Every anchor checkpoint against what the store holds.
    for cp in anchors:
        if cp.size > res.count:
            raise TruncationDetected(
                f"a signed checkpoint covers {cp.size} records but the store holds {res.count}",
                seq=res.count,
            )
        if chains_at.get(cp.size) != cp.chain_head:
            raise TamperDetected(
                f"chain head at size {cp.size} differs from the signed checkpoint "
                "(history rewritten at or before this record)",
                seq=cp.size - 1,
            )
        if full and roots_at.get(cp.size) != cp.root:
            raise TamperDetected(
                f"Merkle root of the first {cp.size} records differs from the signed checkpoint",
                seq=cp.size - 1,
            )
        if cp.attempts_size > res.attempts_count:
            raise TruncationDetected(
                f"a signed checkpoint covers {cp.attempts_size} attempts but the journal holds "
                f"{res.attempts_count}",
                seq=res.attempts_count,
            )
    _check_attempt_heads(conn, anchors, res)

    # 8. Blobs (full): every blob the header names exists, and every blob hashes to its digest.
    if full:
        for k, v in sorted(header.items()):
            if k.endswith("_blob") and is_digest(v):
                if conn.execute("SELECT 1 FROM blobs WHERE digest = ?", (v,)).fetchone() is None:
                    raise BlobCorrupt(
                        f"record 0 (header): {k} names blob {v}, which the store does not hold",
                        seq=0,
                    )
        for digest, data in conn.execute("SELECT digest, data FROM blobs"):
            if digest != raw_digest(data):
                raise BlobCorrupt(f"blob {digest} does not match its bytes")
    return res


_RECORDS_BATCH = 8192
"""Records verified per batch: each batch is hashed in a few passes over whole columns."""
_link = struct.Struct(">17sQ32s32s").pack
"""The preimage of :func:`chain_hash` (0x02 || store_id || u64be(seq) || prev || leaf) in one
call; exact when prev and leaf are 32 bytes (``s`` pads or cuts), which the caller checks."""
_hash_digest = type(_sha256()).digest


class _Scan:
    """Step 5: the records after the header, in seq order, in batches.

    A batch is checked with whole-column passes (one ``map`` per hash, no Python code per
    record): seqs contiguous, every body against its leaf (full), every chain link, then the
    Merkle tree extended by the batch. A batch that fails any of those -- or that cannot even be
    read -- is checked again one record at a time by :meth:`_one_by_one`, the reference order,
    which raises the error for the first bad record. So a damaged store gets exactly the
    report of a record-by-record check, and an intact one never pays for it.
    """

    def __init__(
        self,
        sid: bytes,
        hchain: bytes,
        full: bool,
        want: set[int],
        chains_at: dict[int, bytes],
        roots_at: dict[int, bytes],
        acc: Accumulator | None,
    ) -> None:
        self.sid, self.full, self.want = sid, full, want
        self.chains_at, self.roots_at, self.acc = chains_at, roots_at, acc
        self.prev, self.expected = hchain, 1
        self._link_prefix = b"\x02" + sid

    def run(self, conn: sqlite3.Connection) -> None:
        cols = "seq, leaf, chain, body" if self.full else "seq, leaf, chain"
        try:
            cur = conn.execute(f"SELECT {cols} FROM records WHERE seq >= 1 ORDER BY seq")
            while rows := cur.fetchmany(_RECORDS_BATCH):
                if not self._batch(rows):
                    self._one_by_one(rows)
        except (sqlite3.Error, UnicodeDecodeError):
            # A row that cannot be read: read again one at a time from the first record not yet
            # verified, so a bad record before the unreadable one is reported first, as it is
            # when reading record by record.
            self._one_by_one(conn.execute(
                f"SELECT {cols} FROM records WHERE seq >= ? ORDER BY seq", (self.expected,)
            ))

    def _batch(self, rows: list[Any]) -> bool:
        """Verify a whole batch; True and the state advanced, or False and nothing changed."""
        start, n = self.expected, len(rows)
        try:
            cols = tuple(zip(*rows, strict=True))
            seqs, leaves, chains = cols[0], cols[1], cols[2]
            if seqs != tuple(range(start, start + n)):
                return False
            if self.full and tuple(
                map(_hash_digest, map(_sha256, map(b"\x00".__add__, cols[3])))
            ) != leaves:
                return False
            # The link preimages, packed in one call each: exact only for 32-byte values.
            if len(self.prev) != 32 or set(map(len, leaves)) != {32} or set(
                map(len, chains)
            ) != {32}:
                return False
            links = map(_link, repeat(self._link_prefix), seqs, (self.prev, *chains[:-1]), leaves)
            if tuple(map(_hash_digest, map(_sha256, links))) != chains:
                return False
        except (TypeError, ValueError, OverflowError):  # a value of the wrong type or size
            return False
        if self.acc is not None:
            self.roots_at.update(self.acc.extend(leaves, self.want))
        for k in self.want:
            if start < k <= start + n:
                self.chains_at[k] = chains[k - start - 1]
        self.prev, self.expected = chains[-1], start + n
        return True

    def _one_by_one(self, rows: Iterable[Any]) -> None:
        sid, full, acc, want = self.sid, self.full, self.acc, self.want
        prev, expected = self.prev, self.expected
        for r in rows:
            seq, leaf, chain = r[0], r[1], r[2]
            if seq != expected:
                raise TamperDetected(
                    f"record {expected} is missing (next stored is {seq})", seq=expected
                )
            if full and leaf_hash(r[3]) != leaf:
                raise TamperDetected(f"record {seq}: body does not match its leaf hash", seq=seq)
            if chain_hash(sid, seq, prev, leaf) != chain:
                raise TamperDetected(f"record {seq}: chain link does not verify", seq=seq)
            prev = chain
            expected += 1
            if acc is not None:
                acc.append(leaf)
                if expected in want:
                    self.roots_at[expected] = acc.root()
            if expected in want:
                self.chains_at[expected] = chain
            self.prev, self.expected = prev, expected


def _check_attempt_heads(
    conn: sqlite3.Connection, anchors: list[Checkpoint], res: CheckResult
) -> None:
    for cp in anchors:
        if cp.attempts_size == 0:
            ok = cp.attempts_head == GENESIS
        else:
            row = conn.execute(
                "SELECT chain FROM attempts WHERE seq = ?", (cp.attempts_size - 1,)
            ).fetchone()
            ok = row is not None and row[0] == cp.attempts_head
        if not ok:
            raise AttemptJournalDamaged(
                f"attempt chain head at size {cp.attempts_size} differs from the signed checkpoint",
                seq=max(cp.attempts_size - 1, 0),
            )


def _check_attempt_columns(
    seq: int, body: bytes, kind: str, ref: int | None, cell_id: str, begun: set[int]
) -> None:
    try:
        obj = loads_strict(body)
    except EctError as e:
        raise AttemptJournalDamaged(f"attempt {seq}: body is not valid JSON", seq=seq) from e
    ok = (
        isinstance(obj, dict)
        and obj.get("kind") == kind
        and obj.get("cell_id") == cell_id
        and (
            (kind == "begin" and ref is None and "begin_seq" not in obj)
            or (kind == "end" and obj.get("begin_seq") == ref and ref in begun)
        )
    )
    if not ok:
        raise AttemptJournalDamaged(f"attempt {seq}: columns disagree with its body", seq=seq)
    if kind == "begin":
        begun.add(seq)
    elif ref is not None:
        begun.discard(ref)
