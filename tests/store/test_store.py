"""The store's basic contract on real SQLite files: pragmas, schema, records, attempts, blobs,
keys, checkpoints (docs/store.md)."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

import runner.store as store_pkg
from runner.canonical import canonical_bytes, loads_strict
from runner.errors import FormatError, StoreError
from runner.store import (
    AttemptError,
    BlobCorrupt,
    BlobNotFound,
    CheckpointMissing,
    InsecureKeyFile,
    JournalRow,
    KeyFileError,
    SignatureInvalid,
    Store,
    StoreUsageError,
    checkpoint_path,
    generate_key,
    load_public_key,
    load_signing_key,
    merkle,
    verify_store,
)
from runner.store._db import chain_hash
from runner.store._keys import Ed25519PrivateKey

from .conftest import cell_body, drop_triggers, make_header, raw, restore_triggers


def test_exported_members() -> None:
    assert set(store_pkg.__all__) == {
        "DAMAGE_KINDS", "DEFAULT_BUSY_TIMEOUT_S", "HEADER_RESERVED", "MANIFEST_FORMAT", "AttemptError",
        "AttemptJournalDamaged", "BlobCorrupt", "BlobNotFound", "CheckpointMissing",
        "FileCorrupt", "InsecureKeyFile", "JournalRow", "KeyFileError", "ManifestCell", "ManifestInvalid",
        "NotAStore",
        "ProofInvalid", "Record", "ScheduleMismatch", "SignatureInvalid", "StaleCheckpoint",
        "StoreUnavailable",
        "Store", "StoreBusy", "StoreDamaged", "StoreReport", "StoreUsageError",
        "TamperDetected", "TruncationDetected", "checkpoint_path", "damage_label", "export_manifest",
        "foreign_file", "read_external_checkpoint",
        "generate_key", "load_public_key", "load_signing_key", "merkle", "public_key_path",
        "salvage", "verify_manifest", "verify_store",
    }  # fmt: skip
    for name in store_pkg.__all__:
        obj = getattr(store_pkg, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, StoreError), name


def test_connection_pragmas_are_asserted(new_store: Callable[..., Store]) -> None:
    s = new_store()
    conn = s._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0
    s.close()
    # journal_mode=WAL is persistent in the file; a fresh open re-asserts the rest.
    with Store.open(s.path) as again:
        assert again._conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        assert again._conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0


def test_rollback_fallback_is_explicit_and_recorded(
    new_store: Callable[..., Store], key: Ed25519PrivateKey
) -> None:
    s = new_store("rb.db", n=3, journal="rollback")
    assert s.header["journal"] == "rollback"
    assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert s._conn.execute("PRAGMA synchronous").fetchone()[0] == 3  # EXTRA
    s.close()
    with pytest.raises(StoreUsageError, match="rollback"):
        Store.open(s.path, journal="wal")  # never switched silently
    with Store.open(s.path, signing_key=key) as again:
        assert again.append(cell_body(9)) == 4
        assert again._conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert verify_store(s.path, full=True).ok


def test_tables_are_strict_and_append_only(new_store: Callable[..., Store]) -> None:
    s = new_store(n=2)
    s.attempt_begin({"cell_id": "x"})
    s.put_blob(b"b")
    s.close()
    conn = raw(s.path)
    for table in ("records", "attempts", "checkpoints", "blobs"):
        sql = conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (table,)).fetchone()[0]
        assert sql.rstrip().endswith("STRICT")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(f"UPDATE {table} SET rowid = rowid")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(f"DELETE FROM {table}")
    with pytest.raises(sqlite3.IntegrityError):  # STRICT: no text in a BLOB column
        conn.execute("INSERT INTO records VALUES (99, 'text', x'00', x'00')")
    conn.close()


def test_header_is_record_zero(new_store: Callable[..., Store], key: Ed25519PrivateKey) -> None:
    s = new_store(n=0)
    h = s.header
    assert h["format"] == "ect.store/1"
    assert len(h["store_id"]) == 32 and h["store_id"] == s.store_id
    assert h["lock_digest"] == make_header()["lock_digest"]
    assert h["preflight_digest"] == make_header()["preflight_digest"]
    assert h["public_key"] == s.public_key
    assert s.count == 1 and s.head[0] == 0
    body = s._conn.execute("SELECT body, leaf, chain FROM records WHERE seq = 0").fetchone()
    assert body[0] == canonical_bytes(h)
    assert body[1] == merkle.leaf_hash(body[0])
    assert body[2] == chain_hash(bytes.fromhex(h["store_id"]), 0, b"\0" * 32, body[1])
    s.close()


@pytest.mark.parametrize(
    "header",
    [
        {"store_id": "x"},
        {"lock_digest": "nope", "preflight_digest": make_header()["preflight_digest"]},
        {"lock_digest": make_header()["lock_digest"]},
    ],
)
def test_bad_headers_refused(tmp_path: Path, key: Ed25519PrivateKey, header: dict) -> None:
    h = {**make_header(), **header} if "store_id" in header else header
    with pytest.raises(StoreUsageError):
        Store.create(tmp_path / "h.db", header=h, signing_key=key)
    assert not (tmp_path / "h.db").exists()


def test_create_never_overwrites(new_store: Callable[..., Store], key: Ed25519PrivateKey) -> None:
    s = new_store()
    s.close()
    with pytest.raises(StoreUsageError, match="exists"):
        Store.create(s.path, header=make_header(), signing_key=key)


def test_append_chain_and_records(new_store: Callable[..., Store]) -> None:
    s = new_store()
    seqs = [s.append(cell_body(i)) for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    assert s.append_batch([cell_body(5), cell_body(6)]) == [6, 7]
    recs = list(s.records())
    assert [r.seq for r in recs] == list(range(1, 8))
    assert recs[0].body == cell_body(0)
    prev = s._conn.execute("SELECT chain FROM records WHERE seq = 0").fetchone()[0]
    sid = bytes.fromhex(s.store_id)
    for r in recs:
        assert r.leaf == merkle.leaf_hash(canonical_bytes(r.body))
        assert r.chain == chain_hash(sid, r.seq, prev, r.leaf)
        prev = r.chain
    assert s.head == (7, prev.hex())
    assert s.record(3).body == cell_body(2)
    assert s.record(3).digest.startswith("sha256:")
    with pytest.raises(StoreUsageError):
        s.record(99)
    with pytest.raises(FormatError):
        s.append({"bad": float("nan")})
    assert s.count == 8  # the refused body left nothing behind
    s.close()


def test_attempt_journal_and_orphans(new_store: Callable[..., Store]) -> None:
    s = new_store()
    a0 = s.attempt_begin({"cell_id": "c000", "request_sha256": "r0"})
    s.attempt_end(a0, {"status": 200})
    a1 = s.attempt_begin({"cell_id": "c001"})  # crashed before it ended
    a2 = s.attempt_begin({"cell_id": "c002"})
    s.attempt_end(a2, {"status": 503})
    s.append(cell_body(0))  # only c000 committed
    att = s.attempts()
    assert all(isinstance(a, JournalRow) for a in att)
    assert [a.seq for a in att] == [a0, a1, a2]
    assert att[0].begin == {"cell_id": "c000", "request_sha256": "r0"}
    assert att[0].end == {"status": 200} and att[0].end_seq == a0 + 1 and att[0].ended
    assert att[1].end is None and att[1].end_seq is None and not att[1].ended
    # the caller names its committed cells: the store reads no field of a record body
    assert [a.cell_id for a in s.orphan_attempts({"c000"})] == ["c001", "c002"]
    assert [a.cell_id for a in s.orphan_attempts(set())] == ["c000", "c001", "c002"]
    with pytest.raises(AttemptError):
        s.attempt_end(a0, {"again": True})
    with pytest.raises(AttemptError):
        s.attempt_end(99, {})
    with pytest.raises(AttemptError):
        s.attempt_end(1, {})  # seq 1 is an end entry, not a begin
    with pytest.raises(TypeError):
        s.attempt_begin({"no": "cell"})
    s.close()
    assert verify_store(s.path, full=True).attempts == 5


def test_blobs_are_content_addressed(new_store: Callable[..., Store]) -> None:
    s = new_store()
    d = s.put_blob(b"raw provider response")
    assert d == "sha256:" + __import__("hashlib").sha256(b"raw provider response").hexdigest()
    assert s.put_blob(b"raw provider response") == d  # idempotent
    assert s.get_blob(d) == b"raw provider response"
    with pytest.raises(BlobNotFound):
        s.get_blob("sha256:" + "0" * 64)
    with pytest.raises(BlobNotFound):
        s.get_blob("not a digest")
    s.close()
    conn = raw(s.path)
    sqls = drop_triggers(conn)
    conn.execute("UPDATE blobs SET data = x'00' WHERE digest = ?", (d,))
    restore_triggers(conn, sqls)
    conn.close()
    with Store.open(s.path) as again, pytest.raises(BlobCorrupt):
        again.get_blob(d)


def test_keys_permissions(tmp_path: Path) -> None:
    p = tmp_path / "k"
    k = generate_key(p)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert isinstance(load_signing_key(p), Ed25519PrivateKey)
    assert (
        load_public_key(tmp_path / "k.pub").public_bytes_raw() == k.public_key().public_bytes_raw()
    )
    with pytest.raises(KeyFileError):
        generate_key(p)  # never overwritten
    for mode in (0o640, 0o604, 0o660):
        os.chmod(p, mode)
        with pytest.raises(InsecureKeyFile, match="too open"):
            load_signing_key(p)
    os.chmod(p, 0o400)
    load_signing_key(p)
    with pytest.raises(KeyFileError):
        load_signing_key(tmp_path / "missing")
    with pytest.raises(KeyFileError):
        load_public_key(p)  # a private key is not a public key file
    (tmp_path / "junk").write_text("junk")
    os.chmod(tmp_path / "junk", 0o600)
    with pytest.raises(KeyFileError):
        load_signing_key(tmp_path / "junk")


def test_checkpoint_external_file_and_row(new_store: Callable[..., Store]) -> None:
    s = new_store(n=4)
    note = s.checkpoint()
    cp = note["checkpoint"]
    assert cp["size"] == 5 and cp["store_id"] == s.store_id
    assert cp["root"] == merkle.root(s.leaves()).hex()
    assert cp["chain_head"] == s.head[1]
    ext = checkpoint_path(s.path)
    assert loads_strict(ext.read_bytes()) == note
    assert ext.read_bytes() == canonical_bytes(note)
    assert s.latest_checkpoint() == note
    assert not [p for p in s.path.parent.iterdir() if ".tmp-" in p.name]
    s.close()


def test_checkpoint_needs_key_and_open_checks_key(
    new_store: Callable[..., Store], tmp_path: Path
) -> None:
    s = new_store(n=1)
    s.close()
    with Store.open(s.path) as ro:
        assert ro.append(cell_body(1)) == 2  # appends need no key
        with pytest.raises(StoreUsageError, match="signing key"):
            ro.checkpoint()
    other = generate_key(tmp_path / "other.key")
    with pytest.raises(SignatureInvalid):
        Store.open(s.path, signing_key=other)


def test_open_refuses_missing_checkpoint(new_store: Callable[..., Store]) -> None:
    s = new_store(n=2)
    s.close()
    checkpoint_path(s.path).unlink()
    with pytest.raises(CheckpointMissing):
        Store.open(s.path)
    rep = verify_store(s.path)
    assert not rep.ok and rep.damage == "missing_checkpoint"


def test_open_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Store.open(tmp_path / "nope.db")
    with pytest.raises(FileNotFoundError):
        verify_store(tmp_path / "nope.db")


def test_inclusion_proof_against_signed_checkpoint(new_store: Callable[..., Store]) -> None:
    s = new_store(n=12)
    note = s.checkpoint()
    s.append(cell_body(99))  # beyond the checkpoint
    p = s.inclusion_proof(7)
    assert p["tree_size"] == 13 and p["checkpoint"] == note
    merkle.verify_inclusion(
        bytes.fromhex(p["leaf"]), 7, 13, [bytes.fromhex(h) for h in p["proof"]],
        bytes.fromhex(note["checkpoint"]["root"]),
    )  # fmt: skip
    q = s.inclusion_proof(13)
    assert q["tree_size"] == 14 and q["checkpoint"] is None
    s.close()


def test_closed_store_refuses(new_store: Callable[..., Store]) -> None:
    s = new_store()
    s.close()
    with pytest.raises(StoreUsageError, match="closed"):
        s.append(cell_body(0))


def test_wal_that_cannot_be_set_is_an_error_naming_the_fallback(tmp_path: Path) -> None:
    from runner.store._db import configure

    conn = sqlite3.connect(":memory:", isolation_level=None)  # journal_mode stays "memory"
    with pytest.raises(StoreError, match="journal='rollback'"):
        configure(conn, "mem", journal="wal", busy_timeout_s=1.0)
    conn.close()


def test_verify_never_writes(new_store: Callable[..., Store]) -> None:
    s = new_store(n=5)
    s.close()
    before = s.path.read_bytes()
    assert verify_store(s.path, full=True).ok
    assert s.path.read_bytes() == before
