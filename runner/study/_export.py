"""``ect export``: the signed final manifest, only for a complete and valid store (DESIGN §6)."""

from __future__ import annotations

from pathlib import Path

from runner.canonical import JsonObject
from runner.errors import FormatError, StudyError
from runner.study._lock import LockMismatch, check_lock, lock_digest
from runner.study._records import CellRecord
from runner.study._spec import spec_for_store

__all__ = ["IncompleteStore", "export_study", "key_path_for"]


class IncompleteStore(StudyError):
    """The store does not hold every schedule row exactly once with valid digests."""


def key_path_for(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".key")


def export_study(store_path: Path, out_path: Path, spec_path: Path | None = None) -> JsonObject:
    """Verify the store in full against the current lock, then write the signed manifest.

    ``spec_path`` defaults to the spec the store's header records.

    Raises:
        LockMismatch: the store was made under another lock, or the files drifted.
        IncompleteStore: a schedule row is missing, or a record's result/audit digest does not
            match its content.
        StoreError: the store does not verify (damage is named with its first bad seq).
    """
    from runner.store import ManifestCell, Store, export_manifest, load_signing_key, verify_store

    _, _, lock, rows = check_lock(spec_for_store(store_path, spec_path))
    report = verify_store(store_path, full=True)
    if not report.ok:
        raise IncompleteStore(f"{store_path} does not verify: {report.damage} at seq "
                              f"{report.first_bad_seq} ({report.detail})")
    with Store.open(store_path, signing_key=load_signing_key(key_path_for(store_path))) as store:
        header = store.header
        if header.get("lock_digest") != lock_digest(lock):
            from runner.study._lock import Drift

            raise LockMismatch([Drift("store.lock_digest", str(header.get("lock_digest")),
                                      lock_digest(lock))])
        committed = store.count - 1
        if committed != len(rows):
            raise IncompleteStore(f"{store_path} holds {committed} of {len(rows)} cells; "
                                  f"finish it with `ect resume --store {store_path}`")
        cells = []
        for rec, want in zip(store.records(1), rows, strict=False):
            try:
                record = CellRecord.from_json(rec.body, f"record {rec.seq}")
            except FormatError as e:
                raise IncompleteStore(str(e)) from e
            problem = record.mismatch(want)
            if problem is not None:
                raise IncompleteStore(f"record {rec.seq} is not schedule row {want.row}: {problem}")
            cells.append(ManifestCell(record.row, record.cell_id, record.result_digest,
                                      record.audit_digest, record.result.stop_reason))
        return export_manifest(store, cells, out_path)
