"""Tamper corpus: each kind of damage is detected with its specific error and first bad seq."""

from __future__ import annotations

import hashlib
import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.canonical import canonical_bytes
from runner.store import (
    AttemptJournalDamaged,
    BlobCorrupt,
    CheckpointMissing,
    FileCorrupt,
    NotAStore,
    SignatureInvalid,
    StaleCheckpoint,
    Store,
    StoreDamaged,
    StoreReport,
    TamperDetected,
    TruncationDetected,
    checkpoint_path,
    generate_key,
    salvage,
    verify_store,
)
from runner.store._checkpoint import make_checkpoint, parse_checkpoint
from runner.store._db import chain_hash
from runner.store._keys import Ed25519PrivateKey

from .conftest import cell_body, drop_triggers, raw, restore_triggers


@pytest.fixture
def sealed(new_store: Callable[..., Store]) -> Path:
    """A closed store: 30 cell records, 6 attempt entries, a blob, checkpointed at the end."""
    s = new_store(n=30)
    for i in range(3):
        a = s.attempt_begin({"cell_id": f"c{i:03d}"})
        s.attempt_end(a, {"status": 200})
    s.put_blob(b"trajectory bytes")
    s.checkpoint()
    s.close()
    assert verify_store(s.path, full=True).ok
    return s.path


def _tamper(path: Path, *sql: tuple[str, tuple[object, ...]]) -> None:
    conn = raw(path)
    saved = drop_triggers(conn)
    for stmt, args in sql:
        conn.execute(stmt, args)
    restore_triggers(conn, saved)  # a careful attacker puts the triggers back
    conn.close()


def _expect(rep: StoreReport, cls: type[StoreDamaged], seq: int | None) -> None:
    assert not rep.ok and not bool(rep)
    assert rep.damage == cls.kind, rep.detail
    assert rep.first_bad_seq == seq, rep.detail
    with pytest.raises(cls):
        rep.raise_for_damage()


def test_edit_body_detected_by_full(sealed: Path) -> None:
    _tamper(
        sealed, ("UPDATE records SET body = ? WHERE seq = 7", (canonical_bytes(cell_body(70)),))
    )
    _expect(verify_store(sealed, full=True), TamperDetected, 7)


def test_edit_body_and_leaf_detected_by_quick(sealed: Path) -> None:
    body = canonical_bytes(cell_body(70))
    leaf = hashlib.sha256(b"\0" + body).digest()
    _tamper(sealed, ("UPDATE records SET body = ?, leaf = ? WHERE seq = 7", (body, leaf)))
    _expect(verify_store(sealed), TamperDetected, 7)
    with pytest.raises(TamperDetected):
        Store.open(sealed)


def test_rewritten_history_without_key_detected_by_checkpoint(sealed: Path) -> None:
    # Edit record 7 and recompute every leaf and chain link after it: internally consistent,
    # but the signed checkpoint pins the old head.
    conn = raw(sealed)
    sid = bytes.fromhex(
        conn.execute("SELECT body FROM records WHERE seq = 0")
        .fetchone()[0]
        .split(b'"store_id":"')[1][:32]
        .decode()
    )
    saved = drop_triggers(conn)
    prev = conn.execute("SELECT chain FROM records WHERE seq = 6").fetchone()[0]
    for seq, body in conn.execute(
        "SELECT seq, body FROM records WHERE seq >= 7 ORDER BY seq"
    ).fetchall():
        if seq == 7:
            body = canonical_bytes(cell_body(70))
        leaf = hashlib.sha256(b"\0" + body).digest()
        prev = chain_hash(sid, seq, prev, leaf)
        conn.execute(
            "UPDATE records SET body = ?, leaf = ?, chain = ? WHERE seq = ?",
            (body, leaf, prev, seq),
        )
    restore_triggers(conn, saved)
    conn.close()
    _expect(verify_store(sealed), TamperDetected, 30)
    _expect(verify_store(sealed, full=True), TamperDetected, 30)


def test_swapped_rows(sealed: Path) -> None:
    conn = raw(sealed)
    a = conn.execute("SELECT body, leaf, chain FROM records WHERE seq = 5").fetchone()
    b = conn.execute("SELECT body, leaf, chain FROM records WHERE seq = 6").fetchone()
    conn.close()
    upd = "UPDATE records SET body = ?, leaf = ?, chain = ? WHERE seq = ?"
    _tamper(sealed, (upd, (*b, 5)), (upd, (*a, 6)))
    _expect(verify_store(sealed), TamperDetected, 5)


def test_deleted_middle_row(sealed: Path) -> None:
    _tamper(sealed, ("DELETE FROM records WHERE seq = 10", ()))
    _expect(verify_store(sealed), TamperDetected, 10)
    _expect(verify_store(sealed, full=True), TamperDetected, 10)


def test_deleted_tail(sealed: Path) -> None:
    _tamper(sealed, ("DELETE FROM records WHERE seq >= 26", ()))
    _expect(verify_store(sealed), TruncationDetected, 26)
    with pytest.raises(TruncationDetected):
        Store.open(sealed)


def test_deleted_tail_and_stored_checkpoints_caught_by_external(sealed: Path) -> None:
    _tamper(sealed, ("DELETE FROM records WHERE seq >= 26", ()), ("DELETE FROM checkpoints", ()))
    _expect(verify_store(sealed), TruncationDetected, 26)


def test_older_checkpoint_substituted(sealed: Path, key: Ed25519PrivateKey) -> None:
    old = checkpoint_path(sealed).read_bytes()
    with Store.open(sealed, signing_key=key) as s:
        s.append(cell_body(31))
        s.checkpoint()
    checkpoint_path(sealed).write_bytes(old)
    _expect(verify_store(sealed), StaleCheckpoint, 31)
    with pytest.raises(StaleCheckpoint):
        Store.open(sealed)


def test_wrong_pinned_key(sealed: Path, tmp_path: Path) -> None:
    other = generate_key(tmp_path / "other.key")
    _expect(verify_store(sealed, public_key=other.public_key()), SignatureInvalid, 0)


def test_checkpoint_signed_by_wrong_key(sealed: Path, tmp_path: Path) -> None:
    other = generate_key(tmp_path / "other.key")
    cp = parse_checkpoint(__import__("json").loads(checkpoint_path(sealed).read_bytes()))
    forged = make_checkpoint(
        other, store_id=cp.store_id, size=cp.size, root=cp.root, chain_head=cp.chain_head,
        attempts_size=cp.attempts_size, attempts_head=cp.attempts_head,
    )  # fmt: skip
    checkpoint_path(sealed).write_bytes(canonical_bytes(forged))
    _expect(verify_store(sealed), SignatureInvalid, None)


def test_checkpoint_signature_bit_flip(sealed: Path) -> None:
    p = checkpoint_path(sealed)
    data = bytearray(p.read_bytes())
    i = data.index(b'"root":"') + 10
    data[i] = ord("0") if data[i] != ord("0") else ord("1")
    p.write_bytes(bytes(data))
    _expect(verify_store(sealed), SignatureInvalid, None)


def test_attempt_journal_edit_and_truncation(sealed: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copy(sealed, copy)
    shutil.copy(checkpoint_path(sealed), checkpoint_path(copy))
    _tamper(sealed, ("UPDATE attempts SET body = CAST('{}' AS BLOB) WHERE seq = 2", ()))
    _expect(verify_store(sealed, full=True), AttemptJournalDamaged, 2)
    _tamper(copy, ("DELETE FROM attempts WHERE seq >= 4", ()))
    _expect(verify_store(copy), TruncationDetected, 4)


def test_blob_corruption(sealed: Path) -> None:
    _tamper(sealed, ("UPDATE blobs SET data = CAST('other' AS BLOB)", ()))
    _expect(verify_store(sealed, full=True), BlobCorrupt, None)


def test_dropped_triggers(sealed: Path) -> None:
    conn = raw(sealed)
    drop_triggers(conn)
    conn.close()
    _expect(verify_store(sealed), TamperDetected, None)


def test_not_a_database(tmp_path: Path) -> None:
    p = tmp_path / "junk.db"
    p.write_bytes(b"this is not sqlite" * 100)
    # a file that never was a store (no checkpoint beside it) is a wrong path, named so by
    # every command (issue 39); with a store checkpoint beside it, it is a store's damage
    _expect(verify_store(p), NotAStore, None)
    Path(f"{p}.checkpoint").write_text("{}", "utf-8")
    _expect(verify_store(p), FileCorrupt, None)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    rep = verify_store(other)
    assert not rep.ok and rep.damage == "not_a_store"


def _logical(path: Path) -> tuple[object, ...]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [
            tuple(conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall())
            for t in ("records", "attempts", "checkpoints", "blobs")
        ]
        schema = tuple(conn.execute("SELECT type, name, sql FROM sqlite_schema ORDER BY name"))
        return (*tables, schema)
    finally:
        conn.close()


def test_random_byte_flips(sealed: Path, tmp_path: Path) -> None:
    """Any flip that changes what the store holds is detected; flips in unused bytes may pass
    only if every table reads back exactly as before."""
    pristine = sealed.read_bytes()
    truth = _logical(sealed)
    rng = random.Random(6962)
    victim = tmp_path / "victim.db"
    shutil.copy(checkpoint_path(sealed), checkpoint_path(victim))
    detected = 0
    for trial in range(150):
        data = bytearray(pristine)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        victim.write_bytes(bytes(data))
        rep = verify_store(victim, full=True)
        if rep.ok:
            assert _logical(victim) == truth, f"trial {trial}: undetected change"
        else:
            detected += 1
            assert rep.damage in {"corrupt", "tamper", "not_a_store", "attempts", "blob",
                                  "truncation", "signature", "stale_checkpoint"}, rep.detail  # fmt: skip
    assert detected > 0
    # A flip inside a record body is always detected, and names that record.
    data = bytearray(pristine)
    needle = canonical_bytes(cell_body(17)["schedule_row"])
    data[data.index(needle) + 3] ^= 0x01
    victim.write_bytes(bytes(data))
    rep = verify_store(victim, full=True)
    assert not rep.ok and rep.damage in {"tamper", "corrupt"}
    if rep.damage == "tamper":
        assert rep.first_bad_seq == 18


def test_salvage_copies_verified_prefix(sealed: Path, tmp_path: Path) -> None:
    _tamper(sealed, ("UPDATE records SET body = CAST('{}' AS BLOB) WHERE seq = 12", ()))
    before = sealed.read_bytes()
    new = tmp_path / "salvaged.db"
    assert salvage(sealed, new) == 12
    assert sealed.read_bytes() == before  # nothing repaired in place
    rep = verify_store(new, full=True)
    assert rep.ok and rep.records == 12
    with Store.open(new) as s:
        assert [r.seq for r in s.records()][-1] == 11
        assert s.latest_checkpoint()["checkpoint"]["size"] <= 12
        assert s.append(cell_body(12)) == 12  # the salvaged store continues


def test_salvage_without_fitting_checkpoint_needs_the_key(
    sealed: Path, tmp_path: Path, key: Ed25519PrivateKey
) -> None:
    _tamper(
        sealed,
        ("UPDATE records SET body = CAST('{}' AS BLOB) WHERE seq = 12", ()),
        ("DELETE FROM checkpoints", ()),
    )
    checkpoint_path(sealed).unlink()
    new = tmp_path / "salvaged.db"
    with pytest.raises(CheckpointMissing):
        salvage(sealed, new)
    assert not new.exists()
    with pytest.raises(SignatureInvalid):
        salvage(sealed, new, signing_key=generate_key(tmp_path / "other.key"))
    assert salvage(sealed, new, signing_key=key) == 12
    rep = verify_store(new, full=True, public_key=key.public_key())
    assert rep.ok and rep.checkpoint_size == 12
