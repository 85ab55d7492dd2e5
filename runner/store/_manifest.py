"""Signed final manifest (``ect export``) and its offline verification (docs/store.md).

The manifest file is the canonical JSON of::

    {"manifest": {...}, "manifest_digest": digest("ect/manifest/v1", manifest),
     "signature": base64 Ed25519 signature over the ASCII bytes of manifest_digest}
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.canonical import canonical_bytes, digest, is_digest, loads_strict
from runner.errors import EctError, FormatError
from runner.store._check import check_connection
from runner.store._errors import (
    ManifestInvalid,
    ScheduleMismatch,
    SignatureInvalid,
    TamperDetected,
    TruncationDetected,
)
from runner.store._fsutil import atomic_write
from runner.store._keys import encode_public_key, load_public_key, verify_signature
from runner.store._store import Store
from runner.store._verify import _open_ro
from runner.store.merkle import Accumulator

__all__ = ["MANIFEST_FORMAT", "ManifestCell", "export_manifest", "verify_manifest"]

MANIFEST_FORMAT = "ect.manifest/1"
_MANIFEST_KEYS = frozenset(
    {
        "format",
        "store_id",
        "public_key",
        "lock_digest",
        "preflight_digest",
        "record_count",
        "chain_head",
        "merkle_root",
        "attempts",
        "cells",
        "audit_groups",
        "status_counts",
        "sandbox_layers",
    }
)


@dataclass(frozen=True, slots=True)
class ManifestCell:
    """What the manifest lists of one committed cell; the caller (``runner.study``) reads it
    from its own record type, so the store needs no knowledge of the record's shape to export
    or to verify a manifest."""

    row: int
    cell_id: str
    result_digest: str
    audit_digest: str
    status: str


def _cells(cells: Sequence[ManifestCell]) -> tuple[list[Any], list[Any], dict[str, int]]:
    counts: dict[str, int] = {}
    for c in cells:
        if not is_digest(c.result_digest) or not is_digest(c.audit_digest):
            raise ScheduleMismatch(f"cell {c.cell_id!r}: result_digest/audit_digest are not digests")
        counts[c.status] = counts.get(c.status, 0) + 1
    return (
        [{"row": c.row, "cell_id": c.cell_id, "result_digest": c.result_digest} for c in cells],
        [{"row": c.row, "cell_id": c.cell_id, "audit_digest": c.audit_digest} for c in cells],
        dict(sorted(counts.items())),
    )


def _build(
    header: dict[str, Any],
    size: int,
    head: bytes,
    root: bytes,
    attempts_size: int,
    attempts_head: bytes,
    entries: Sequence[ManifestCell],
) -> dict[str, Any]:
    cells, audits, counts = _cells(entries)
    return {
        "format": MANIFEST_FORMAT,
        "store_id": header["store_id"],
        "public_key": header["public_key"],
        "lock_digest": header["lock_digest"],
        "preflight_digest": header["preflight_digest"],
        "record_count": size,
        "chain_head": {"seq": size - 1, "hash": head.hex()},
        "merkle_root": root.hex(),
        "attempts": {"count": attempts_size, "head": attempts_head.hex()},
        "cells": cells,
        "audit_groups": audits,
        "status_counts": counts,
        # what isolation produced the cells (from the run header; None for stores without it)
        "sandbox_layers": header.get("sandbox_layers"),
    }


def export_manifest(
    store: Store, cells: Sequence[ManifestCell], out_path: str | os.PathLike[str]
) -> dict[str, Any]:
    """Checkpoint ``store`` and write the signed manifest listing ``cells`` atomically to
    ``out_path``. ``cells`` are the committed records in order, one each, as the caller read
    them (``runner.study`` matches its records against the schedule before it calls here).

    Raises:
        ScheduleMismatch: ``cells`` is not one entry per committed record, or a cell id repeats
            (nothing is written).
        StoreUsageError: the store was opened without its signing key.
    """
    note = store.checkpoint()
    cp = note["checkpoint"]
    size = cp["size"]
    if len(cells) != size - 1:
        raise ScheduleMismatch(
            f"{len(cells)} cells given for the {size - 1} records committed in the store"
        )
    seen: set[str] = set()
    for c in cells:
        if not isinstance(c.cell_id, str) or c.cell_id in seen:
            raise ScheduleMismatch(f"cell_id {c.cell_id!r} missing or repeated")
        seen.add(c.cell_id)
    manifest = _build(
        store.header,
        size,
        bytes.fromhex(cp["chain_head"]),
        bytes.fromhex(cp["root"]),
        cp["attempts_size"],
        bytes.fromhex(cp["attempts_head"]),
        cells,
    )
    mdigest = digest("ect/manifest/v1", manifest)
    doc = {
        "manifest": manifest,
        "manifest_digest": mdigest,
        "signature": store.sign(mdigest.encode("ascii")),
    }
    atomic_write(out_path, canonical_bytes(doc), hook=store._hook, point="manifest")
    return doc


def verify_manifest(
    manifest_path: str | os.PathLike[str],
    store_path: str | os.PathLike[str],
    public_key_path: str | os.PathLike[str],
    cell_of: Callable[[int, Any], ManifestCell],
) -> None:
    """Verify offline that the manifest is signed by the key and describes the store exactly.

    Needs only the three files: the manifest acts as the checkpoint (no ``.checkpoint`` file
    is required). Runs full store verification under the pinned key. The cells, audit groups
    and status counts are rebuilt from the verified records through ``cell_of``, the caller's
    record type: ``cell_of(seq, body)`` is the manifest entry of one committed record body (its
    seq, its parsed JSON), raising an ``EctError`` when the body is not one of the caller's
    records (``runner.study.verify_export`` passes the study's ``CellRecord`` reading). The
    store never reads a field of a record body.

    Raises:
        ManifestInvalid: malformed manifest, digest mismatch, or content that differs from the
            store (store id, lock, head, root, cells, audit groups, counts).
        SignatureInvalid: the signature or key does not verify.
        StoreDamaged: the store itself does not verify (Tamper/Truncation/...).
    """
    key = load_public_key(public_key_path)
    try:
        doc = loads_strict(Path(manifest_path).read_bytes())
    except FormatError as e:
        raise ManifestInvalid(f"{manifest_path}: {e}") from e
    if not isinstance(doc, dict) or set(doc) != {"manifest", "manifest_digest", "signature"}:
        raise ManifestInvalid(f"{manifest_path}: not a signed manifest")
    m = doc["manifest"]
    if not isinstance(m, dict) or set(m) != _MANIFEST_KEYS or m.get("format") != MANIFEST_FORMAT:
        raise ManifestInvalid(f"{manifest_path}: manifest fields are not {MANIFEST_FORMAT}")
    mdigest = digest("ect/manifest/v1", m)
    if doc["manifest_digest"] != mdigest:
        raise ManifestInvalid(f"{manifest_path}: manifest_digest does not match its content")
    if m["public_key"] != encode_public_key(key):
        raise SignatureInvalid("the manifest names a different public key")
    if not verify_signature(key, mdigest.encode("ascii"), doc["signature"]):
        raise SignatureInvalid(f"{manifest_path}: signature does not verify")
    size = m["record_count"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ManifestInvalid("manifest record_count is not a positive integer")
    att, ch = m["attempts"], m["chain_head"]
    if not (
        isinstance(att, dict)
        and isinstance(att.get("count"), int)
        and not isinstance(att.get("count"), bool)
        and att["count"] >= 0
        and isinstance(ch, dict)
        and isinstance(ch.get("hash"), str)
    ):
        raise ManifestInvalid("manifest attempts / chain_head are malformed")
    acount: int = att["count"]
    store_path = Path(store_path)
    if not store_path.is_file():
        raise FileNotFoundError(2, "No such store", os.fspath(store_path))
    conn = _open_ro(store_path, 10.0)
    try:
        res = check_connection(
            conn, store_path, full=True, public_key=key, external=None, require_external=False
        )
        if res.count < size:
            raise TruncationDetected(
                f"the manifest covers {size} records but the store holds {res.count}",
                seq=res.count,
            )
        acc = Accumulator()
        bodies: list[tuple[int, dict[str, Any]]] = []
        head = b""
        for seq, body, leaf, chain in conn.execute(
            "SELECT seq, body, leaf, chain FROM records WHERE seq < ? ORDER BY seq", (size,)
        ):
            acc.append(leaf)
            head = chain
            if seq >= 1:
                bodies.append((seq, loads_strict(body)))
        row = None
        if acount:
            row = conn.execute("SELECT chain FROM attempts WHERE seq = ?", (acount - 1,)).fetchone()
    finally:
        conn.close()
    if acount > res.attempts_count:
        raise TruncationDetected(
            f"the manifest covers {acount} attempts but the journal holds {res.attempts_count}",
            seq=res.attempts_count,
        )
    if head.hex() != ch["hash"]:
        raise TamperDetected("store chain head differs from the manifest", seq=size - 1)
    if acc.root().hex() != m["merkle_root"]:
        raise TamperDetected("store Merkle root differs from the manifest", seq=size - 1)
    try:
        expected = _build(
            res.header,
            size,
            head,
            acc.root(),
            acount,
            bytes(row[0]) if row is not None else b"\x00" * 32,
            [cell_of(seq, body) for seq, body in bodies],
        )
    except (EctError, KeyError, TypeError) as e:
        raise ManifestInvalid(f"store records are not cell records: {e}") from e
    for k in sorted(_MANIFEST_KEYS):
        if expected[k] != m[k]:
            raise ManifestInvalid(f"manifest field {k!r} does not match the store")
