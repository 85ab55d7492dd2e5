"""Write every snapshot and checkpoint as files ``ect verify`` reads (``ect tasks export DIR``).

Layout (documented in docs/protocol.md)::

    DIR/manifest.json                                  {"digest", "counts", "manifest"}
    DIR/worlds/<world_id>.json                         world snapshot, canonical bytes
    DIR/static/<task_id>/<condition>/contract.json     ect.contract/1
                                    /ledger.json       ect.ledger/1
                                    /certificate.json  ect.certificate/1
                                    /snapshot.json     condition, gold decision, flags, trace
    DIR/closed_loop/<task_id>/<clean|incomplete>/contract.json, ledger.json,
                                    certificate.json   (the checkpoint's naive certificate)
                                    checkpoint.json    fault, recovery calls, needs_human, trace

So ``ect verify --contract D/contract.json --ledger D/ledger.json --certificate
D/certificate.json`` works in any snapshot directory D. JSON files other than the world
snapshots are indented for reading; files are written in a fixed order with fixed bytes.
"""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path
from typing import Any

from runner.canonical import canonical_bytes
from runner.worlds._errors import ExportRefused
from runner.worlds._grid import closed_loop_checkpoints, static_grid
from runner.worlds._manifest import manifest_counts, task_manifest, task_manifest_digest
from runner.worlds._world import WORLDS_CLOSED_LOOP, WORLDS_STATIC, build_world

__all__ = ["export_all"]


def _pretty(obj: Any) -> bytes:
    # Display encoding for people; every digest is computed from canonical bytes elsewhere.
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")  # noqa: TID251


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def export_all(directory: str | Path) -> dict[str, int]:
    """Export the whole benchmark under ``directory``; returns counts of what was written.

    Raises:
        ExportRefused: ``directory`` exists and is not an empty directory (nothing is overwritten).
    """
    final = Path(directory)
    if final.exists() and (not final.is_dir() or any(final.iterdir())):
        raise ExportRefused(f"export directory {final} exists and is not empty")
    # Everything is written under a temporary sibling and renamed into place at the end, so a
    # full disk or an interrupt leaves no half-written export (which would also block a retry).
    root = final.parent / f".{final.name}.exporting-{secrets.token_hex(4)}"
    root.mkdir()
    try:
        counts = _export_into(root)
        if final.exists():
            final.rmdir()  # empty, checked above
        root.rename(final)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return counts


def _export_into(root: Path) -> dict[str, int]:
    for w in (*WORLDS_STATIC, *WORLDS_CLOSED_LOOP):
        _write(root / "worlds" / f"{w}.json", canonical_bytes(build_world(w).snapshot()))
    manifest = {
        "digest": task_manifest_digest(),
        "counts": manifest_counts(),
        "manifest": task_manifest(),
    }
    _write(root / "manifest.json", _pretty(manifest))
    snapshots = 0
    for s in static_grid():
        d = root / "static" / s.task.task_id / s.condition
        _write(d / "contract.json", _pretty(s.task.contract.to_json()))
        _write(d / "ledger.json", _pretty(s.ledger.to_json()))
        _write(d / "certificate.json", _pretty(s.certificate.to_json()))
        meta = s.to_json()
        for key in ("ledger", "certificate"):
            del meta[key]
        _write(d / "snapshot.json", _pretty(meta))
        snapshots += 1
    checkpoints = 0
    for c in closed_loop_checkpoints():
        d = root / "closed_loop" / c.task.task_id / c.kind
        _write(d / "contract.json", _pretty(c.task.contract.to_json()))
        _write(d / "ledger.json", _pretty(c.ledger.to_json()))
        _write(d / "certificate.json", _pretty(c.naive_certificate.to_json()))
        meta = c.to_json()
        for key in ("ledger", "naive_certificate"):
            del meta[key]
        _write(d / "checkpoint.json", _pretty(meta))
        checkpoints += 1
    return {
        "worlds": len(WORLDS_STATIC) + len(WORLDS_CLOSED_LOOP),
        "snapshots": snapshots,
        "checkpoints": checkpoints,
    }
