"""Signed final manifest (``ect export``) and its offline verification (DESIGN §6).

The manifest file is the canonical JSON of::

    {"manifest": {...}, "manifest_digest": digest("ect/manifest/v1", manifest),
     "signature": base64 Ed25519 signature over the ASCII bytes of manifest_digest}
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runner.canonical import canonical_bytes, digest, is_digest, loads_strict
from runner.errors import FormatError
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

__all__ = ["MANIFEST_FORMAT", "export_manifest", "verify_manifest"]

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


def _status(result: Any) -> str:
    """The status a cell is counted under: ``result["status"]`` if a string, else
    ``result["outcome"]["stop_reason"]`` if a string, else ``"unspecified"``."""
    if isinstance(result, dict):
        if isinstance(result.get("status"), str):
            return str(result["status"])
        outcome = result.get("outcome")
        if isinstance(outcome, dict) and isinstance(outcome.get("stop_reason"), str):
            return str(outcome["stop_reason"])
    return "unspecified"


def _cells(
    bodies: Sequence[tuple[int, dict[str, Any]]],
) -> tuple[list[Any], list[Any], dict[str, int]]:
    cells: list[dict[str, Any]] = []
    audits: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for seq, body in bodies:
        for k in ("row", "cell_id", "result_digest", "audit_digest"):
            if k not in body:
                raise ScheduleMismatch(f"record {seq} has no {k!r}: not a cell record")
        if not is_digest(body["result_digest"]) or not is_digest(body["audit_digest"]):
            raise ScheduleMismatch(f"record {seq}: result_digest/audit_digest are not digests")
        cells.append(
            {"row": body["row"], "cell_id": body["cell_id"], "result_digest": body["result_digest"]}
        )
        audits.append(
            {"row": body["row"], "cell_id": body["cell_id"], "audit_digest": body["audit_digest"]}
        )
        st = _status(body.get("result"))
        counts[st] = counts.get(st, 0) + 1
    return cells, audits, dict(sorted(counts.items()))


def _build(
    header: dict[str, Any],
    size: int,
    head: bytes,
    root: bytes,
    attempts_size: int,
    attempts_head: bytes,
    bodies: Sequence[tuple[int, dict[str, Any]]],
) -> dict[str, Any]:
    cells, audits, counts = _cells(bodies)
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
    store: Store, schedule_rows: Sequence[dict[str, Any]], out_path: str | os.PathLike[str]
) -> dict[str, Any]:
    """Checkpoint ``store``, check its records are exactly ``schedule_rows`` (each row once, in
    order, nothing extra), then write the signed manifest atomically to ``out_path``.

    A record matches row i when its ``schedule_row_digest`` equals
    ``digest("ect/schedule-row/v1", schedule_rows[i])`` and the digest of its own
    ``schedule_row``, and its ``row``/``cell_id`` equal the row's (when the row has them).

    Raises:
        ScheduleMismatch: missing, extra, duplicated or out-of-order rows (nothing is written).
        StoreUsageError: the store was opened without its signing key.
    """
    note = store.checkpoint()
    cp = note["checkpoint"]
    size = cp["size"]
    bodies = [(r.seq, r.body) for r in store.records(1) if r.seq < size]
    n = len(schedule_rows)
    seen: set[str] = set()
    for i, row in enumerate(schedule_rows):
        if not isinstance(row, dict):
            raise TypeError("schedule rows must be dicts")
        if i >= len(bodies):
            cid = row.get("cell_id", "?")
            raise ScheduleMismatch(
                f"schedule row {i} (cell {cid}) has no committed record: "
                f"{n - len(bodies)} of {n} rows missing"
            )
        seq, body = bodies[i]
        want = digest("ect/schedule-row/v1", row)
        if body.get("schedule_row_digest") != want:
            raise ScheduleMismatch(f"record {seq} is not schedule row {i} (digest differs)")
        if digest("ect/schedule-row/v1", body.get("schedule_row")) != want:
            raise ScheduleMismatch(f"record {seq}: schedule_row does not match its digest")
        for k in ("row", "cell_id"):
            if k in row and body.get(k) != row[k]:
                raise ScheduleMismatch(f"record {seq}: {k} {body.get(k)!r} != schedule {row[k]!r}")
        cid = body.get("cell_id")
        if not isinstance(cid, str) or cid in seen:
            raise ScheduleMismatch(f"record {seq}: cell_id {cid!r} missing or repeated")
        seen.add(cid)
    if len(bodies) > n:
        raise ScheduleMismatch(
            f"the store holds {len(bodies) - n} records beyond the schedule's {n} rows "
            f"(first extra: record {bodies[n][0]})"
        )
    manifest = _build(
        store.header,
        size,
        bytes.fromhex(cp["chain_head"]),
        bytes.fromhex(cp["root"]),
        cp["attempts_size"],
        bytes.fromhex(cp["attempts_head"]),
        bodies,
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
) -> None:
    """Verify offline that the manifest is signed by the key and describes the store exactly.

    Needs only the three files: the manifest acts as the checkpoint (no ``.checkpoint`` file
    is required). Runs full store verification under the pinned key.

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
            bodies,
        )
    except (ScheduleMismatch, KeyError, TypeError) as e:
        raise ManifestInvalid(f"store records are not cell records: {e}") from e
    for k in sorted(_MANIFEST_KEYS):
        if expected[k] != m[k]:
            raise ManifestInvalid(f"manifest field {k!r} does not match the store")
