"""The study's documents as typed records: the lock (StudyLock) and the preflight report
(PreflightReport) read back what they write, byte for byte, and refuse anything else naming
the path."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from runner.canonical import RecordFormatError, canonical_bytes, digest, loads_strict
from runner.study import (
    GenerationConfig,
    LockError,
    PreflightCheck,
    PreflightReport,
    ProviderChoice,
    StudyLock,
    generation_config,
    load_spec,
    read_lock,
    study_paths,
)

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
    assert lock.schedule.rows == 576 and lock.spec.file == "v2.toml"
    assert lock.generation == generation_config(load_spec(V2))


def test_the_generation_config_round_trips() -> None:
    gen = generation_config(load_spec(V2))
    assert GenerationConfig.from_json(gen.to_json()) == gen
    assert gen.to_json() == _lock_doc()["generation"]


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d.update(extra=1), "lock: unknown field 'extra'"),
    (lambda d: d.pop("source_tree"), "lock: missing field 'source_tree'"),
    (lambda d: d["generation"].update(temperature="hot"),
     "lock.generation.temperature: expected an integer, got string"),
    (lambda d: d["generation"]["retry"].pop("on_transport_failure"),
     "lock.generation.retry: missing field 'on_transport_failure'"),
    (lambda d: d["generation"]["simulated"]["planner"].update(p_reuse_draft=True),
     "lock.generation.simulated.planner.p_reuse_draft: expected an integer, got boolean"),
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
