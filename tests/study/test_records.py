"""The study's typed records (runner/study/_records.py) on the bodies a real run committed.

Each record type reads strictly (the error names the path) and writes back exactly what it read,
so every digest computed over it is the recorded one; every reader of records goes through them.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from runner.canonical import RecordFormatError, canonical_bytes
from runner.control import StopReason
from runner.errors import FormatError
from runner.loop import Outcome
from runner.providers import AttemptRecord
from runner.store import Store
from runner.study import (
    AuditFailure,
    AuditGroup,
    CellRecord,
    CellResult,
    IncompleteStore,
    ScheduleError,
    ScheduleRow,
    export_study,
    read_schedule,
    record_failures,
    run_preflight,
    study_paths,
)
from tests.study.conftest import Reference
from tests.study.support import bodies


@pytest.fixture(scope="module")
def committed(reference: Reference) -> list[dict[str, Any]]:
    return bodies(reference.store)


def test_every_committed_body_round_trips_exactly(committed: list[dict[str, Any]]) -> None:
    for body in committed:
        record = CellRecord.from_json(body)
        assert canonical_bytes(record.to_json()) == canonical_bytes(body)
        assert record.result_digest == body["result_digest"]
        assert record.audit_digest == body["audit_digest"]
        assert record.schedule_row.digest() == body["schedule_row_digest"]
        assert Outcome.from_json(body["result"]["outcome"]) == record.result.outcome
        assert AuditGroup.from_json(body["audit"]) == record.audit
        for call, written in zip(record.audit.calls, body["audit"]["calls"], strict=True):
            assert all(isinstance(a, AttemptRecord) for a in call.attempts)
            assert [a.to_json() for a in call.attempts] == written["attempts"]
        for decision, written in zip(record.result.decisions, body["result"]["decisions"],
                                     strict=True):
            assert decision.action.to_json() == written["action"]
            assert decision.verdict.value == written["verdict"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda b: b.pop("code_version"), r"^record: missing field 'code_version'$"),
        (lambda b: b.update(extra=1), r"^record: unknown field 'extra'$"),
        (lambda b: b["schedule_row"].update(seed=True),
         r"^record.schedule_row.seed: expected an integer, got boolean$"),
        (lambda b: b["result"]["outcome"].update(turns=1.5),
         r"^record.result.outcome.turns: expected an integer, got number$"),
        (lambda b: b["result"]["decisions"][0].pop("verdict"),
         r"^record.result.decisions\[0\]: missing field 'verdict'$"),
        (lambda b: b["audit"]["calls"][0].update(request="md5:0"),
         r"^record.audit.calls\[0\].request: expected a 'sha256:<64 lowercase hex>' digest$"),
        (lambda b: b["result"]["outcome"].update(turns=b["result"]["outcome"]["turns"] + 1),
         r"^record.result_digest: .* is not the digest of result"),
        (lambda b: b["result"]["outcome"].update(row=99),
         r"^record.result.outcome.row: 99 is not the record's \(1\)$"),
        (lambda b: b.update(cell_id="other"),
         r"^record.cell_id: 'other' is not the schedule row's"),
        (lambda b: b["audit"]["calls"][0]["attempts"][0].pop("attempt_no"),
         r"^record.audit.calls\[0\].attempts\[0\]: missing field 'attempt_no'$"),
        (lambda b: b["audit"]["calls"][0]["attempts"][0].update(simulated="yes"),
         r"^record.audit.calls\[0\].attempts\[0\].simulated: expected a boolean, got string$"),
        (lambda b: b["result"]["decisions"][0].update(verdict="finish_perhaps"),
         r"^record.result.decisions\[0\].verdict: unknown verdict 'finish_perhaps'$"),
        (lambda b: b["result"]["decisions"][0]["action"].update(kind="wave"),
         r"^record.result.decisions\[0\].action.kind: unknown action kind 'wave'$"),
        (lambda b: b["result"]["stop"].update(reason="finished"),
         r"^record.result.stop.reason: unknown stop reason 'finished'$"),
        (lambda b: b["result"]["outcome"].update(stop_reason="finished"),
         r"^record.result.outcome.stop_reason: unknown stop reason 'finished'$"),
        (lambda b: b["result"]["stop"].update(reason=_other_reason(b)),
         r"^record.result.stop.reason: differs from record.result.outcome.stop_reason$"),
    ],
    ids=["missing", "unknown", "bool-seed", "float-turns", "decision-shape", "digest-shape",
         "result-digest", "outcome-row", "cell-id", "attempt-missing", "attempt-type",
         "verdict", "action-kind", "stop-reason", "outcome-stop-reason", "stop-reasons-differ"],
)
def test_malformed_records_name_the_path(committed: list[dict[str, Any]], edit: Any,
                                         message: str) -> None:
    body = copy.deepcopy(committed[0])
    edit(body)
    with pytest.raises(RecordFormatError, match=message):
        CellRecord.from_json(body)


def _other_reason(body: dict[str, Any]) -> str:
    """A known stop reason other than the one ``body`` recorded."""
    return next(r.value for r in StopReason if r.value != body["result"]["stop"]["reason"])


def test_the_stop_reason_is_held_once_typed_and_written_under_both_keys(
        committed: list[dict[str, Any]]) -> None:
    for body in committed:
        result = CellResult.from_json(body["result"])
        assert result.stop_reason is result.outcome.stop_reason
        assert isinstance(result.stop_reason, StopReason)
        assert "stop_reason" not in {f.name for f in dataclasses.fields(CellResult)}
        written = result.to_json()
        assert written["stop"]["reason"] == written["outcome"]["stop_reason"]
        assert type(written["stop"]["reason"]) is str
        assert written["stop"]["reason"] == body["result"]["stop"]["reason"]


@pytest.mark.parametrize(
    ("where", "message"),
    [("stop", r"^result.stop.reason: unknown stop reason 'finished'$"),
     ("outcome", r"^result.outcome.stop_reason: unknown stop reason 'finished'$"),
     ("both", r"^result.outcome.stop_reason: unknown stop reason 'finished'$"),
     ("differ", r"^result.stop.reason: differs from result.outcome.stop_reason$")],
)
def test_a_result_with_an_unknown_or_disagreeing_stop_reason_is_refused(
        committed: list[dict[str, Any]], where: str, message: str) -> None:
    """Read alone (no result digest to trip over), a result whose stop reason is not one this
    runner knows, or whose two copies disagree, used to be read as it stood."""
    result = copy.deepcopy(committed[0]["result"])
    if where in ("stop", "both"):
        result["stop"]["reason"] = "finished"
    if where in ("outcome", "both"):
        result["outcome"]["stop_reason"] = "finished"
    if where == "differ":
        result["stop"]["reason"] = _other_reason(committed[0])
    with pytest.raises(RecordFormatError, match=message):
        CellResult.from_json(result)


def test_the_one_matcher(committed: list[dict[str, Any]], reference: Reference) -> None:
    rows = read_schedule(study_paths(reference.spec).schedule)
    first, second = (CellRecord.from_json(b) for b in committed[:2])
    assert first.mismatch(rows[0]) is None
    assert first.mismatch(rows[1]) == (f"it holds row 1 ({first.cell_id}), not row 2 "
                                       f"({rows[1].cell_id})")
    other_seed = dataclasses.replace(rows[1], seed=rows[1].seed + 1)
    assert second.mismatch(other_seed) == f"row 2 ran a different schedule row ({second.cell_id})"


def test_cell_result_digest_leaves_out_wall_clock(committed: list[dict[str, Any]]) -> None:
    result = CellResult.from_json(committed[0]["result"])
    slower = dataclasses.replace(result, latency_s=result.latency_s + 5,
                                 outcome=dataclasses.replace(result.outcome,
                                                             latency_s=result.latency_s + 5))
    assert slower.digest() == result.digest()
    assert slower.to_json() != result.to_json()


def test_schedule_reader_names_line_and_field(tmp_path: Path, reference: Reference) -> None:
    rows = read_schedule(study_paths(reference.spec).schedule)
    assert all(isinstance(r, ScheduleRow) for r in rows)
    bad = [r.to_json() for r in rows[:3]]
    bad[1]["fault"] = 7
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in bad))
    with pytest.raises(ScheduleError, match=r"s.jsonl:2: not a schedule row: row.fault: "
                                            r"expected a string, got number"):
        read_schedule(path)


def _forge_copy(reference: Reference, tmp_path: Path, swap: tuple[int, int]) -> Path:
    """A store with the reference's records, two of them committed in swapped order."""
    store = tmp_path / "swapped.db"
    key = tmp_path / "swapped.db.key"
    from runner.store import generate_key

    signing = generate_key(key)
    with Store.open(reference.store, readonly=True) as src:
        header = {k: v for k, v in src.header.items()
                  if k not in ("format", "store_id", "public_key", "journal", "created_utc")}
        recs = [r.body for r in src.records(1)]
        # the blobs the header names (lock, preflight, executor) travel with it
        blobs = [src.get_blob(v) for k, v in header.items() if k.endswith("_blob")]
    recs[swap[0]], recs[swap[1]] = recs[swap[1]], recs[swap[0]]
    with Store.create(store, header=header, signing_key=signing, blobs=blobs) as dst:
        dst.append_batch(recs)
    return store


def test_preflight_and_export_use_the_one_matcher(reference: Reference, tmp_path: Path) -> None:
    store = _forge_copy(reference, tmp_path, (0, 1))
    report = run_preflight(reference.spec, store)
    check = next(c for c in report.checks if c.name.startswith("store"))
    assert not check.ok and "record 1 is not schedule row 1" in check.detail
    assert "it holds row 2" in check.detail
    with pytest.raises(IncompleteStore, match=r"record 1 is not schedule row 1: it holds row 2"):
        export_study(store, tmp_path / "m.json", reference.spec)
    assert not (tmp_path / "m.json").exists()


def test_record_errors_are_format_errors() -> None:
    with pytest.raises(FormatError):
        CellRecord.from_json([])


def test_resume_under_another_provider_is_refused_by_the_library(reference: Reference,
                                                                 tmp_path: Path) -> None:
    """The rule is execute()'s, not only the CLI's: a Python caller resuming a simulated store
    with another provider is refused before anything runs."""
    import shutil

    from runner.study import ProviderChoice, ProviderMismatch, RunSettings, execute

    store = tmp_path / "ref.db"
    shutil.copyfile(reference.store, store)
    shutil.copyfile(reference.store.with_name(reference.store.name + ".checkpoint"),
                    store.with_name(store.name + ".checkpoint"))
    before = store.read_bytes()
    settings = RunSettings(reference.spec, store,
                           ProviderChoice("openai", base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(ProviderMismatch, match="was run with --provider simulated"):
        execute(settings, resume=True)
    assert store.read_bytes() == before


def test_a_store_without_a_recorded_spec_needs_one_named(tmp_path: Path) -> None:
    from runner.study import RunHeader, SpecError, recorded_spec

    digest_ = "sha256:" + "0" * 64
    header = RunHeader("v2", digest_, digest_, digest_, digest_, 576, "s/v2.toml", "simulated",
                       True, {}, "local", digest_)
    store_fields = {"format": "ect.store/1", "store_id": "x", "created_utc": "2026-12-01"}
    assert recorded_spec({**header.to_json(), **store_fields}, "x.db") == Path("s/v2.toml")
    with pytest.raises(SpecError, match=r"^x\.db records no study spec in its header; name it"):
        recorded_spec({}, "x.db")
    # only a run's header records a spec: a stray field, or one missing, is not one
    with pytest.raises(SpecError, match=r"--study \(header: unknown field 'extra'\)$"):
        recorded_spec({**header.to_json(), "extra": 1}, "x.db")
    with pytest.raises(SpecError, match=r"--study \(header: missing field 'spec'\)$"):
        recorded_spec({k: v for k, v in header.to_json().items() if k != "spec"}, "x.db")


def test_manifest_verification_reads_every_cell_as_a_cell_record(tmp_path: Path) -> None:
    # runner.store verifies a manifest through the caller's reading of its records; the study's
    # reading is CellRecord, so a store of record-like bodies that are not cell records (the
    # fields a generic reader would pick are all there) is refused.
    from runner.store import ManifestCell, ManifestInvalid, export_manifest, generate_key
    from runner.study import verify_export
    from tests.store.conftest import cell_body, make_header, manifest_cell

    store_path = tmp_path / "run.db"
    key = generate_key(store_path.with_name(store_path.name + ".key"))
    with Store.create(store_path, header=make_header(), signing_key=key) as store:
        store.append_batch([cell_body(i) for i in range(3)])
        cells: list[ManifestCell] = [manifest_cell(i) for i in range(3)]
        export_manifest(store, cells, tmp_path / "manifest.json")
    with pytest.raises(ManifestInvalid, match=r"not cell records: record 1\.schedule_row: missing field"):
        verify_export(tmp_path / "manifest.json", store_path)


FAILURE = {"kind": "server_error", "detail": "HTTP 503", "status": 503, "retry_after_s": 1.5,
           "error_class": "HTTP 503", "class": "transport", "role": "critic"}


@pytest.mark.parametrize("written", [
    FAILURE,
    {k: v for k, v in FAILURE.items() if k not in ("class", "role")},  # before the accounting
])
def test_an_audited_failure_reads_back_what_it_wrote(written: dict[str, Any]) -> None:
    failure = AuditFailure.from_json(written)
    assert canonical_bytes(failure.to_json()) == canonical_bytes(written)
    assert failure.provider_failure().kind == "server_error"


@pytest.mark.parametrize(("edit", "message"), [
    (lambda f: f.pop("detail"), r"^failure: missing field 'detail'$"),
    (lambda f: f.update(why="x"), r"^failure: unknown field 'why'$"),
    (lambda f: f.update(status="503"), r"^failure.status: expected an integer, got string$"),
    (lambda f: f.update(role=None), r"^failure.role: expected a string, got null$"),
])
def test_a_malformed_audited_failure_names_the_path(edit: Any, message: str) -> None:
    written = dict(FAILURE)
    edit(written)
    with pytest.raises(RecordFormatError, match=message):
        AuditFailure.from_json(written)


def test_the_accounting_counts_each_failed_call_once(committed: list[dict[str, Any]]) -> None:
    record = CellRecord.from_json(committed[0])
    call = record.audit.calls[0]
    new = AuditFailure.from_json(FAILURE)
    # a store written before the accounting: no role; a kind this runner does not know
    old = AuditFailure.from_json({**{k: v for k, v in FAILURE.items() if k != "role"},
                                  "kind": "gremlins"})
    failed = [dataclasses.replace(call, ok=False, parsed=None, failure=f) for f in (new, old)]
    record = dataclasses.replace(record, audit=AuditGroup(record.audit.provider, record.audit.model,
                                                          (call, *failed)))
    assert [f.to_json() for f in record_failures(record)] == [
        {"kind": "server_error", "class": "transport", "role": "critic", "status": 503},
        {"kind": "sdk_error", "class": "transport", "role": "unknown", "status": 503},
    ]


def test_new_receipts_are_receipts_and_a_malformed_one_names_its_path(
        committed: list[dict[str, Any]]) -> None:
    body = copy.deepcopy(next(b for b in committed if b["result"]["new_receipts"]))
    record = CellRecord.from_json(body)
    assert [r.to_json() for r in record.result.new_receipts] == body["result"]["new_receipts"]
    body["result"]["new_receipts"][0]["exec_status"] = "maybe"
    with pytest.raises(RecordFormatError,
                       match=r"^record.result.new_receipts\[0\].exec_status: "):
        CellRecord.from_json(body)
