"""Verification reports (:func:`verify_store`) and salvage of a verified prefix."""

from __future__ import annotations

import os
import secrets
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.canonical import JsonRecord, loads_strict, raw_digest, read_bounded, spec
from runner.errors import EctError, FormatError, StoreError
from runner.store._check import (
    MAX_CHECKPOINT_BYTES,
    check_connection,
    checkpoint_path,
    parse_header,
    read_external_checkpoint,
)
from runner.store._checkpoint import Checkpoint, parse_checkpoint
from runner.store._db import (
    GENESIS,
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
    AttemptJournalDamaged,
    BlobCorrupt,
    CheckpointMissing,
    FileCorrupt,
    NotAStore,
    SignatureInvalid,
    StaleCheckpoint,
    StoreDamaged,
    StoreUsageError,
    TamperDetected,
    TruncationDetected,
    damage_label,
)
from runner.store._fsutil import atomic_write, fsync_dir
from runner.store._keys import Ed25519PrivateKey, Ed25519PublicKey, encode_public_key
from runner.store.merkle import Accumulator, leaf_hash

__all__ = ["DAMAGE_KINDS", "StoreReport", "salvage", "verify_store"]

DAMAGE_KINDS: dict[str, type[StoreDamaged]] = {
    cls.kind: cls
    for cls in (
        FileCorrupt,
        NotAStore,
        TamperDetected,
        AttemptJournalDamaged,
        BlobCorrupt,
        TruncationDetected,
        StaleCheckpoint,
        CheckpointMissing,
        SignatureInvalid,
    )
}
"""Every ``StoreReport.damage`` value and the error class it stands for."""


def _head(head: tuple[int, str] | None) -> dict[str, Any] | None:
    """The writer of a report's head: ``{"seq": N, "chain": hex}``."""
    return None if head is None else {"seq": head[0], "chain": head[1]}


@dataclass(frozen=True, kw_only=True)
class StoreReport(JsonRecord):
    """Result of :func:`verify_store`. Truthy only when the store is intact.

    ``head`` is ``(seq, chain hex)`` of the last verified record (``None`` if even the header
    failed); ``first_bad_seq`` names the first bad record (for ``attempts`` damage, the first
    bad attempt seq); ``damage`` is a key of :data:`DAMAGE_KINDS`.
    """

    ok: bool
    full: bool = False
    records: int
    head: tuple[int, str] | None = field(metadata=spec(write=_head))
    root: str | None = None
    attempts: int = 0
    checkpoint_size: int | None = None
    first_bad_seq: int | None
    damage: str | None
    detail: str

    def __bool__(self) -> bool:
        return self.ok

    @property
    def error(self) -> StoreDamaged | None:
        """The typed error this report stands for (None when intact)."""
        if self.ok or self.damage is None:
            return None
        return DAMAGE_KINDS[self.damage](self.detail, seq=self.first_bad_seq)

    @property
    def where(self) -> str:
        """Where the damage is, for a message: ``seq N``, or that no single record is named."""
        if self.first_bad_seq is not None:
            return f"seq {self.first_bad_seq}"
        return "no single record (the damage is not in one record)"

    @property
    def label(self) -> str:
        """``DAMAGED (kind) at seq N`` (see :func:`damage_label`); "intact" when intact."""
        if self.ok or self.damage is None:
            return "intact"
        return damage_label(self.damage, self.first_bad_seq)

    def raise_for_damage(self) -> None:
        """Raise the typed :class:`StoreDamaged` subclass if the store is not intact."""
        err = self.error
        if err is not None:
            raise err


def _open_ro(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    conn = connect(path, busy_timeout_s=busy_timeout_s, readonly=True)
    try:
        conn.execute("PRAGMA cell_size_check = ON")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    except (sqlite3.Error, UnicodeDecodeError) as e:
        conn.close()
        raise unreadable(e, path) from e
    return conn


def verify_store(
    path: str | os.PathLike[str],
    *,
    full: bool = False,
    public_key: Ed25519PublicKey | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    busy_timeout_s: float = 10.0,
) -> StoreReport:
    """Verify the store at ``path`` read-only and report; never repairs anything.

    ``public_key`` pins the expected key (otherwise the header's key is used, which proves
    integrity but not authorship). ``checkpoint`` is the external checkpoint file (default
    ``<path>.checkpoint``); keeping a copy elsewhere is what makes truncation by someone who
    holds the key detectable.

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    target = Path(path)
    if not target.is_file():
        raise FileNotFoundError(2, "No such store", os.fspath(target))
    ext = Path(checkpoint) if checkpoint is not None else checkpoint_path(target)
    try:
        conn = _open_ro(target, busy_timeout_s)
    except StoreDamaged as e:
        return _damaged(e, full, target, busy_timeout_s)
    try:
        try:
            res = check_connection(conn, target, full=full, public_key=public_key, external=ext,
                                   reopen=lambda: _open_ro(target, busy_timeout_s))
        except StoreDamaged as e:
            return _damaged(e, full, target, busy_timeout_s)
    finally:
        conn.close()
    return StoreReport(
        ok=True,
        records=res.count,
        head=(res.count - 1, res.head.hex()),
        first_bad_seq=None,
        damage=None,
        # journal entries (a begin and an end per provider attempt), not attempts: the viewer shows
        # both counts on one page
        detail=f"intact: {res.count} records, {res.attempts_count} attempt-journal entries"
        + (" (full verification)" if full else " (quick verification)"),
        full=full,
        root=None if res.root is None else res.root.hex(),
        attempts=res.attempts_count,
        checkpoint_size=None if res.external is None else res.external.size,
    )


def _first_unreadable(target: Path, busy_timeout_s: float) -> int | None:
    """For damage SQLite reports without naming a record (a malformed page): the first record
    it cannot read back, or None when every record reads (the damage is elsewhere)."""
    try:
        conn = _open_ro(target, busy_timeout_s)
    except StoreError:
        return None
    try:
        try:
            top = conn.execute("SELECT MAX(seq) FROM records").fetchone()[0]
        except (sqlite3.Error, UnicodeDecodeError):
            return None
        for seq in range(int(top or 0) + 1):
            try:
                row = conn.execute("SELECT seq, body, leaf, chain FROM records WHERE seq = ?",
                                   (seq,)).fetchone()
            except (sqlite3.Error, UnicodeDecodeError):
                return seq
            if row is None:
                return seq
    finally:
        conn.close()
    return None


def _damaged(e: StoreDamaged, full: bool, target: Path, busy_timeout_s: float) -> StoreReport:
    seq = e.seq
    if seq is None and isinstance(e, FileCorrupt):
        seq = _first_unreadable(target, busy_timeout_s)
    return StoreReport(
        ok=False,
        records=0,
        head=None,
        first_bad_seq=seq,
        damage=type(e).kind,
        detail=str(e),
        full=full,
    )


def salvage(
    path: str | os.PathLike[str],
    new_path: str | os.PathLike[str],
    *,
    signing_key: Ed25519PrivateKey | None = None,
    busy_timeout_s: float = 10.0,
) -> int:
    """Copy the longest verified prefix of the store at ``path`` into a new store at
    ``new_path``; return the number of records copied (header included).

    Records, attempts and blobs are copied byte for byte (same store id, same chain), up to the
    first record whose body, leaf or chain link fails; the attempt journal likewise. The newest
    signed checkpoint that the prefix still satisfies is copied into the new store and written
    as its external checkpoint, so the salvaged store verifies on its own (its checkpoint is
    older than the damage). With ``signing_key`` (the store's own key) a fresh checkpoint over
    the whole salvaged prefix is signed as well. The source is only read.

    Raises:
        StoreDamaged: even the header does not verify (nothing to salvage).
        CheckpointMissing: no signed checkpoint fits the prefix and no ``signing_key`` was
            given to sign one (nothing is written).
        SignatureInvalid: ``signing_key`` is not the store's key.
        StoreUsageError: ``new_path`` exists.
    """
    src = Path(path)
    dst = Path(new_path)
    if not src.is_file():
        raise FileNotFoundError(2, "No such store", os.fspath(src))
    if dst.exists() or checkpoint_path(dst).exists():
        raise StoreUsageError(f"{dst} already exists; salvage writes a new file only")
    if not dst.parent.is_dir():
        raise StoreUsageError(f"{dst.parent} is not a directory; salvage writes NEW into an "
                              "existing directory")
    conn = _open_ro(src, busy_timeout_s)
    try:
        records, attempts, blobs, cps, header = _read_prefix(conn, src)
    finally:
        conn.close()
    ext = _safe_external(checkpoint_path(src))
    key: Ed25519PublicKey = header["_key"]
    candidates = [*cps] + ([ext] if ext is not None else [])
    chains = {i + 1: r[3] for i, r in enumerate(records)}
    achains = {i + 1: a[6] for i, a in enumerate(attempts)}
    acc = Accumulator()
    roots: dict[int, bytes] = {}
    for r in records:
        acc.append(r[2])
        roots[acc.size] = acc.root()
    fits: list[tuple[Checkpoint, bytes]] = []
    for cp, raw in candidates:
        if (
            cp.store_id == header["store_id"]
            and cp.signed_by(key)
            and chains.get(cp.size) == cp.chain_head
            and roots.get(cp.size) == cp.root
            and (
                (cp.attempts_size == 0 and cp.attempts_head == GENESIS)
                or achains.get(cp.attempts_size) == cp.attempts_head
            )
        ):
            fits.append((cp, raw))
    # Only a monotone run of checkpoints is kept, so the new store's history stays ordered.
    kept: list[tuple[Checkpoint, bytes]] = []
    for cp, raw in fits:
        if not kept or (
            cp.size >= kept[-1][0].size and cp.attempts_size >= kept[-1][0].attempts_size
        ):
            if not kept or raw != kept[-1][1]:
                kept.append((cp, raw))
    if signing_key is not None and encode_public_key(signing_key.public_key()) != (
        encode_public_key(key)
    ):
        raise SignatureInvalid("the signing key is not this store's key", seq=0)
    if not kept and signing_key is None:
        raise CheckpointMissing(
            f"no signed checkpoint of {src} fits its verified prefix of {len(records)} records; "
            "pass the store's signing key to sign a new one"
        )
    tmp = dst.parent / f".{dst.name}.salvaging-{secrets.token_hex(4)}"

    def discard() -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(os.fspath(tmp) + suffix).unlink(missing_ok=True)

    try:
        out = connect(tmp, busy_timeout_s=busy_timeout_s)
    except sqlite3.Error as e:  # e.g. a directory this process cannot write
        discard()
        raise StoreUsageError(f"cannot create a store in {dst.parent}: {e}") from e
    try:
        configure(out, tmp, journal=header["journal"], busy_timeout_s=busy_timeout_s)
        out.execute("BEGIN IMMEDIATE")
        create_schema(wrap(out))
        out.executemany("INSERT INTO records (seq, body, leaf, chain) VALUES (?, ?, ?, ?)", records)
        out.executemany(
            "INSERT INTO attempts (seq, kind, ref, cell_id, body, leaf, chain) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            attempts,
        )
        out.executemany("INSERT INTO blobs (digest, data) VALUES (?, ?)", blobs)
        out.executemany("INSERT INTO checkpoints (body) VALUES (?)", [(raw,) for _, raw in kept])
        out.execute("COMMIT")
    except sqlite3.Error as e:  # a full disk, a read-only directory: nothing is left behind
        out.close()
        discard()
        raise translate(e, dst) from e
    except BaseException:
        out.close()
        discard()
        raise
    out.close()
    try:
        if kept:
            atomic_write(checkpoint_path(dst), kept[-1][1], hook=lambda _p: None, point="salvage")
        os.replace(tmp, dst)
    except BaseException:
        discard()
        if not dst.exists():
            checkpoint_path(dst).unlink(missing_ok=True)
        raise
    fsync_dir(dst.parent)
    if signing_key is not None:
        from runner.store._store import Store

        with Store.open(dst, signing_key=signing_key, _fresh=not kept) as fresh:
            fresh.checkpoint()
    return len(records)


def _safe_external(p: Path) -> tuple[Checkpoint, bytes] | None:
    try:
        cp = read_external_checkpoint(p)
        return None if cp is None else (cp, read_bounded(p, limit=MAX_CHECKPOINT_BYTES))
    except (StoreDamaged, StoreUsageError, OSError, FormatError):
        return None


def _read_prefix(
    conn: sqlite3.Connection, src: Path
) -> tuple[
    list[tuple[Any, ...]],
    list[tuple[Any, ...]],
    list[tuple[Any, ...]],
    list[tuple[Checkpoint, bytes]],
    dict[str, Any],
]:
    try:
        rows = conn.execute("SELECT seq, body, leaf, chain FROM records ORDER BY seq")
        first = rows.fetchone()
        if first is None or first[0] != 0:
            raise TamperDetected("record 0 (header) is missing: nothing to salvage", seq=0)
        header, sid, key = parse_header(first[1])
        if (
            leaf_hash(first[1]) != first[2]
            or chain_hash(sid, 0, GENESIS, first[2]) != first[3]
        ):
            raise TamperDetected("record 0 (header) does not verify: nothing to salvage", seq=0)
        records = [tuple(first)]
        prev = first[3]
        expected = 1
        try:  # a damaged page ends the prefix; it does not abort the salvage
            for seq, body, leaf, chain in rows:
                if (
                    seq != expected
                    or leaf_hash(body) != leaf
                    or chain_hash(sid, seq, prev, leaf) != chain
                ):
                    break
                records.append((seq, body, leaf, chain))
                prev = chain
                expected += 1
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            pass
        attempts: list[tuple[Any, ...]] = []
        aprev = GENESIS
        try:
            for row in conn.execute(
                "SELECT seq, kind, ref, cell_id, body, leaf, chain FROM attempts ORDER BY seq"
            ):
                seq, kind, ref, cell_id, body, leaf, chain = row
                if (
                    seq != len(attempts)
                    or leaf_hash(body) != leaf
                    or attempt_chain_hash(sid, seq, aprev, leaf) != chain
                    or not _attempt_row_ok(kind, ref, cell_id, body)
                ):
                    break
                attempts.append(tuple(row))
                aprev = chain
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            pass
        blobs: list[tuple[Any, ...]] = []
        try:
            for d, data in conn.execute("SELECT digest, data FROM blobs ORDER BY digest"):
                if d == raw_digest(data):
                    blobs.append((d, data))
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            pass
        cps: list[tuple[Checkpoint, bytes]] = []
        try:
            for (body,) in conn.execute("SELECT body FROM checkpoints ORDER BY id"):
                try:
                    cps.append((parse_checkpoint(loads_strict(body)), bytes(body)))
                except FormatError:
                    continue
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            pass
    except (sqlite3.Error, UnicodeDecodeError) as e:
        raise unreadable(e, src) from e
    header = {**header, "_key": key}
    return records, attempts, blobs, cps, header


def _attempt_row_ok(kind: str, ref: int | None, cell_id: str, body: bytes) -> bool:
    try:
        obj = loads_strict(body)
    except EctError:
        return False
    return (
        isinstance(obj, dict)
        and obj.get("kind") == kind
        and obj.get("cell_id") == cell_id
        and (obj.get("begin_seq") if kind == "end" else None) == ref
    )
