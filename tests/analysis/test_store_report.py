"""`ect report` on a real run store (runner.store) holding the fixture outcomes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from runner.analysis import load_outcomes_from_store
from runner.canonical import canonical_bytes, digest, raw_digest
from runner.cli import cli
from runner.errors import AnalysisError
from runner.loop import Outcome
from runner.providers import AttemptRecord
from runner.store import Store, generate_key
from runner.study import (
    AuditCall,
    AuditGroup,
    CellRecord,
    CellResult,
    RawExchangeRef,
    ScheduleRow,
    read_lock,
)
from tests.analysis import _fixtures as fx

REPO = Path(__file__).resolve().parents[2]
# As runner.study writes them: the header names the provider and whether it was simulated;
# each record's audit keeps the provider attempt records (with provider/model/simulated).
STUDY_HEADER = {"provider": "simulated", "simulated": True, "schedule_rows": fx.ROWS}
ATTEMPT = {"provider": "simulated", "model": "simulated-1", "simulated": True, "status": 200}
BLOB = "sha256:" + "ab" * 32


_FULL_ATTEMPT: dict[str, Any] = {
    "attempt_id": "attempt-1", "cell_id": None, "attempt_no": 1, "request_sha256": BLOB,
    "response_sha256": BLOB, "started_utc": "2026-01-01T00:00:00Z",
    "ended_utc": "2026-01-01T00:00:01Z", "latency_s": 0.0, "status": 200, "error_class": None,
    "retry": False,
    "usage": None, "retry_after_s": None}


def attempt_of(fields: dict[str, Any]) -> AttemptRecord:
    """A full provider attempt record with ``fields`` (the rest as a run writes them)."""
    return AttemptRecord.from_json({**_FULL_ATTEMPT, **fields})


def audit_of(*attempts: dict[str, Any], provider: str | None = "simulated") -> AuditGroup:
    call = AuditCall(request=BLOB, parsed=BLOB, ok=True, failure=None,
                     attempts=tuple(attempt_of(a) for a in attempts),
                     raw=(RawExchangeRef(BLOB, BLOB),))
    return AuditGroup(provider=provider, model=None, calls=(call,) if attempts else ())


def cell(o: dict[str, Any], srow: dict[str, Any], audit: AuditGroup) -> CellRecord:
    """A cell record as runner.study commits it, around a fixture outcome."""
    result = CellResult(
        outcome=Outcome.from_json(o), stop_detail="fixture",
        decisions=(), final_certificate=None, ledger_digest=BLOB, new_receipts=(), notes={},
        input_tokens=o["input_tokens"], output_tokens=o["output_tokens"], simulated=True,
        latency_s=o["latency_s"])
    return CellRecord(ScheduleRow.from_json(srow), result, audit, {}, "test")


def make_store(
    tmp: Path,
    outcomes: list[dict[str, Any]],
    *,
    header: dict[str, Any] | None = None,
    audit: AuditGroup | None = None,
    name: str = "run.sqlite",
    blobs: tuple[bytes, ...] = (),
) -> Path:
    key = generate_key(tmp / f"{name}.key")
    path = tmp / name
    by_row = {r["row"]: r for r in fx.schedule()}
    pins = {
        "lock_digest": digest("ect/lock/v1", {"fixture": True}),
        "preflight_digest": digest("ect/record/v1", {"preflight": "fixture"}),
    }
    head = STUDY_HEADER if header is None else header
    aud = audit_of(ATTEMPT) if audit is None else audit
    with Store.create(path, header={**head, **pins}, signing_key=key, blobs=blobs) as store:
        store.append_batch([cell(o, by_row[o["row"]], aud).to_json() for o in outcomes])
        store.checkpoint()
    return path


def write_schedule(tmp: Path) -> Path:
    path = tmp / "schedule.jsonl"
    path.write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in fx.schedule()))
    return path


def report(store: Path, schedule: Path, out: Path, *extra: str) -> Any:
    args = ["report", "--store", str(store), "--schedule", str(schedule), "--out", str(out)]
    return CliRunner().invoke(cli, [*args, "--replicates", "500", *extra])


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("store")
    return make_store(tmp, fx.outcomes()), write_schedule(tmp)


def test_report_from_store_gives_the_known_tables(full: tuple[Path, Path], tmp_path: Path) -> None:
    store, schedule = full
    res = report(store, schedule, tmp_path / "out")
    assert res.exit_code == 0, res.output
    assert "SIMULATED" in res.output and "H2: gate met under the simulator's parameters" in res.output
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {p: v["U"] for p, v in data["table4"].items()} == {
        "critic_core": 66,
        "controller": 33,
        "full_trace": 22,
        "ect": 0,
    }
    assert data["inputs"]["store_records"] == fx.ROWS + 1 and data["inputs"]["schedule_rows"] == fx.ROWS
    assert data["inputs"]["replicates"] == 500
    tables = (tmp_path / "out" / "tables.md").read_text()
    # ECT's U and FC are marked as guaranteed by the verifier, not measured.
    assert "| ECT | 0 (structural) | 109 | 0 (structural) | 22 | 2.00 | 0.50 |" in tables
    assert "| Controller | 33 |" in tables
    assert data["structural"] == {"policy": "ect", "measures": ["U", "FC"],
                                  "note": data["structural"]["note"]}
    assert "structural, not measured" in data["structural"]["note"]
    # Hand-made records have no gold to audit against: no audit figure rather than a partial one.
    assert data["verifier_audit"] is None and "Verifier audit" not in tables


def test_report_twice_is_byte_identical(full: tuple[Path, Path], tmp_path: Path) -> None:
    store, schedule = full
    for d in ("a", "b"):
        assert report(store, schedule, tmp_path / d).exit_code == 0
    for name in ("results.json", "tables.md", "report.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert report(store, schedule, tmp_path / "c", "--seed", "7").exit_code == 0
    assert (tmp_path / "c" / "results.json").read_bytes() != (
        tmp_path / "a" / "results.json"
    ).read_bytes()


def test_report_refuses_missing_and_duplicate_rows(tmp_path: Path) -> None:
    schedule = write_schedule(tmp_path)
    outs = fx.outcomes()
    missing = make_store(tmp_path, outs[:-1], name="missing.sqlite")
    res = report(missing, schedule, tmp_path / "o1")
    assert res.exit_code == 3
    assert "inventory incomplete" in res.output and f"rows {fx.ROWS}" in res.output
    assert not (tmp_path / "o1" / "results.json").exists()
    dup = make_store(tmp_path, [*outs, outs[0]], name="dup.sqlite")
    res = report(dup, schedule, tmp_path / "o2")
    assert res.exit_code == 3 and "duplicated (rows 1)" in res.output


def test_report_refuses_a_record_of_another_schedule_row(tmp_path: Path) -> None:
    schedule = write_schedule(tmp_path)
    store = make_store(tmp_path, fx.outcomes())
    rows = fx.schedule()
    rows[10]["seed"] = 99
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in rows))
    res = report(store, other, tmp_path / "o")
    assert res.exit_code == 3 and "row 11 ran a different schedule row" in res.output
    assert report(store, schedule, tmp_path / "ok").exit_code == 0


def test_provider_comes_from_header_and_audits(full: tuple[Path, Path]) -> None:
    loaded = load_outcomes_from_store(full[0])
    assert (loaded.provider.name, loaded.provider.model) == ("simulated", "simulated-1")
    assert loaded.provider.simulated and len(loaded.outcomes) == fx.ROWS


def test_provider_fallbacks_and_contradictions(tmp_path: Path) -> None:
    gem = {"provider": "gemini", "model": "gemini-2.5-flash", "simulated": False}
    path = make_store(tmp_path, fx.outcomes()[:4], header={}, audit=audit_of(gem))
    loaded = load_outcomes_from_store(path)
    assert (loaded.provider.name, loaded.provider.simulated) == ("gemini", False)
    obj = {"provider": {"name": "x", "model": "y", "simulated": False}}
    path = make_store(tmp_path, fx.outcomes()[:4], header=obj, name="obj.sqlite")
    assert load_outcomes_from_store(path).provider.model == "y"
    silent = make_store(tmp_path, fx.outcomes()[:4], header={}, audit=audit_of(),
                        name="silent.sqlite")
    with pytest.raises(AnalysisError, match="exactly one provider"):
        load_outcomes_from_store(silent)
    liar = make_store(tmp_path, fx.outcomes()[:4], audit=audit_of(gem), name="liar.sqlite")
    with pytest.raises(AnalysisError, match="but the audits record gemini"):
        load_outcomes_from_store(liar)


def test_report_refuses_a_schedule_run_would_refuse(
    full: tuple[Path, Path], tmp_path: Path
) -> None:
    # One schedule reader: rows `ect run` rejects (here: a row missing its seed index, and a
    # JSON array instead of JSON Lines) are rejected by `ect report` too, naming the line.
    rows = fx.schedule()
    del rows[2]["seed_index"]
    partial = tmp_path / "partial.jsonl"
    partial.write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in rows))
    res = report(full[0], partial, tmp_path / "o1")
    assert res.exit_code == 2, res.output  # a junk --schedule is a usage error
    assert "partial.jsonl:3: not a schedule row: row: missing field 'seed_index'" in res.output
    array = tmp_path / "array.json"
    array.write_bytes(canonical_bytes(fx.schedule()))
    res = report(full[0], array, tmp_path / "o2")
    assert res.exit_code == 2 and "array.json:1: not a schedule row" in res.output


def test_a_record_that_disagrees_with_itself_is_refused(tmp_path: Path) -> None:
    outs = fx.outcomes()[:4]
    path = make_store(tmp_path, outs)
    bad = cell(outs[0], fx.schedule()[0], audit_of(ATTEMPT)).to_json()
    bad["result"]["outcome"]["turns"] = 99  # the result no longer matches its digest
    key = tmp_path / "run.sqlite.key"
    from runner.store import load_signing_key

    with Store.open(path, signing_key=load_signing_key(key)) as store:
        store.append(bad)
    with pytest.raises(AnalysisError, match=r"store record 5.result_digest: .* is not the digest"):
        load_outcomes_from_store(path)


def test_report_refuses_a_schedule_of_another_size(full: tuple[Path, Path], tmp_path: Path) -> None:
    short = tmp_path / "short.jsonl"
    short.write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in fx.schedule()[:-4]))
    res = report(full[0], short, tmp_path / "o")
    assert res.exit_code == 3 and f"run for {fx.ROWS} schedule rows" in res.output


def test_report_refuses_a_missing_store(tmp_path: Path) -> None:
    res = report(tmp_path / "nope.sqlite", write_schedule(tmp_path), tmp_path / "o")
    assert res.exit_code in (2, 3) and "Traceback" not in res.output


def test_a_simulated_report_names_its_parameters_and_never_says_passed(tmp_path: Path) -> None:
    # The parameters come from the lock the store carries (what the run used), by dotted name.
    lock = read_lock(REPO / "schedules" / "v2.lock.json").to_json()
    lock["generation"]["simulated"] = {
        "planner": {"p_premature_finish": 0.5}, "critic": {"p_reject_supported": 0.125}}
    blob = canonical_bytes(lock)
    header = {**STUDY_HEADER, "lock_blob": raw_digest(blob)}
    store = make_store(tmp_path, fx.outcomes(), header=header, blobs=(blob,))
    res = report(store, write_schedule(tmp_path), tmp_path / "out")
    assert res.exit_code == 0, res.output
    outputs = [res.output, *((tmp_path / "out" / n).read_text()
                             for n in ("tables.md", "report.html", "results.json"))]
    for text in outputs:
        assert "PASSED" not in text and "FAILED" not in text
        assert "simulated.planner.p_premature_finish" in text
    assert "H2: gate met under the simulator's parameters" in res.output
    data = json.loads(outputs[3])
    assert data["simulator"]["parameters"] == {"simulated.critic.p_reject_supported": 0.125,
                                               "simulated.planner.p_premature_finish": 0.5}
    assert data["simulator"]["chosen_by"] == "this project"
    choices = {c["key"]: c for c in data["choices"]}
    assert {"h4_gate", "successful_recovery", "f4_perturbation",
            "critic_core_fast_paths"} <= set(choices)
    assert all(c["paper"] and c["ours"] for c in choices.values())
    assert choices["h4_gate"]["ours"].startswith("ECT's successful recovery events")
    # Every choice the issue of an honest instrument named is listed with the paper's words.
    assert {"draft_certificate", "supported", "unseen_fault_operators", "fault_assignment",
            "controller_stuck_rule", "weak_arms", "simulated_planner_knowledge",
            "simulated_draws"} <= set(choices)
    # No word stronger than the run can carry, and no pass colour for a simulated gate.
    for text in outputs:
        assert "onfirmatory" not in text and "proves" not in text
    assert 'class="gate neutral"' in outputs[2] and 'class="gate pass"' not in outputs[2]
    # The paper's Table 4 and H2-H4 beside this run's (the paper's figures are data).
    rows = data["paper_vs_run"]["rows"]
    assert {e["table"] for e in rows} == {"Table 4", "H2", "H3", "H4", "Unseen U1-U3",
                                          "Cost per trajectory"}
    # The unseen-fault strata and the per-trajectory cost deltas, the paper's beside the run's.
    unseen = {(e["row"], e["measure"]): (e["paper"], e["run"]) for e in rows
              if e["table"] == "Unseen U1-U3"}
    pooled = data["unseen"]["pooled"]
    assert unseen[("ECT", "U/18")] == ("0/18", f"{pooled['ect']['U']}/18")
    assert unseen[("ECT", "S/36")] == ("31/36", f"{pooled['ect']['S']}/36")
    assert unseen[("Controller", "U/18")] == ("6/18", f"{pooled['controller']['U']}/18")
    assert unseen[("Controller", "S/36")] == ("30/36", f"{pooled['controller']['S']}/36")
    cost = {e["measure"]: (e["paper"], e["run"]) for e in rows
            if e["table"] == "Cost per trajectory"}
    assert cost["decision turns"] == ("+0.90", f"{data['secondary']['turns']['diff_raw']:+.2f}")
    assert cost["tokens (input + output)"][0] == "+4,653"
    assert cost["provider seconds"][0] == "+2.34"
    assert cost["estimated cost (USD)"][0] == "+0.00246"
    assert cost["tool calls"][0] == "+0.045"
    ect_u = next(e for e in rows if e["table"] == "Table 4" and e["row"] == "ECT"
                 and e["measure"].startswith("U/"))
    assert ect_u["paper"] == "0/66"
    assert ect_u["run"] == f"{data['table4']['ect']['U']}/{data['table4']['ect']['U_den']}"
    h4 = [e for e in rows if e["table"] == "H4"]
    assert h4[0]["paper"] == "18/66" and h4[-1]["run"] == data["h4"]["outcome"]
    assert all(e["section"].startswith("Closed-Loop Confirmation") for e in rows)
    for text in outputs[1:3]:
        assert "Paper vs this run" in text
    # ect report counts reason codes per fault stratum and pipeline from the cell records.
    strata = data["reason_codes"]
    assert sum(e["cells"] for e in strata) == fx.ROWS
    assert {e["pipeline"] for e in strata} == {"critic_core", "controller", "full_trace", "ect"}


def test_a_real_provider_report_keeps_plain_verdicts(tmp_path: Path) -> None:
    header = {"provider": {"name": "gemini", "model": "gemini-2.5-flash", "simulated": False},
              "schedule_rows": fx.ROWS}
    store = make_store(tmp_path, fx.outcomes(), header=header,
                       audit=audit_of({**ATTEMPT, "provider": "gemini",
                                       "model": "gemini-2.5-flash", "simulated": False}))
    res = report(store, write_schedule(tmp_path), tmp_path / "out")
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["simulator"] is None and "H2: PASSED" in res.output
