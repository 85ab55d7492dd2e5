"""Closed-loop analysis on a fixture outcome list whose tables were counted by hand."""

from __future__ import annotations

from typing import Any

import pytest

from runner.analysis import (
    ClosedLoopResults,
    InventoryIncomplete,
    ProviderInfo,
    analyse_closed_loop,
)
from runner.canonical import RecordFormatError
from runner.errors import AnalysisError
from tests.analysis import _fixtures as fx

SIM = ProviderInfo(name="simulated", model="simulated-1", simulated=True)


def run(outcomes: list[dict[str, Any]] | None = None, **kw: Any) -> ClosedLoopResults:
    return analyse_closed_loop(
        fx.typed(fx.outcomes() if outcomes is None else outcomes),
        fx.schedule_rows(),
        provider=SIM,
        seed=kw.pop("seed", 2705),
        replicates=kw.pop("replicates", 2000),
        **kw,
    )


@pytest.fixture(scope="module")
def res() -> ClosedLoopResults:
    return run()


def test_scope_excludes_trust_boundary_clusters_from_data(res: ClosedLoopResults) -> None:
    assert res.scope.excluded_trust_boundary_tasks == ("t22", "t23")
    assert res.scope.primary_clusters == 22
    assert res.scope.primary_rows == 528
    assert res.scope.seeds_per_cell_group == 3
    # Move T1 to the first two tasks: the exclusion follows the data, not a constant.
    moved = ("T1", *fx.FAULTS[:-1])
    other = run(fx.outcomes(moved), replicates=50)
    assert other.scope.excluded_trust_boundary_tasks == ("t00", "t01")


def test_table4_counts(res: ClosedLoopResults) -> None:
    t4 = res.table4
    got = {p: (r.U, r.U_den, r.S, r.S_den, r.FC, r.R) for p, r in t4.items()}
    assert got == {
        "critic_core": (66, 66, 66, 132, 0, 0),
        "controller": (33, 66, 99, 132, 0, 11),
        "full_trace": (22, 66, 66, 132, 22, 22),
        "ect": (0, 66, 109, 132, 0, 22),
    }
    assert t4["ect"].FC_den == 66 and t4["ect"].R_den == 66
    assert t4["ect"].mean_turns == 2.0 and t4["controller"].mean_turns == 1.0
    assert t4["ect"].mean_calls == 0.5 and t4["controller"].mean_calls == 0.0


def test_h2_h3_h4(res: ClosedLoopResults) -> None:
    h2 = res.h2
    assert (h2.paired.sum_treatment, h2.paired.sum_comparator) == (0, 33)
    assert (h2.paired.n_treatment, h2.paired.n_comparator) == (66, 66)
    assert h2.diff_pp == -50.0
    lo, hi = h2.ci_pp
    assert lo < -50.0 < hi < 0 and h2.passed
    assert h2.paired.bootstrap.clusters == 22 and h2.paired.bootstrap.replicates == 2000
    h3 = res.h3
    assert h3.diff_pp == pytest.approx(100 * 10 / 132)
    assert h3.ci_pp[0] > -10 and h3.passed
    assert res.h4.to_json() == {
        "eligible": 66,
        "recoveries": 22,
        "recovered_then_supported": 21,
        "passed": True,
        "outcome": "gate met under the simulator's parameters",
        "rule": res.h4.rule,
    }
    assert res.gates_passed


def test_secondary_paired_estimates_are_exact_when_constant(res: ClosedLoopResults) -> None:
    sec = res.secondary
    assert (sec["turns"].diff_raw, sec["turns"].ci_raw) == (1.0, (1.0, 1.0))
    assert (sec["tool_calls"].diff_raw, sec["tool_calls"].ci_raw) == (0.5, (0.5, 0.5))
    assert sec["tokens"].diff_raw == 600.0
    assert sec["latency_s"].diff_raw == 1.0
    assert sec["cost_usd"].diff_raw == pytest.approx(0.001)


def test_unseen_and_trust_boundary_strata(res: ClosedLoopResults) -> None:
    pooled = res.unseen.pooled
    assert (pooled["ect"].U, pooled["ect"].U_den) == (0, 18)
    assert (pooled["ect"].S, pooled["ect"].S_den) == (30, 36)
    assert (pooled["controller"].U, pooled["controller"].S) == (9, 27)
    assert sorted(res.unseen.by_fault) == ["U1", "U2", "U3"]
    tb = res.trust_boundary
    assert tb.tasks == ("t22", "t23")
    assert tb.policies["ect"].stop_reasons == {"needs_human": 12}
    assert (tb.policies["controller"].U, tb.policies["controller"].U_den) == (6, 6)
    f1 = res.per_fault["F1"].policies["ect"]
    assert (f1.S, f1.S_den) == (9, 12)


def test_bad_h4_when_recoveries_do_not_mostly_complete() -> None:
    outs = fx.outcomes()
    for o in outs:
        if o["policy"] == "ect" and o["successful_recovery"] and int(o["task_id"][1:]) < 11:
            o["recovered_then_supported"] = False
    res = run(outs, replicates=50)
    assert (res.h4.recoveries, res.h4.recovered_then_supported) == (22, 11)
    assert not res.h4.passed  # 11/22 is not a strict majority
    assert not res.gates_passed


def test_h2_fails_when_ect_is_no_better() -> None:
    outs = fx.outcomes()
    for o in outs:
        if o["policy"] == "ect" and o["checkpoint"] == "incomplete":
            o["premature_unsupported"] = o["seed"] == 0 or int(o["task_id"][1:]) % 2 == 0
    res = run(outs, replicates=500)
    assert res.h2.diff_pp > 0 and not res.h2.passed


def test_inventory_refusals_name_rows() -> None:
    outs = fx.outcomes()
    with pytest.raises(InventoryIncomplete) as e:
        run(outs[:5] + outs[6:])
    assert e.value.missing == (6,) and "rows 6" in str(e.value)
    with pytest.raises(InventoryIncomplete) as e:
        run([*outs, outs[17]])
    assert e.value.duplicate == (18,)
    bad = [dict(o) for o in outs]
    bad[3]["cell_id"] = "forged"
    with pytest.raises(InventoryIncomplete) as e:
        run(bad)
    assert e.value.unexpected == ("row 4 cell forged",) and e.value.missing == (4,)
    with pytest.raises(InventoryIncomplete, match=f"{fx.ROWS} schedule rows expected"):
        run([])


def test_malformed_outcomes_are_refused() -> None:
    # The one outcome reader (runner.loop.Outcome.from_json) names the path of the bad field.
    outs = fx.outcomes()
    del outs[0]["turns"]
    with pytest.raises(RecordFormatError, match=r"^outcome: missing field 'turns'$"):
        run(outs)
    outs = fx.outcomes()
    outs[1]["turns"] = True
    with pytest.raises(RecordFormatError, match=r"^outcome.turns: expected an integer, got boolean"):
        run(outs)
    outs = fx.outcomes()
    outs[1]["cost_usd"] = "0.1"
    with pytest.raises(RecordFormatError, match=r"^outcome.cost_usd: expected a number"):
        run(outs)
    outs = fx.outcomes()
    outs[1]["extra"] = 1
    with pytest.raises(RecordFormatError, match=r"^outcome: unknown field 'extra'"):
        run(outs)
    outs = fx.outcomes()
    outs[2]["policy"] = "oracle"
    with pytest.raises(AnalysisError, match="unknown policy"):
        run(outs)


def test_same_seed_same_figures_other_seed_other_intervals(res: ClosedLoopResults) -> None:
    assert run() == res
    other = run(seed=1)
    assert other.table4 == res.table4
    assert other.h2.paired.bootstrap.seed == 1
    assert other.intervals != res.intervals
