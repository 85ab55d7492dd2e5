"""Store-corruption campaign: random byte flips and truncations of a finished store.

Each damaged copy is verified in full. Either verification reports damage, or the change is
proven harmless: every fact the store asserts -- every record (body, leaf, chain), every attempt
row, every blob, every stored checkpoint, the chain head and the Merkle root -- reads back
exactly as in the original. A change that verification accepts but that alters any of those is
an *undetected harmful change*; the campaign requires zero. Verification must also never raise
(a crash on damage is a finding too).

The default run makes a small fast campaign; ``pytest -m slow`` runs the long one
(``make test-slow``).
"""

from __future__ import annotations

import hashlib
import random
import shutil
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runner.store import Store, checkpoint_path, generate_key, merkle, verify_store

from .conftest import cell_body, make_header


@dataclass(frozen=True)
class Original:
    path: Path
    data: bytes
    checkpoint: bytes
    facts: dict[str, Any]


def read_facts(path: Path) -> dict[str, Any]:
    """Everything the store asserts, read with plain SQLite (no store code involved)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        records = conn.execute("SELECT seq, body, leaf, chain FROM records ORDER BY seq").fetchall()
        leaves = [bytes(r[2]) for r in records]
        return {
            "records": records,
            "attempts": conn.execute(
                "SELECT seq, kind, ref, cell_id, body, leaf, chain FROM attempts ORDER BY seq"
            ).fetchall(),
            "blobs": conn.execute("SELECT digest, data FROM blobs ORDER BY digest").fetchall(),
            "checkpoints": conn.execute("SELECT id, body FROM checkpoints ORDER BY id").fetchall(),
            "chain_head": records[-1][3] if records else None,
            "merkle_root": merkle.root(leaves),
        }
    finally:
        conn.close()


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Original:
    d = tmp_path_factory.mktemp("campaign")
    key = generate_key(d / "k.key")
    rng = random.Random(7)
    blobs = [rng.randbytes(n) for n in (10, 700, 5000, 9000)]
    header = make_header(lock_blob="sha256:" + hashlib.sha256(blobs[0]).hexdigest())
    with Store.create(d / "run.db", header=header, signing_key=key, blobs=blobs[:1]) as s:
        for i in range(1, 25):
            a = s.attempt_begin({"cell_id": f"c{i:03d}", "n": i})
            s.attempt_end(a, {"ok": True, "tokens": i * 7})
            s.append(cell_body(i))
            if i % 4 == 0:
                s.checkpoint()
        for b in blobs[1:]:
            s.put_blob(b)
        s.checkpoint()
    path = d / "run.db"
    assert verify_store(path, full=True).ok
    return Original(path, path.read_bytes(), checkpoint_path(path).read_bytes(),
                    read_facts(path))


def _mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(["flip", "flip", "flip", "byte", "truncate", "zero_run"])
    buf = bytearray(data)
    if kind == "flip":
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
        return f"flip bit at {i}", bytes(buf)
    if kind == "byte":
        i = rng.randrange(len(buf))
        buf[i] = (buf[i] + rng.randrange(1, 256)) % 256
        return f"change byte at {i}", bytes(buf)
    if kind == "zero_run":
        i = rng.randrange(len(buf))
        n = rng.randrange(1, 64)
        buf[i:i + n] = bytes(len(buf[i:i + n]))
        return f"zero {n} bytes at {i}", bytes(buf)
    n = rng.randrange(len(buf))
    return f"truncate to {n} bytes", bytes(buf[:n])


def campaign(original: Original, tmp_path: Path, n: int, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    outcome: Counter[str] = Counter()
    harmful: list[str] = []
    for k in range(n):
        what, data = _mutate(original.data, rng)
        if data == original.data:
            continue
        d = tmp_path / f"m{k}"
        d.mkdir()
        target = d / "run.db"
        target.write_bytes(data)
        checkpoint_path(target).write_bytes(original.checkpoint)
        try:
            report = verify_store(target, full=True)
        except Exception as e:  # a crash is a finding, not a verdict
            harmful.append(f"{what}: verification raised {type(e).__name__}: {e}")
            continue
        if not report.ok:
            outcome[f"detected:{report.damage}"] += 1
        else:
            try:
                same = read_facts(target) == original.facts
            except sqlite3.Error as e:
                same, what = False, f"{what} (facts unreadable: {e})"
            if same:
                outcome["harmless"] += 1
            else:
                harmful.append(f"{what}: verified intact but the facts differ")
        shutil.rmtree(d)
    assert not harmful, "\n".join(harmful)
    return outcome


def test_corruption_campaign_fast(original: Original, tmp_path: Path) -> None:
    outcome = campaign(original, tmp_path, 40, seed=2026)
    assert sum(v for k, v in outcome.items() if k.startswith("detected")) > 0
    print("corruption campaign (fast):", dict(sorted(outcome.items())))


@pytest.mark.slow
def test_corruption_campaign_long(original: Original, tmp_path: Path) -> None:
    outcome = campaign(original, tmp_path, 1000, seed=20)
    print("corruption campaign (long):", dict(sorted(outcome.items())))


def test_truncation_at_every_page_boundary_is_detected(original: Original,
                                                       tmp_path: Path) -> None:
    page = int.from_bytes(original.data[16:18], "big") or 65536
    for n in range(0, len(original.data), page):
        target = tmp_path / f"t{n}.db"
        target.write_bytes(original.data[:n])
        checkpoint_path(target).write_bytes(original.checkpoint)
        report = verify_store(target, full=True)
        assert not report.ok, n
