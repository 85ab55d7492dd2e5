"""The analysis's typed results: to_json writes results.json, from_json reads it back strictly
(unknown, missing and mistyped keys refused with their path), and the records keep their rules."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from runner.analysis import (
    ClosedLoopResults,
    ProviderInfo,
    StaticResults,
    analyse_closed_loop,
    read_results,
    results_json_bytes,
)
from runner.analysis._closed_results import H4Gate, Table4Row
from runner.analysis._static import ConditionCounts, NoMatchedFault, Table3Row
from runner.analysis._sweep import (
    SweepGate,
    SweepH4,
    SweepResult,
    SweepRow,
    SweepSpec,
    _json_bytes,
)
from runner.canonical import RecordFormatError
from runner.errors import AnalysisError
from tests.analysis import _fixtures as fx

SIM = ProviderInfo(name="simulated", model="simulated-1", simulated=True)


@pytest.fixture(scope="module")
def closed() -> ClosedLoopResults:
    return analyse_closed_loop(fx.typed(fx.outcomes()), fx.schedule_rows(), provider=SIM,
                               seed=2705, replicates=50)


@pytest.fixture(scope="module")
def doc(closed: ClosedLoopResults) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(results_json_bytes(closed))
    return parsed


def test_results_json_round_trips_to_equal_results_and_bytes(
    closed: ClosedLoopResults, doc: dict[str, Any]
) -> None:
    back = ClosedLoopResults.from_json(doc)
    assert back == closed
    assert results_json_bytes(back) == results_json_bytes(closed)
    assert read_results(doc) == closed


def test_ints_stay_ints_and_floats_stay_floats(doc: dict[str, Any]) -> None:
    back = ClosedLoopResults.from_json(doc).to_json()
    assert type(back["table4"]["ect"]["U"]) is int
    assert type(back["table4"]["ect"]["mean_turns"]) is float
    assert back == doc


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["h2"].update(extra=1), r"^results\.h2: unknown field 'extra'$"),
        (lambda d: d["h4"].pop("eligible"), r"^results\.h4: missing field 'eligible'$"),
        (lambda d: d["h2"]["ci_pp"].__setitem__(1, "0"),
         r"^results\.h2\.ci_pp\[1\]: expected a number, got string$"),
        (lambda d: d["h2"].update(ci_pp=[1.0]), r"^results\.h2\.ci_pp: expected 2 items, got 1$"),
        (lambda d: d["table4"]["ect"].update(U=True),
         r"^results\.table4\.ect\.U: expected an integer, got boolean$"),
        (lambda d: d["scope"].update(policies="ect"),
         r"^results\.scope\.policies: expected an array, got string$"),
        (lambda d: d.update(provider=None), r"^results\.provider: expected an object$"),
    ],
)
def test_from_json_refuses_with_the_path(doc: dict[str, Any], change: Any, message: str) -> None:
    bad = copy.deepcopy(doc)
    change(bad)
    with pytest.raises(RecordFormatError, match=message):
        ClosedLoopResults.from_json(bad)


def test_a_null_where_the_document_allows_it(doc: dict[str, Any]) -> None:
    assert doc["reason_codes"] is None and doc["provider_failures"] is None
    assert ClosedLoopResults.from_json(doc).reason_codes is None


def test_the_format_is_checked(doc: dict[str, Any]) -> None:
    with pytest.raises(AnalysisError, match="unknown results format"):
        read_results({**doc, "format": "ect.analysis.other/1"})
    with pytest.raises(AnalysisError, match="closed-loop results: format"):
        ClosedLoopResults.from_json({**doc, "format": "ect.analysis.static/1"})
    with pytest.raises(RecordFormatError):  # a closed-loop document is not a static one
        StaticResults.from_json({**doc, "format": "ect.analysis.static/1"})


def test_absent_intervals_are_left_out_not_null(doc: dict[str, Any]) -> None:
    iv = copy.deepcopy(doc["intervals"]["ect"])
    del iv["FC"]
    from runner.analysis._closed_results import ClosedIntervals

    read = ClosedIntervals.from_json(iv, "iv")
    assert read.FC is None and "FC" not in read.to_json()


def test_a_keyword_field_keeps_its_json_key() -> None:
    c = ConditionCounts(n=3, complete=1, continue_=1, stuck=1)
    assert c.to_json() == {"n": 3, "complete": 1, "continue": 1, "stuck": 1}
    assert ConditionCounts.from_json(c.to_json()) == c
    with pytest.raises(RecordFormatError, match="unknown field 'continue_'"):
        ConditionCounts.from_json({"n": 3, "complete": 1, "continue_": 1, "stuck": 1})


def test_a_table3_row_is_one_shape_or_the_other() -> None:
    common: dict[str, Any] = dict(
        check="c", label="C", removes=("x",), measure="U", matched="m", paper_target="t",
        paper_fault="f", fires_heldout=0, fires_by_condition={}, fires_on_no_snapshot=True)
    note = NoMatchedFault(note="n", changed_decisions=0)
    unmatched = Table3Row(**common, target_fault=None, fault_label=None, unmatched=note)
    doc = unmatched.to_json()
    assert "den" not in doc and doc["target_fault"] is None and doc["note"] == "n"
    assert Table3Row.from_json(doc) == unmatched  # the flat part is read back from the row
    with pytest.raises(RecordFormatError, match=r"^row: missing field 'changed_decisions'$"):
        Table3Row.from_json({k: v for k, v in doc.items() if k != "changed_decisions"}, "row")
    with pytest.raises(AnalysisError, match="never both"):
        Table3Row(**common, target_fault=None, fault_label=None)
    with pytest.raises(AnalysisError, match="never both"):
        Table3Row(**common, target_fault="F5", fault_label="x", unmatched=note)


def test_records_are_frozen() -> None:
    h4 = H4Gate(eligible=1, recoveries=1, recovered_then_supported=1, passed=True, rule="r",
                outcome="o")
    with pytest.raises(AttributeError):
        h4.passed = False  # type: ignore[misc]


def test_table4_counts_by_measure(closed: ClosedLoopResults) -> None:
    row: Table4Row = closed.table4["ect"]
    assert row.count("U") == (row.U, row.U_den) and row.count("R") == (row.R, row.R_den)


def test_sweep_result_round_trips() -> None:
    gate = SweepGate(diff_pp=-1.5, ci_pp=(-2.0, -1.0), passed=True, outcome="met")
    row = SweepRow(point=1, parameters={"simulated.planner.p_x": 0.5}, directory="points/p001",
                   h2=gate, h3=gate,
                   h4=SweepH4(recoveries=2, eligible=3, recovered_then_supported=2, passed=True,
                              outcome="met"),
                   table4={})
    result = SweepResult(spec=SweepSpec(name="s", sha256="sha256:" + "0" * 64),
                         grid={"simulated.planner.p_x": (0.5,)}, base_parameters={}, seed=1,
                         replicates=2, note="n", rows=(row,))
    doc = json.loads(_json_bytes(result))  # sweep.json's bytes
    assert doc["grid"] == {"simulated.planner.p_x": [0.5]} and doc["format"] == "ect.sweep/1"
    assert SweepResult.from_json(doc) == result
    assert row.label == "simulated.planner.p_x=0.5"
