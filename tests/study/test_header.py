"""The store alone says what it was run under: the lock and the preflight report are in it."""

from __future__ import annotations

from pathlib import Path

from runner.canonical import digest, loads_strict
from runner.store import Store
from runner.study import StudyLock, lock_digest, read_lock, study_paths
from tests.study.conftest import Reference


def test_the_lock_and_the_preflight_report_travel_in_the_store(reference: Reference) -> None:
    with Store.open(reference.store) as store:
        header = store.header
        lock = StudyLock.from_json(loads_strict(store.get_blob(header["lock_blob"])))
        report = loads_strict(store.get_blob(header["preflight_blob"]))
    assert lock == read_lock(study_paths(reference.spec).lock)
    assert lock_digest(lock) == header["lock_digest"]
    assert digest("ect/record/v1", report) == header["preflight_digest"]
    assert report["passed"] is True and report["lock_digest"] == header["lock_digest"]
    assert {c["name"] for c in report["checks"]} >= {"lock", "store", "credential", "generation",
                                                     "sandbox"}


def test_the_sandbox_layers_in_force_are_in_the_report_header_and_manifest(
    reference: Reference, tmp_path: Path
) -> None:
    """A reader of a result knows what isolation produced it (Landlock ABI, seccomp mode,
    cgroups, host uid), from the preflight report, the signed header and the manifest."""
    from runner.study import export_study

    with Store.open(reference.store) as store:
        header = store.header
        report = loads_strict(store.get_blob(header["preflight_blob"]))
    layers = header["sandbox_layers"]
    assert layers == report["sandbox"]
    assert layers["seccomp"]["mode"] == "filter" and layers["seccomp"]["default"] == "EPERM"
    assert layers["landlock_abi"] >= 1 and layers["host_uid"] != 0
    assert layers["missing_guarantees"] == [] and layers["allow_weaker_landlock_unsafe"] is False
    assert layers["guarantees"]["network"][0] == "network namespace (loopback only)"
    doc = export_study(reference.store, tmp_path / "manifest.json", reference.spec)
    assert doc["manifest"]["sandbox_layers"] == layers


def test_the_header_reads_back_as_a_run_header(reference: Reference) -> None:
    # The study's part of the header is one typed record: what run wrote is what resume,
    # export, preflight and replay read, field for field (the store's own fields aside).
    from runner.store import HEADER_RESERVED
    from runner.study import RunHeader

    with Store.open(reference.store) as store:
        header = store.header
    run = RunHeader.from_header(header)
    assert run.to_json() == {k: v for k, v in header.items() if k not in HEADER_RESERVED}
    assert (run.provider, run.simulated, run.executor) == ("simulated", True, "local")
    assert run.spec == str(reference.spec) and run.schedule_rows > 0
