"""The store alone says what it was run under: the lock and the preflight report are in it."""

from __future__ import annotations

from runner.canonical import digest, loads_strict
from runner.store import Store
from runner.study import lock_digest, read_lock, study_paths
from tests.study.conftest import Reference


def test_the_lock_and_the_preflight_report_travel_in_the_store(reference: Reference) -> None:
    with Store.open(reference.store) as store:
        header = store.header
        lock = loads_strict(store.get_blob(header["lock_blob"]))
        report = loads_strict(store.get_blob(header["preflight_blob"]))
    assert lock == read_lock(study_paths(reference.spec).lock)
    assert lock_digest(lock) == header["lock_digest"]
    assert digest("ect/record/v1", report) == header["preflight_digest"]
    assert report["passed"] is True and report["lock_digest"] == header["lock_digest"]
    assert {c["name"] for c in report["checks"]} >= {"lock", "store", "credential", "generation",
                                                     "sandbox"}
