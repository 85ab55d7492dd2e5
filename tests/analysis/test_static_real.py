"""The static study end to end: the real grid, the real policies, the simulated provider."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from runner.analysis import static_study
from runner.cli import cli
from runner.ect import Certificate
from runner.policies import CriticCoreInvariantBroken
from runner.study import StaticSpec, run_static, static_provider
from runner.worlds import static_grid
from tests.sizes import STATIC_ARM_COUNT, STATIC_SNAPSHOTS

SPEC = Path(__file__).resolve().parents[2] / "schedules" / "static.toml"


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("static") / "out"
    res = CliRunner().invoke(cli, ["static", "--spec", str(SPEC), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out, res


def test_ect_static_reproduces_table2_and_h1_shapes(study: tuple[Path, Any]) -> None:
    out, res = study
    data = json.loads((out / "results.json").read_text())
    assert "SIMULATED" in res.output and "H1 gate met on the generated snapshots" in res.output
    # Simulated: no bare PASSED/FAILED anywhere; the simulator's parameters are named (read
    # from the spec) and the project's choices are listed with the paper's words.
    for text in (res.output, *((out / n).read_text() for n in
                               ("tables.md", "report.html", "results.json"))):
        assert "PASSED" not in text and "FAILED" not in text
    assert data["h1"]["depends_on_simulator"] is False
    sim = data["simulator"]
    assert sim["chosen_by"] == "this project"
    assert sim["parameters"]["simulated.critic.p_accept_unsupported"] == 0.05
    assert "simulated.critic.p_accept_unsupported=0.05" in res.output
    # The paper's Table 2, Table 3 and H1 beside this run's, in every output; no pass colour.
    paper = data["paper_vs_run"]
    assert {e["table"] for e in paper["rows"]} == {"Table 2", "Table 3", "H1"}
    u_ect = next(e for e in paper["rows"]
                 if e["table"] == "Table 2" and e["row"] == "ECT" and e["measure"] == "U/288")
    assert (u_ect["paper"], u_ect["run"]) == (0, data["table2"]["ect"]["unsafe"])
    # H1's six-world sensitivity interval (in paper.toml), the paper's beside the run's.
    world = next(e for e in paper["rows"] if e["table"] == "H1"
                 and e["measure"].startswith("world-cluster sensitivity interval"))
    lo, hi = data["h1"]["world_ci_pp"]
    assert (world["paper"], world["run"]) == ("[-87.50, -87.50]", f"[{lo:+.2f}, {hi:+.2f}]")
    assert all(e["section"].startswith("Static Results and Ablations") for e in paper["rows"])
    for name in ("tables.md", "report.html"):
        assert "Paper vs this run" in (out / name).read_text()
    html = (out / "report.html").read_text()
    assert 'class="gate neutral"' in html and 'class="gate pass"' not in html
    assert {c["key"] for c in data["choices"]} >= {"h4_gate", "f4_perturbation",
                                                    "critic_core_fast_paths"}
    t2 = data["table2"]
    assert set(t2) == {
        "completion_token",
        "self_check",
        "heuristic",
        "critic_core",
        "full_trace",
        "postconditions",
        "ect",
    }
    for v in t2.values():
        assert (v["unsafe_den"], v["clean_den"], v["stuck_den"]) == (288, 36, 288)
        assert set(v) >= {"unsafe", "clean_noncomplete", "stuck", "macro_f1"}
    assert (t2["ect"]["unsafe"], t2["ect"]["clean_noncomplete"]) == (0, 0)
    assert t2["ect"]["macro_f1"] == 1.0
    assert t2["critic_core"]["model_calls"] == 0
    assert t2["full_trace"]["model_calls"] == 324  # one critic call per held-out snapshot
    h1 = data["h1"]
    assert set(h1) >= {"b_ect", "b_critic", "mcnemar_p", "diff_pp", "ci_pp", "passed"}
    assert h1["b_ect"] == 0 and h1["b_critic"] > 0 and h1["passed"] is True
    assert h1["ci_pp"][1] < 0 and h1["mcnemar_p"] < 0.05
    t3 = {a["check"]: a for a in data["table3"]}
    assert list(t3) == [
        "claim_coverage",
        "task_scope",
        "outcome_validation",
        "ledger_reference",
        "value_replay",
        "exact_transform",
        "recovery_check",
    ]
    # Single-check ablations on the real grid: every matched check fires on its own fault (so
    # its effect is a measurement, not automatic); the exact-transform check fires nowhere and
    # is flagged so; cases a removed check no longer catches are either unsafe or listed with
    # the reason codes that still contained them.
    assert t3["exact_transform"]["fires_on_no_snapshot"] is True
    for a in t3.values():
        if a["target_fault"] is None:
            continue
        assert a["fires_on_target"] == a["den"] == 36, a["check"]
        res = a["residual"]
        assert res["contained"] + res["not_contained"] == 36
        assert len(res["cases"]) == res["contained"]
        assert all(case["codes"] for case in res["cases"])
    assert t3["ledger_reference"]["residual"]["contained"] == 36  # the paper's "+0 U" row
    assert "evidence.unknown_receipt" not in t3["ledger_reference"]["residual"]["codes"]
    assert data["provider"] == {"name": "simulated", "model": "simulated-1", "simulated": True}


def test_decisions_and_attempts_are_kept(study: tuple[Path, Any]) -> None:
    out, _ = study
    decisions = (out / "decisions.jsonl").read_text().splitlines()
    assert len(decisions) == STATIC_SNAPSHOTS * (STATIC_ARM_COUNT + 7)
    first = json.loads(decisions[0])
    assert first["provider"] == "simulated/simulated-1 (SIMULATED)"
    attempts = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    journal = (out / "attempts.journal.jsonl").read_text().splitlines()
    assert len(attempts) == len(journal) > STATIC_SNAPSHOTS
    assert {a["arm"] for a in attempts} == {"self_check", "full_trace"}
    assert all(a["simulated"] and "started_utc" not in a for a in attempts)


def test_static_outputs_are_byte_identical(study: tuple[Path, Any], tmp_path: Path) -> None:
    # A second full run would double the time; rerun the analysis on a small real subset
    # twice and compare, and check the full run's outputs against a re-render.
    grid = static_grid()
    subset = [s for s in grid if s.task.family == "lookup"]
    a = static_study(SPEC, tmp_path / "a", snapshots=subset)
    b = static_study(SPEC, tmp_path / "b", snapshots=subset, concurrency=4)  # same bytes
    assert a == b
    for name in ("results.json", "tables.md", "report.html", "decisions.jsonl", "attempts.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_critic_core_needing_its_model_aborts() -> None:
    snap = next(s for s in static_grid() if s.condition == "C0" and s.task.split == "heldout")
    empty = Certificate(
        task_id=snap.certificate.task_id,
        descriptor_digest=snap.certificate.descriptor_digest,
        ledger_digest=snap.certificate.ledger_digest,
        claims=(),
    )
    broken = dataclasses.replace(snap, trace=(), certificate=empty, completion_signal=True)
    spec = StaticSpec.load(SPEC)
    provider = static_provider("simulated", spec)

    async def go() -> Any:
        return await run_static(spec, provider, snapshots=[broken], arms=("critic_core",))

    with pytest.raises(CriticCoreInvariantBroken):
        anyio.run(go)


def test_bad_spec_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "s.toml"
    bad.write_text(
        SPEC.read_text().replace("bootstrap_replicates = 10000", "bootstrap_replicates = 0")
    )
    res = CliRunner().invoke(cli, ["static", "--spec", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "replicates" in res.output and "Traceback" not in res.output


def test_static_study_refuses_when_every_model_call_failed(tmp_path: Path) -> None:
    """The rule lives in the library (not only in `ect static`): a Python caller of
    static_study gets AllModelCallsFailed, with the outputs written and attached."""
    from runner.analysis import AllModelCallsFailed

    with pytest.raises(AllModelCallsFailed, match="every model call failed") as e:
        static_study("schedules/static.toml", tmp_path / "out", provider="openai",
                     base_url="http://127.0.0.1:9/v1")
    assert e.value.calls > 0
    assert e.value.results.table2 and (tmp_path / "out" / "results.json").exists()
