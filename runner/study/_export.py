"""``ect export``: the signed final manifest, only for a complete and valid store (docs/store.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from runner.canonical import JsonObject
from runner.errors import ExitCategory, FormatError, StudyError
from runner.study._lock import LockMismatch, check_lock, lock_digest
from runner.study._records import CellRecord, RunHeader
from runner.study._spec import spec_for_store

if TYPE_CHECKING:
    from runner.store import ManifestCell

__all__ = ["IncompleteStore", "export_study", "key_path_for", "verify_export"]


class IncompleteStore(StudyError):
    """The store does not hold every schedule row exactly once with valid digests."""

    exit_category = ExitCategory.REFUSED


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
    from runner.store import Store, export_manifest, load_signing_key, verify_store

    _, _, lock, rows = check_lock(spec_for_store(store_path, spec_path))
    report = verify_store(store_path, full=True)
    if not report.ok:
        raise IncompleteStore(f"{store_path} does not verify: {report.label}: "
                              f"{report.detail}")
    with Store.open(store_path, signing_key=load_signing_key(key_path_for(store_path))) as store:
        try:
            header = RunHeader.from_header(store.header)
        except FormatError as e:
            raise IncompleteStore(f"{store_path} is not a run store: {e}") from e
        if header.lock_digest != lock_digest(lock):
            from runner.study._lock import Drift

            raise LockMismatch([Drift("store.lock_digest", header.lock_digest,
                                      lock_digest(lock))])
        committed = store.count - 1
        if committed != len(rows):
            # resume continues to the --limit the header records: past it, name the whole study
            target = (header.run_settings or {}).get("limit")
            more = (f" --limit {len(rows)}" if isinstance(target, int)
                    and not isinstance(target, bool) and target < len(rows) else "")
            raise IncompleteStore(f"{store_path} holds {committed} of {len(rows)} cells; "
                                  f"finish it with `ect resume --store {store_path}{more}`")
        cells = []
        for rec, want in zip(store.records(1), rows, strict=False):
            try:
                record = CellRecord.from_json(rec.body, f"record {rec.seq}")
            except FormatError as e:
                raise IncompleteStore(str(e)) from e
            problem = record.mismatch(want)
            if problem is not None:
                raise IncompleteStore(f"record {rec.seq} is not schedule row {want.row}: {problem}")
            cells.append(_manifest_cell(record))
        return export_manifest(store, cells, out_path)


def _manifest_cell(record: CellRecord) -> ManifestCell:
    """What the manifest lists of one cell: export and verification both read it here."""
    from runner.store import ManifestCell

    return ManifestCell(record.row, record.cell_id, record.result_digest, record.audit_digest,
                        record.result.stop_reason.value)


def _record_cell(seq: int, body: object) -> ManifestCell:
    return _manifest_cell(CellRecord.from_json(body, f"record {seq}"))


def verify_export(manifest_path: Path, store_path: Path,
                  public_key_path: Path | None = None) -> None:
    """Verify offline that a manifest written by :func:`export_study` is signed by the store's
    key and lists exactly the store's cells, each read as a :class:`CellRecord`.

    ``public_key_path`` defaults to ``<store>.key.pub``.

    Raises:
        ManifestInvalid: the manifest is malformed or differs from the store (a record that is
            not a cell record included).
        SignatureInvalid: the signature or key does not verify.
        StoreDamaged: the store itself does not verify.
    """
    from runner.store import public_key_path as default_public_key
    from runner.store import verify_manifest

    key = public_key_path or default_public_key(key_path_for(store_path))
    verify_manifest(manifest_path, store_path, key, _record_cell)
