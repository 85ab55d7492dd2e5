"""Manifest export validated against the schedule, signed, verifiable offline (DESIGN §6)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.canonical import canonical_bytes, digest, loads_strict
from runner.store import (
    ManifestInvalid,
    ScheduleMismatch,
    SignatureInvalid,
    Store,
    TamperDetected,
    TruncationDetected,
    export_manifest,
    generate_key,
    verify_manifest,
)

from .conftest import cell_body, drop_triggers, raw, restore_triggers

ROWS = [cell_body(i)["schedule_row"] for i in range(6)]


@pytest.fixture
def exported(new_store: Callable[..., Store], tmp_path: Path) -> tuple[Path, Path, Path]:
    s = new_store(n=6)
    s.attempt_begin({"cell_id": "c001"})
    doc = export_manifest(s, ROWS, tmp_path / "manifest.json")
    s.close()
    m = doc["manifest"]
    assert m["record_count"] == 7 and m["store_id"] == s.store_id
    assert [c["cell_id"] for c in m["cells"]] == [r["cell_id"] for r in ROWS]
    assert set(m["cells"][0]) == {"row", "cell_id", "result_digest"}
    assert set(m["audit_groups"][0]) == {"row", "cell_id", "audit_digest"}
    assert m["status_counts"] == {"goal_met": 4, "needs_human": 2}
    assert doc["manifest_digest"] == digest("ect/manifest/v1", m)
    out = tmp_path / "manifest.json"
    assert out.read_bytes() == canonical_bytes(doc)
    return out, s.path, tmp_path / "signing.key.pub"


def test_verify_offline_from_three_files(exported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    man, store, pub = exported
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for f in (man, store, pub):
        shutil.copy(f, elsewhere / f.name)  # no .checkpoint file travels with them
    verify_manifest(elsewhere / man.name, elsewhere / store.name, elsewhere / pub.name)


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (ROWS[:5], "beyond the schedule"),
        ([*ROWS, cell_body(6)["schedule_row"]], "no committed record"),
        ([ROWS[1], ROWS[0], *ROWS[2:]], "not schedule row 0"),
        ([*ROWS[:5], ROWS[4]], "not schedule row 5"),
    ],
    ids=["extra-record", "missing-row", "out-of-order", "duplicate-row"],
)
def test_schedule_mismatch(
    new_store: Callable[..., Store], tmp_path: Path, rows: list[dict], match: str
) -> None:
    s = new_store(n=6)
    with pytest.raises(ScheduleMismatch, match=match):
        export_manifest(s, rows, tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()
    s.close()


def test_duplicate_cell_refused(new_store: Callable[..., Store], tmp_path: Path) -> None:
    s = new_store(n=2)
    s.append(cell_body(1))  # the same cell committed twice
    rows = [ROWS[0], ROWS[1], ROWS[1]]
    with pytest.raises(ScheduleMismatch, match="repeated"):
        export_manifest(s, rows, tmp_path / "m.json")
    s.close()


def _rewrite(man: Path, edit: Callable[[dict], None], *, redigest: bool) -> None:
    doc = loads_strict(man.read_bytes())
    edit(doc["manifest"])
    if redigest:
        doc["manifest_digest"] = digest("ect/manifest/v1", doc["manifest"])
    man.write_bytes(canonical_bytes(doc))


def test_edited_manifest_fails_digest(exported: tuple[Path, Path, Path]) -> None:
    man, store, pub = exported
    _rewrite(
        man, lambda m: m["cells"][0].update(result_digest="sha256:" + "0" * 64), redigest=False
    )
    with pytest.raises(ManifestInvalid, match="manifest_digest"):
        verify_manifest(man, store, pub)


def test_redigested_manifest_fails_signature(exported: tuple[Path, Path, Path]) -> None:
    man, store, pub = exported
    _rewrite(man, lambda m: m["cells"][0].update(result_digest="sha256:" + "0" * 64), redigest=True)
    with pytest.raises(SignatureInvalid):
        verify_manifest(man, store, pub)


def test_wrong_public_key(exported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    man, store, _ = exported
    generate_key(tmp_path / "other.key")
    with pytest.raises(SignatureInvalid):
        verify_manifest(man, store, tmp_path / "other.key.pub")


def test_store_tampered_after_export(exported: tuple[Path, Path, Path]) -> None:
    man, store, pub = exported
    conn = raw(store)
    saved = drop_triggers(conn)
    conn.execute("UPDATE records SET body = ? WHERE seq = 3", (canonical_bytes(cell_body(30)),))
    restore_triggers(conn, saved)
    conn.close()
    with pytest.raises(TamperDetected) as e:
        verify_manifest(man, store, pub)
    assert e.value.seq == 3


def test_store_truncated_after_export(exported: tuple[Path, Path, Path]) -> None:
    man, store, pub = exported
    conn = raw(store)
    saved = drop_triggers(conn)
    conn.execute("DELETE FROM records WHERE seq >= 5")
    conn.execute("DELETE FROM checkpoints")
    restore_triggers(conn, saved)
    conn.close()
    with pytest.raises(TruncationDetected):
        verify_manifest(man, store, pub)


def test_malformed_manifest(exported: tuple[Path, Path, Path]) -> None:
    man, store, pub = exported
    man.write_text('{"manifest": 1, "manifest": 2}')
    with pytest.raises(ManifestInvalid):
        verify_manifest(man, store, pub)
    man.write_text('{"manifest": {}, "manifest_digest": "x", "signature": "y"}')
    with pytest.raises(ManifestInvalid):
        verify_manifest(man, store, pub)
