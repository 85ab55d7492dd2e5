"""Manifest export of the cells the caller read, signed, verifiable offline (docs/store.md).

Matching records against the schedule is the study's job (tests/study/test_records.py); the
store checks only that it was handed one well-formed entry per committed record."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.canonical import canonical_bytes, digest, loads_strict
from runner.store import (
    ManifestCell,
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

from .conftest import cell_body, cell_of, drop_triggers, manifest_cell, raw, restore_triggers

CELLS = [manifest_cell(i) for i in range(6)]


@pytest.fixture
def exported(new_store: Callable[..., Store], tmp_path: Path) -> tuple[Path, Path, Path]:
    s = new_store(n=6)
    s.attempt_begin({"cell_id": "c001"})
    doc = export_manifest(s, CELLS, tmp_path / "manifest.json")
    s.close()
    m = doc["manifest"]
    assert m["record_count"] == 7 and m["store_id"] == s.store_id
    assert [c["cell_id"] for c in m["cells"]] == [c.cell_id for c in CELLS]
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
    verify_manifest(elsewhere / man.name, elsewhere / store.name, elsewhere / pub.name, cell_of)


@pytest.mark.parametrize(
    ("cells", "match"),
    [
        (CELLS[:5], "5 cells given for the 6 records"),
        ([*CELLS, manifest_cell(6)], "7 cells given for the 6 records"),
        ([*CELLS[:5], CELLS[4]], "repeated"),
    ],
    ids=["extra-record", "missing-cell", "duplicate-cell"],
)
def test_cells_must_be_one_per_record(
    new_store: Callable[..., Store], tmp_path: Path, cells: list[ManifestCell], match: str
) -> None:
    s = new_store(n=6)
    with pytest.raises(ScheduleMismatch, match=match):
        export_manifest(s, cells, tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()
    s.close()


def test_cell_digests_must_be_digests(new_store: Callable[..., Store], tmp_path: Path) -> None:
    s = new_store(n=1)
    bad = ManifestCell(0, "c000", "not a digest", CELLS[0].audit_digest, "goal_met")
    with pytest.raises(ScheduleMismatch, match="not digests"):
        export_manifest(s, [bad], tmp_path / "m.json")
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
        verify_manifest(man, store, pub, cell_of)


def test_redigested_manifest_fails_signature(exported: tuple[Path, Path, Path]) -> None:
    man, store, pub = exported
    _rewrite(man, lambda m: m["cells"][0].update(result_digest="sha256:" + "0" * 64), redigest=True)
    with pytest.raises(SignatureInvalid):
        verify_manifest(man, store, pub, cell_of)


def test_wrong_public_key(exported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    man, store, _ = exported
    generate_key(tmp_path / "other.key")
    with pytest.raises(SignatureInvalid):
        verify_manifest(man, store, tmp_path / "other.key.pub", cell_of)


def test_store_tampered_after_export(exported: tuple[Path, Path, Path]) -> None:
    man, store, pub = exported
    conn = raw(store)
    saved = drop_triggers(conn)
    conn.execute("UPDATE records SET body = ? WHERE seq = 3", (canonical_bytes(cell_body(30)),))
    restore_triggers(conn, saved)
    conn.close()
    with pytest.raises(TamperDetected) as e:
        verify_manifest(man, store, pub, cell_of)
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
        verify_manifest(man, store, pub, cell_of)


def test_malformed_manifest(exported: tuple[Path, Path, Path]) -> None:
    man, store, pub = exported
    man.write_text('{"manifest": 1, "manifest": 2}')
    with pytest.raises(ManifestInvalid):
        verify_manifest(man, store, pub, cell_of)
    man.write_text('{"manifest": {}, "manifest_digest": "x", "signature": "y"}')
    with pytest.raises(ManifestInvalid):
        verify_manifest(man, store, pub, cell_of)


def test_verification_reads_cells_only_through_the_caller(
        new_store: Callable[..., Store], tmp_path: Path) -> None:
    # The store knows no record shape: bodies with other field names verify when the caller
    # reads them, and the caller's reading decides (the store reads no body field itself).
    s = new_store(n=0)
    d = [digest("ect/value/v1", {"i": i}) for i in range(3)]
    for i in range(3):
        s.append({"n": i, "id": f"x{i}", "r": d[i], "a": d[i], "state": "done"})
    cells = [ManifestCell(i, f"x{i}", d[i], d[i], "done") for i in range(3)]
    man = tmp_path / "m.json"
    export_manifest(s, cells, man)
    s.close()
    pub = tmp_path / "signing.key.pub"
    seen: list[int] = []

    def read(seq: int, body: Any) -> ManifestCell:
        seen.append(seq)
        return ManifestCell(body["n"], body["id"], body["r"], body["a"], body["state"])

    verify_manifest(man, s.path, pub, read)
    assert seen == [1, 2, 3]

    def other_status(seq: int, body: Any) -> ManifestCell:
        return dataclasses.replace(read(seq, body), status="other")

    with pytest.raises(ManifestInvalid, match="status_counts"):
        verify_manifest(man, s.path, pub, other_status)

    def refuse(seq: int, body: Any) -> ManifestCell:
        raise ScheduleMismatch(f"record {seq} is not mine")

    with pytest.raises(ManifestInvalid, match="record 1 is not mine"):
        verify_manifest(man, s.path, pub, refuse)
