"""The static study's driver and analysis against a scripted stand-in of decide_static."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.analysis import (
    ProviderInfo,
    StaticResults,
    analyse_static,
    read_results,
    render_outputs,
)
from runner.errors import AnalysisError, StudyError
from runner.study import (
    STATIC_ABLATIONS,
    TABLE3_ABLATIONS,
    FastPathInvariantBroken,
    StaticDecisionRow,
    StaticSpec,
    run_static,
)
from tests.analysis import _standin
from tests.sizes import STATIC_ARM_COUNT, STATIC_SNAPSHOTS

SPEC = Path(__file__).resolve().parents[2] / "schedules" / "static.toml"
SIM = ProviderInfo(name="simulated", model="simulated-1", simulated=True)


def spec(**over: Any) -> StaticSpec:
    s = StaticSpec.load(SPEC)
    return StaticSpec(**{**s.__dict__, **over}) if over else s


def run(script: _standin.Script, s: StaticSpec | None = None) -> Any:
    async def go() -> Any:
        return await run_static(
            s or spec(), object(), snapshots=_standin.grid(), decide=script.decide
        )

    return anyio.run(go)


@pytest.fixture(scope="module")
def scripted() -> tuple[Any, StaticResults]:
    script = _standin.Script()
    r = run(script, spec(replicates=2000))
    return r, analyse_static(r.rows, spec=spec(replicates=2000), provider=SIM)


def test_every_snapshot_every_arm_and_each_ablation(scripted: tuple[Any, StaticResults]) -> None:
    r, _ = scripted
    assert len(r.rows) == STATIC_SNAPSHOTS * (STATIC_ARM_COUNT + len(TABLE3_ABLATIONS))
    ablated = {row.ablate for row in r.rows if row.ablate}
    assert ablated == {
        "claim_coverage",
        "task_scope",
        "outcome_validation",
        "ledger_reference",
        "value_replay",
        "exact_transform",
        "recovery_check",
    }
    assert all(row.arm == "ect" for row in r.rows if row.ablate)


def test_table2_reproduces_the_papers_shape(scripted: tuple[Any, StaticResults]) -> None:
    _, res = scripted
    t2 = {
        p: (v.unsafe, v.clean_noncomplete, v.stuck, f"{v.macro_f1:.3f}")
        for p, v in res.table2.items()
    }
    assert t2 == {
        "completion_token": (252, 0, 0, "0.222"),
        "self_check": (252, 0, 0, "0.222"),
        "heuristic": (252, 0, 0, "0.222"),
        "critic_core": (252, 0, 36, "0.222"),
        "full_trace": (56, 18, 15, "0.595"),
        "postconditions": (144, 0, 0, "0.500"),
        "ect": (0, 0, 0, "1.000"),
    }
    dens = {(v.unsafe_den, v.clean_den, v.stuck_den) for v in res.table2.values()}
    assert dens == {(288, 36, 288)}
    ft = res.table2["full_trace"]
    assert (ft.model_calls, ft.attempts, ft.retries, ft.provider_failures) == (
        324,
        331,
        7,
        1,
    )
    assert ft.input_tokens == 324_000
    assert ft.cost_usd == pytest.approx((324_000 * 0.30 + 16_200 * 2.50) / 1e6)
    assert res.table2["critic_core"].model_calls == 0
    assert res.inputs.heldout_snapshots == 324 and res.inputs.snapshots == STATIC_SNAPSHOTS


def test_h1_matches_the_paper(scripted: tuple[Any, StaticResults]) -> None:
    _, res = scripted
    h1 = res.h1
    assert (h1.b_ect, h1.b_critic, h1.tasks, h1.worlds) == (0, 36, 36, 6)
    assert f"{h1.mcnemar_p:.5e}" == "2.91038e-11"
    assert h1.diff_pp == -87.5 and h1.ci_pp == (-87.5, -87.5)
    assert h1.world_ci_pp == (-87.5, -87.5)
    assert h1.passed is True


def test_table3_counts_ablated_minus_ect(scripted: tuple[Any, StaticResults]) -> None:
    _, res = scripted
    got = {a.check: (a.target_fault, *((a.ablation.effect_U, a.ablation.effect_S)
                                        if a.ablation else (None, None)))
           for a in res.table3}
    assert got == {
        "claim_coverage": ("F5", 36, 0),
        "task_scope": ("F4", 12, 0),
        "outcome_validation": ("F3", 0, 0),
        "ledger_reference": ("F7", 0, 0),
        "value_replay": ("F6", 36, 0),
        "exact_transform": (None, None, None),
        "recovery_check": ("F8", 0, 36),
    }
    by = {a.check: a for a in res.table3}
    residual = {name: a.ablation.residual for name, a in by.items() if a.ablation is not None}
    # Residual containment: which other reason codes still caught each matched case.
    ov = residual["outcome_validation"]
    assert (ov.contained, ov.codes) == (36, {"replay.null_input": 36})
    assert all(case.codes == ("replay.null_input",) for case in ov.cases)
    lr = residual["ledger_reference"]
    assert lr.codes == {"scope.cardinality": 36}
    ts = residual["task_scope"]
    assert (ts.contained, ts.not_contained, ts.codes) == (24, 12, {"replay.mismatch": 24})
    assert residual["claim_coverage"].contained == 0
    # Where each check fires on full ECT; the transform check fires nowhere, so its zero is
    # automatic and flagged, while every matched check fires on its own fault.
    tr = by["exact_transform"]
    assert tr.unmatched is not None and tr.unmatched.changed_decisions == 0
    assert tr.fires_on_no_snapshot is True
    for name in ("claim_coverage", "task_scope", "outcome_validation", "ledger_reference",
                 "value_replay", "recovery_check"):
        assert by[name].fires_on_no_snapshot is False
        assert by[name].ablation is not None and by[name].ablation.fires_on_target == 36, name


def test_h1_fails_when_ect_is_unsafe_too() -> None:
    script = _standin.Script()
    r = run(script, spec(replicates=200))
    rows = [
        dataclasses.replace(row, decision="complete")
        if row.arm == "ect" and row.condition != "C0" and not row.ablate
        else row
        for row in r.rows
    ]
    h1 = analyse_static(rows, spec=spec(replicates=200), provider=SIM).h1
    assert (h1.b_ect, h1.b_critic) == (0, 0)
    assert h1.diff_pp > 0 and not h1.passed


def test_critic_core_model_call_aborts_the_run() -> None:
    with pytest.raises(FastPathInvariantBroken, match="called its model"):
        run(_standin.Script(critic_calls_model=True))
    with pytest.raises(FastPathInvariantBroken, match="reported a model call"):
        run(_standin.Script(critic_reports_call=True))


def test_attempt_records_are_kept_without_clock_fields(
    scripted: tuple[Any, StaticResults],
) -> None:
    r, _ = scripted
    n_ft = sum(1 for a in r.attempts if a["arm"] == "full_trace")
    assert n_ft == 432 + 7 * 2  # the retried snapshots appear in both splits' scripts
    assert all("started_utc" not in a for a in r.attempts)
    assert all("started_utc" in a for a in r.journal)
    assert len(r.journal) == len(r.attempts)


def test_analysis_refuses_missing_arms(scripted: tuple[Any, StaticResults]) -> None:
    r, _ = scripted
    rows = [row for row in r.rows if row.arm != "critic_core"]
    with pytest.raises(AnalysisError, match="critic_core"):
        analyse_static(rows, spec=spec(), provider=SIM)


def test_spec_is_strict(tmp_path: Path) -> None:
    text = SPEC.read_text()
    s = StaticSpec.parse(text.encode())
    assert (s.seed, s.replicates, s.generation.temperature) == (2705, 10_000, 0.2)
    for bad, msg in (
        (text.replace("seed = 2705", "seed = -1", 1), "seed"),
        (text + "\n[extra]\nx = 1\n", "unknown key"),
        (text.replace('format = "ect.static-spec/1"', 'format = "x"'), "format"),
        (text.replace("p_accept_unsupported = 0.05 ", "p_accept_unsupported = 2 "), "in \\[0, 1\\]"),
        (text.replace("[price]", "[pricing]"), "unknown key"),
    ):
        with pytest.raises(StudyError, match=msg):
            StaticSpec.parse(bad.encode())


def test_static_report_regenerates_from_results_json(scripted: tuple[Any, StaticResults]) -> None:
    _, res = scripted
    first = render_outputs(res)
    read = read_results(json.loads(first["results.json"]))
    assert read == res  # results.json reads back as the same typed results
    assert render_outputs(read) == first
    html = first["report.html"].decode()
    assert html.count('class="chart"') == 6 and "SIMULATED" in html


def test_concurrency_keeps_canonical_order() -> None:
    async def go(n: int) -> Any:
        script = _standin.Script()
        return await run_static(
            spec(), object(), snapshots=_standin.grid()[:90], decide=script.decide, concurrency=n
        )

    one, many = anyio.run(go, 1), anyio.run(go, 8)
    assert one.rows == many.rows and one.attempts == many.attempts
    assert [StaticDecisionRow.from_json(r.to_json()) for r in one.rows] == one.rows
    with pytest.raises(StudyError, match="concurrency"):
        anyio.run(go, 0)


def test_spec_freezes_every_simulated_critic_parameter() -> None:
    # A parameter left out would silently follow the policy package's default.
    import dataclasses

    from runner.policies import CriticBehaviour

    names = {f.name for f in dataclasses.fields(CriticBehaviour)}
    assert set(spec().critic) == names
    CriticBehaviour.from_json(spec().critic)  # and the values are accepted


def test_the_fault_check_matching_is_explicit_data() -> None:
    # Each row quotes the paper (check, target fault, the fault's Table 1 words) beside what it
    # removes; every matched fault is a static fault and every removed name is ablatable.
    from runner.policies import ABLATIONS

    assert STATIC_ABLATIONS == tuple(a.name for a in TABLE3_ABLATIONS)
    assert [a.paper_check for a in TABLE3_ABLATIONS] == [
        "Claim coverage", "Task/scope", "Outcome/validation", "Ledger/reference", "Value replay",
        "Exact transform", "Recovery check"]
    for a in TABLE3_ABLATIONS:
        assert a.paper_target and a.paper_fault and a.matched
        assert set(a.removes) <= set(ABLATIONS)
    ref = next(a for a in TABLE3_ABLATIONS if a.paper_check == "Ledger/reference")
    assert ref.removes == ("evidence.unknown_receipt",) and ref.fault == "F7"
