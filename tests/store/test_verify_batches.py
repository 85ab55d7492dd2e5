"""Full and quick verification check the records in whole-column batches, with the report of a
record-by-record check: the same damage, first bad seq and detail wherever the damage sits
relative to a batch boundary."""

from __future__ import annotations

import hashlib
import random
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.canonical import canonical_bytes
from runner.store import (
    Store,
    StoreReport,
    _check,
    _verify,
    checkpoint_path,
    generate_key,
    merkle,
    verify_store,
)

from .conftest import cell_body, drop_triggers, make_header, raw, restore_triggers

BATCH = 8  # small batches, so a 40-record store has several, and damage lands on every edge


def _leaf(i: int) -> bytes:
    return merkle.leaf_hash(i.to_bytes(4, "big"))


@settings(max_examples=60, deadline=None)
@given(
    runs=st.lists(st.integers(min_value=0, max_value=70), min_size=1, max_size=5),
    asked=st.lists(st.integers(min_value=0, max_value=300), max_size=6),
)
def test_extend_is_append_one_leaf_at_a_time(runs: list[int], asked: list[int]) -> None:
    one, batched = merkle.Accumulator(), merkle.Accumulator()
    done = 0
    for n in runs:
        leaves = [_leaf(done + i) for i in range(n)]
        want = {*asked, done + n}
        expected: dict[int, bytes] = {}
        for leaf in leaves:
            one.append(leaf)
            if one.size in want:
                expected[one.size] = one.root()
        assert batched.extend(leaves, want) == expected
        assert batched.size == one.size and batched.root() == one.root()
        done += n
    all_leaves = [_leaf(i) for i in range(done)]
    assert batched.root() == merkle.root(all_leaves)
    batched.append(_leaf(done))  # and it keeps growing one leaf at a time afterwards
    assert batched.root() == merkle.root([*all_leaves, _leaf(done)])


@pytest.fixture
def batched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_check, "_RECORDS_BATCH", BATCH)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 records (header included), checkpoints at 13 and 40: with batches of 8 after the
    header, the first checkpoint falls inside a batch and the last at the store's end."""
    d = tmp_path_factory.mktemp("template")
    s = Store.create(d / "run.db", header=make_header(), signing_key=generate_key(d / "k.key"))
    s.append_batch([cell_body(i) for i in range(12)])
    s.checkpoint()
    s.append_batch([cell_body(i) for i in range(12, 39)])
    s.checkpoint()
    s.close()
    return d / "run.db"


@pytest.fixture
def sealed(template: Path, tmp_path: Path, batched: None) -> Path:
    """A fresh copy of the template store (and its external checkpoint)."""
    path = tmp_path / "run.db"
    shutil.copyfile(template, path)
    shutil.copyfile(checkpoint_path(template), checkpoint_path(path))
    return path


def _one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch declines: the records are checked by the record-by-record loop only."""
    monkeypatch.setattr(_check._Scan, "_batch", lambda self, rows: False)


def _report(rep: StoreReport) -> tuple[Any, ...]:
    return (rep.ok, rep.damage, rep.first_bad_seq, rep.detail, rep.records, rep.head, rep.root)


def test_intact_store_is_hashed_a_batch_at_a_time(
    sealed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    for name in ("leaf_hash", "chain_hash"):
        real = getattr(_check, name)

        def counted(*args: Any, _real: Any = real) -> bytes:
            calls.append(1)
            return bytes(_real(*args))

        monkeypatch.setattr(_check, name, counted)
    full, quick = verify_store(sealed, full=True), verify_store(sealed)
    assert full.ok and quick.ok and full.records == quick.records == 40
    assert len(calls) == 4  # per run, the header's leaf and chain link: no record on its own
    conn = raw(sealed)
    leaves = [r[0] for r in conn.execute("SELECT leaf FROM records ORDER BY seq")]
    conn.close()
    assert full.root == merkle.root(leaves).hex()
    with monkeypatch.context() as m:
        _one_by_one(m)
        assert _report(verify_store(sealed, full=True)) == _report(full)
        assert _report(verify_store(sealed)) == _report(quick)


def _damage(path: Path, kind: str, seq: int) -> None:
    conn = raw(path)
    saved = drop_triggers(conn)
    if kind == "body":
        conn.execute("UPDATE records SET body = ? WHERE seq = ?",
                     (canonical_bytes(cell_body(900 + seq)), seq))
    elif kind == "leaf":  # body and leaf agree; the chain link no longer does
        body = canonical_bytes(cell_body(900 + seq))
        conn.execute("UPDATE records SET body = ?, leaf = ? WHERE seq = ?",
                     (body, hashlib.sha256(b"\0" + body).digest(), seq))
    elif kind == "chain":
        conn.execute("UPDATE records SET chain = ? WHERE seq = ?", (b"\x07" * 32, seq))
    elif kind == "long_leaf":  # one byte more: a fixed-width packing must not hide it
        leaf = conn.execute("SELECT leaf FROM records WHERE seq = ?", (seq,)).fetchone()[0]
        conn.execute("UPDATE records SET leaf = ? WHERE seq = ?", (leaf + b"\0", seq))
    elif kind == "short_chain":
        chain = conn.execute("SELECT chain FROM records WHERE seq = ?", (seq,)).fetchone()[0]
        conn.execute("UPDATE records SET chain = ? WHERE seq = ?", (chain[:31], seq))
    elif kind == "missing":
        conn.execute("DELETE FROM records WHERE seq = ?", (seq,))
    elif kind == "renumbered":
        conn.execute("UPDATE records SET seq = 1000 WHERE seq = ?", (seq,))
    else:  # pragma: no cover - the parameters below are the whole list
        raise AssertionError(kind)
    restore_triggers(conn, saved)
    conn.close()


@pytest.mark.parametrize("kind", ["body", "leaf", "chain", "long_leaf", "short_chain", "missing",
                                  "renumbered"])
@pytest.mark.parametrize("seq", [1, 8, 9, 13, 16, 17, 39])
def test_damage_is_reported_as_record_by_record(
    sealed: Path, monkeypatch: pytest.MonkeyPatch, kind: str, seq: int
) -> None:
    _damage(sealed, kind, seq)
    full, quick = verify_store(sealed, full=True), verify_store(sealed)
    assert not full.ok and full.first_bad_seq is not None
    if kind in ("body", "chain", "leaf", "long_leaf", "short_chain"):
        assert full.damage == "tamper" and full.first_bad_seq == seq
    with monkeypatch.context() as m:
        _one_by_one(m)
        assert _report(verify_store(sealed, full=True)) == _report(full)
        assert _report(verify_store(sealed)) == _report(quick)


def test_edited_body_names_its_record(sealed: Path) -> None:
    _damage(sealed, "body", 17)
    rep = verify_store(sealed, full=True)
    assert (rep.damage, rep.first_bad_seq, rep.detail) == (
        "tamper", 17, "record 17: body does not match its leaf hash")
    assert verify_store(sealed).ok  # quick verification does not re-hash bodies


def test_gap_names_the_missing_record(sealed: Path) -> None:
    _damage(sealed, "missing", 9)
    for full in (True, False):
        rep = verify_store(sealed, full=full)
        assert (rep.damage, rep.first_bad_seq, rep.detail) == (
            "tamper", 9, "record 9 is missing (next stored is 10)")


def test_integrity_check_runs_beside_the_other_steps(
    sealed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    real_run = _check._IntegrityCheck.run

    def run(self: _check._IntegrityCheck) -> None:
        threads.append(threading.current_thread().name)
        real_run(self)

    monkeypatch.setattr(_check._IntegrityCheck, "run", run)
    assert verify_store(sealed, full=True).ok
    assert threads == ["ect-store-integrity-check"]
    assert verify_store(sealed).ok  # quick verification has no step 0
    assert threads == ["ect-store-integrity-check"]


def test_damage_found_beside_the_other_steps_is_reported_as_in_order(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte flips anywhere in the file: the report of full verification with step 0 in its own
    thread equals the report with every step in order on one connection (step 0 first)."""
    real = _verify.check_connection

    def in_order(*args: Any, reopen: Any = None, **kwargs: Any) -> Any:
        return real(*args, **kwargs)

    data = template.read_bytes()
    rng = random.Random(30)
    kinds: set[str | None] = set()
    for k in range(30):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(100, len(buf))
            buf[at] ^= 1 << rng.randrange(8)
        path = tmp_path / f"m{k}.db"
        path.write_bytes(bytes(buf))
        shutil.copyfile(checkpoint_path(template), checkpoint_path(path))
        beside = _report(verify_store(path, full=True))
        with monkeypatch.context() as m:
            m.setattr(_verify, "check_connection", in_order)
            assert _report(verify_store(path, full=True)) == beside, k
        kinds.add(beside[1])
    assert "corrupt" in kinds and len(kinds) >= 2, kinds
