"""The study's documents as typed records: the lock (StudyLock), the preflight report
(PreflightReport) and the run header (RunHeader, StoreHeader) read back what they write, and
refuse anything else naming the path."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from runner.canonical import RecordFormatError, canonical_bytes, digest, loads_strict
from runner.study import (
    HeaderProvider,
    LockedGeneration,
    LockError,
    PreflightCheck,
    PreflightReport,
    ProviderChoice,
    RunHeader,
    StoreHeader,
    StudyLock,
    generation_config,
    load_spec,
    read_lock,
    study_paths,
)
from tests.sizes import STUDY_CELLS

REPO = Path(__file__).resolve().parents[2]
V2 = REPO / "schedules" / "v2.toml"


def _lock_doc() -> dict[str, Any]:
    doc = loads_strict(study_paths(V2).lock.read_bytes())
    assert isinstance(doc, dict)
    return doc


def test_the_lock_reads_back_the_file_byte_for_byte() -> None:
    raw = study_paths(V2).lock.read_bytes()
    lock = read_lock(study_paths(V2).lock)
    assert lock.to_bytes() == raw
    assert canonical_bytes(lock.to_json()) + b"\n" == raw
    assert StudyLock.from_json(lock.to_json()) == lock
    assert lock.digest == digest("ect/lock/v1", loads_strict(raw))
    assert lock.schedule.rows == STUDY_CELLS and lock.spec.file == "v2.toml"
    assert lock.generation == generation_config(load_spec(V2))


def test_the_generation_config_round_trips() -> None:
    gen = generation_config(load_spec(V2))
    assert LockedGeneration.from_json(gen.to_json()) == gen
    assert gen.to_json() == _lock_doc()["generation"]


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d.update(extra=1), "lock: unknown field 'extra'"),
    (lambda d: d.pop("source_tree"), "lock: missing field 'source_tree'"),
    (lambda d: d["generation"].update(temperature="hot"),
     "lock.generation.temperature: expected a number, got string"),
    (lambda d: d["generation"]["retry"].pop("on_transport_failure"),
     "lock.generation.retry: missing field 'on_transport_failure'"),
    (lambda d: d["generation"]["simulated"]["planner"].update(p_reuse_draft=True),
     "lock.generation.simulated.planner.p_reuse_draft: expected a number, got boolean"),
    (lambda d: d["schedule"].update(rows=-1), "lock.schedule.rows: must be >= 0"),
    (lambda d: d["prompts"].update(planner="abc"), "lock.prompts.planner: expected a 'sha256:"),
    (lambda d: d["spec"].update(sha256=None), "lock.spec.sha256: expected a 'sha256:"),
    (lambda d: d.update(stop_rules=[]), "lock.stop_rules: expected an object or null, got array"),
])
def test_a_malformed_lock_is_refused_naming_the_path(edit: Any, needle: str) -> None:
    doc = copy.deepcopy(_lock_doc())
    edit(doc)
    with pytest.raises(RecordFormatError) as info:
        StudyLock.from_json(doc)
    assert needle in str(info.value)


def test_read_lock_names_the_malformed_field(tmp_path: Path) -> None:
    doc = _lock_doc()
    doc["schedule"]["rows"] = "576"
    path = tmp_path / "v2.lock.json"
    path.write_bytes(canonical_bytes(doc) + b"\n")
    with pytest.raises(LockError, match=r"not a well-formed ect.lock/1 lock: lock.schedule.rows"):
        read_lock(path)
    doc["format"] = "ect.lock/0"
    path.write_bytes(canonical_bytes(doc) + b"\n")
    with pytest.raises(LockError, match=r"is not an ect\.lock/1 lock"):
        read_lock(path)


def _report() -> PreflightReport:
    return PreflightReport(
        study="ect-v2", spec_path="schedules/v2.toml", store_path="stores/v2.db",
        provider=ProviderChoice("gemini", model="gemini-2.5-flash", credential_env="KEY"),
        lock_digest="sha256:" + "ab" * 32, committed_rows=3, probes="mandatory",
        checks=[PreflightCheck("lock", True, "pins"), PreflightCheck("store", True, "absent")],
        sandbox={"backend": "linux", "landlock_abi": 4})


def test_the_preflight_report_reads_back_what_it_writes() -> None:
    report = _report()
    doc = report.to_json()
    again = PreflightReport.from_json(loads_strict(canonical_bytes(doc)))
    assert again.to_json() == doc and again.digest == report.digest
    assert again.provider == report.provider and again.checks == report.checks
    assert again.passed and again.lock is None and again.credential is None


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d.update(passed=False), "preflight.passed: differs from what the checks say"),
    (lambda d: d.update(format="ect.preflight/0"), "preflight.format: expected"),
    (lambda d: d["checks"][1].update(ok="yes"), "preflight.checks[1].ok: expected a boolean"),
    (lambda d: d["provider"].pop("base_url"), "preflight.provider: missing field 'base_url'"),
    (lambda d: d.update(probes="some"), "preflight.probes: expected 'all' or 'mandatory'"),
    (lambda d: d.update(token="x"), "preflight: unknown field 'token'"),
])
def test_a_malformed_preflight_report_is_refused(edit: Any, needle: str) -> None:
    doc = copy.deepcopy(_report().to_json())
    edit(doc)
    with pytest.raises(RecordFormatError) as info:
        PreflightReport.from_json(doc)
    assert needle in str(info.value)


def test_a_preflight_report_older_than_the_sandbox_field_reads_back_as_it_was() -> None:
    doc = _report().to_json()
    del doc["sandbox"]
    old = PreflightReport.from_json(doc)
    assert old.sandbox is None and old.to_json() == doc
    with pytest.raises(RecordFormatError, match=r"preflight\.sandbox: expected an object"):
        PreflightReport.from_json({**doc, "sandbox": None})


D = "sha256:" + "cd" * 32
RUN_HEADER: dict[str, Any] = {
    "study": "ect-v2", "lock_digest": D, "lock_blob": D, "preflight_digest": D,
    "preflight_blob": D, "schedule_rows": 576, "spec": "schedules/v2.toml",
    "provider": "simulated", "simulated": True, "sandbox_layers": {"landlock_abi": 4},
    "executor": "local", "executor_blob": D,
    "stop_rules": {"protocol": {"max_decisions": 4}},
    "throttle": {"requests_per_minute": None, "tokens_per_minute": None},
}
STORE_FIELDS = {"format": "ects/1", "store_id": "ab" * 16, "public_key": "pk",
                "journal": "x", "created_utc": "2026-12-02T00:00:00Z"}


def test_the_run_header_reads_back_what_it_writes_and_older_headers_too() -> None:
    header = RunHeader.from_header({**RUN_HEADER, **STORE_FIELDS})
    assert header.to_json() == RUN_HEADER
    # a store written before the header carried the sandbox layers, the executor, the stop
    # rules and the throttle
    older = {k: v for k, v in RUN_HEADER.items()
             if k not in ("sandbox_layers", "executor", "executor_blob", "stop_rules", "throttle")}
    old = RunHeader.from_header(older)
    assert (old.sandbox_layers, old.executor, old.executor_blob) == (None, None, None)
    assert old.to_json() == older


@pytest.mark.parametrize("edit, needle", [
    ({"executor": None}, "header.executor: expected a string, got null"),
    ({"sandbox_layers": None}, "header.sandbox_layers: expected an object, got null"),
    ({"executor_blob": "x"}, "header.executor_blob: expected a 'sha256:"),
    ({"schedule_rows": "576"}, "header.schedule_rows: expected an integer, got string"),
    ({"extra": 1}, "header: unknown field 'extra'"),
])
def test_a_malformed_run_header_is_refused(edit: dict[str, Any], needle: str) -> None:
    with pytest.raises(RecordFormatError) as info:
        RunHeader.from_header({**RUN_HEADER, **edit})
    assert needle in str(info.value)


def test_the_store_header_of_a_run_is_its_run_header() -> None:
    header = StoreHeader.from_header({**RUN_HEADER, **STORE_FIELDS})
    assert header.run == RunHeader.from_header(RUN_HEADER)
    assert header.provider == HeaderProvider("simulated", True)
    assert (header.study, header.schedule_rows, header.lock_blob, header.store_id) == (
        "ect-v2", 576, D, "ab" * 16)
    assert header.sandbox_layers == {"landlock_abi": 4}
    # a header with a study field is a run header, and must be a whole one
    with pytest.raises(RecordFormatError, match="header: missing field 'spec'"):
        StoreHeader.from_header({k: v for k, v in RUN_HEADER.items() if k != "spec"})


@pytest.mark.parametrize("header, provider, rows", [
    ({}, None, None),
    ({"provider": "gemini", "simulated": False, "schedule_rows": 4},
     HeaderProvider("gemini", False), 4),
    ({"provider": "gemini"}, HeaderProvider("gemini", None), None),
    ({"provider": {"name": "x", "model": "y", "simulated": False}},
     HeaderProvider("x", False, "y"), None),
])
def test_the_forms_of_a_header_ect_run_did_not_write(
    header: dict[str, Any], provider: HeaderProvider | None, rows: int | None
) -> None:
    read = StoreHeader.from_header({**header, "lock_digest": D, "preflight_digest": D,
                                    **STORE_FIELDS})
    assert read.run is None and read.study is None
    assert read.provider == provider and read.schedule_rows == rows
    assert read.lock_digest == D and read.lock_blob is None


@pytest.mark.parametrize("header, needle", [
    ({"spec": "v2.toml"}, "header: unknown field 'spec' (a header with no 'study' field"),
    ({"provider": {"name": "x", "simulated": False}}, "header.provider: missing field 'model'"),
    ({"provider": "x", "simulated": "yes"}, "header.simulated: expected a boolean"),
    ({"simulated": True}, "header.simulated: is given without a provider"),
    ({"lock_blob": "nope"}, "header.lock_blob: expected a 'sha256:"),
    ({"store_id": 7}, "header.store_id: expected a string, got number"),
])
def test_a_malformed_foreign_header_is_refused(header: dict[str, Any], needle: str) -> None:
    with pytest.raises(RecordFormatError) as info:
        StoreHeader.from_header(header)
    assert needle in str(info.value)
