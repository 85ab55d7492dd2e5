"""``ect export``: the signed final manifest, only for a complete and valid store (DESIGN §6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.canonical import digest
from runner.errors import StudyError
from runner.study._execute import cell_result_digest
from runner.study._lock import LockMismatch, check_lock, lock_digest

__all__ = ["IncompleteStore", "export_study", "key_path_for"]


class IncompleteStore(StudyError):
    """The store does not hold every schedule row exactly once with valid digests."""


def key_path_for(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".key")


def export_study(store_path: Path, out_path: Path, spec_path: Path) -> dict[str, Any]:
    """Verify the store in full against the current lock, then write the signed manifest.

    Raises:
        LockMismatch: the store was made under another lock, or the files drifted.
        IncompleteStore: a schedule row is missing, or a record's result/audit digest does not
            match its content.
        StoreError: the store does not verify (damage is named with its first bad seq).
    """
    from runner.store import Store, load_signing_key, verify_store

    _, _, lock, rows = check_lock(spec_path)
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
        for rec in store.records(1):
            body = rec.body
            if cell_result_digest(body["result"]) != body.get("result_digest"):
                raise IncompleteStore(f"record {rec.seq}: result_digest does not match its result")
            if digest("ect/record/v1", body["audit"]) != body.get("audit_digest"):
                raise IncompleteStore(f"record {rec.seq}: audit_digest does not match its audit")
        from runner.store import export_manifest

        return export_manifest(store, rows, out_path)
