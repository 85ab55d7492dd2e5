"""Calibration of a confidence score and two-sided rule reports, on hand-checked fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.canonical import canonical_bytes, load_strict_file
from runner.control import (
    Budget,
    Calibration,
    CalibrationMismatch,
    LabelledRun,
    NoSafeThreshold,
    RuleOutcome,
    RunController,
    RunCost,
    StopReason,
    ToolCall,
    ToolResult,
    render_reports,
    report_rule,
)
from tests.control.conftest import merge, script

FIXTURE = Path(__file__).parent / "fixtures" / "labelled_runs.json"


def runs() -> list[LabelledRun]:
    return [LabelledRun.from_json(r) for r in load_strict_file(FIXTURE)["runs"]]


def measure(target: float) -> Calibration:
    return Calibration.measure(runs(), model_version="sim-planner-1", target_error_rate=target)


def test_threshold_table_matches_hand_computed_numbers() -> None:
    cal = measure(0.20)
    table = [(r.threshold, r.report.firings, r.report.errors) for r in cal.rows]
    # confidences 0.95 .93 .91 .90(wrong) .85 .80 .80(wrong) .70 .60(wrong) .50(wrong)
    assert table == [(0.95, 1, 0), (0.93, 2, 0), (0.91, 3, 0), (0.90, 4, 1), (0.85, 5, 1),
                     (0.80, 7, 2), (0.70, 8, 2), (0.60, 9, 3), (0.50, 10, 4)]
    by_t = {r.threshold: r.report for r in cal.rows}
    assert by_t[0.85].firing_rate == 0.5 and by_t[0.85].error_rate == 0.2
    assert by_t[0.80].error_rate == pytest.approx(2 / 7)
    assert by_t[0.50].firing_rate == 1.0 and by_t[0.50].error_rate == 0.4
    # each firing saves 3 steps, $0.03, 6 s
    assert by_t[0.85].saved.steps == 15
    assert by_t[0.85].saved.cost_usd == pytest.approx(0.15)
    assert by_t[0.85].saved.latency_s == pytest.approx(30.0)
    assert by_t[0.85].baseline == RunCost(70, pytest.approx(0.70), pytest.approx(140.0))  # type: ignore[arg-type]
    assert by_t[0.85].saved_fraction("steps") == pytest.approx(15 / 70)


def test_chosen_threshold_is_highest_saving_within_target() -> None:
    assert measure(0.20).chosen == 0.85  # 0.90 (25%) is out, 0.85 (20%) is in
    assert measure(0.10).chosen == 0.91  # only the error-free thresholds qualify
    assert measure(0.30).chosen == 0.70  # 0.70 at 25% beats 0.80 at 28.6% on savings
    assert measure(0.0).chosen == 0.91


def test_no_safe_threshold() -> None:
    bad = [LabelledRun(f"x{i}", 0.9, False, RunCost(5, 0.05, 1), RunCost(2, 0.02, 0.5))
           for i in range(5)]
    cal = Calibration.measure(bad, model_version="m", target_error_rate=0.1)
    assert cal.chosen is None
    with pytest.raises(NoSafeThreshold):
        cal.fires(0.99, model_version="m")


def test_model_version_is_recorded_and_enforced() -> None:
    cal = measure(0.20)
    assert cal.to_json()["model_version"] == "sim-planner-1"
    assert cal.fires(0.86, model_version="sim-planner-1")
    assert not cal.fires(0.84, model_version="sim-planner-1")
    with pytest.raises(CalibrationMismatch, match="re-measure"):
        cal.fires(0.99, model_version="sim-planner-2")
    assert cal.fires(0.99, model_version="sim-planner-2", allow_model_mismatch_unsafe=True)
    with pytest.raises(CalibrationMismatch):
        cal.stopping_rule(model_version="other", confidence=lambda s: 1.0)


def test_calibration_json_is_canonical_and_deterministic() -> None:
    a, b = measure(0.2).to_json(), measure(0.2).to_json()
    assert canonical_bytes(a) == canonical_bytes(b)
    assert a["format"] == "ect.calibration/1" and a["chosen"] == 0.85
    assert a["rows"][4]["error_rate_over_firings"] == 0.2


def test_recorded_calibration_round_trips_and_keeps_its_model_binding() -> None:
    from runner.canonical import loads_strict
    from runner.errors import FormatError

    cal = measure(0.2)
    again = Calibration.from_json(loads_strict(canonical_bytes(cal.to_json())))
    assert again == cal
    with pytest.raises(CalibrationMismatch):
        again.fires(0.9, model_version="sim-planner-2")
    for bad in ({}, {**cal.to_json(), "format": "x"}, {**cal.to_json(), "extra": 1},
                {**cal.to_json(), "rows": [{"threshold": 0.5}]}):
        with pytest.raises(FormatError):
            Calibration.from_json(bad)


def test_calibrated_rule_drives_a_controller() -> None:
    rule = measure(0.20).stopping_rule(
        model_version="sim-planner-1",
        confidence=lambda s: s.data.get("confidence"),
        output=lambda s: s.data["draft"],
    )
    scores = iter([0.5, 0.8, 0.9])

    def execute(call: ToolCall) -> ToolResult:
        return ToolResult.success({"confidence": next(scores), "draft": f"draft {call.args['i']}"})

    c = RunController(Budget(max_steps=9, max_tokens=99), rules=[rule], fold=merge)
    res = c.run("t", script(*[ToolCall("judge", {"i": i}) for i in range(9)]), execute)
    assert res.reason is StopReason.GOAL_MET and res.output == "draft 2" and res.steps == 3


def test_rule_report_shows_both_sides() -> None:
    base = RunCost(7, 0.07, 14.0)
    outcomes = [
        RuleOutcome("a", True, False, base, RunCost(4, 0.04, 8.0)),
        RuleOutcome("b", True, True, base, RunCost(3, 0.03, 6.0)),
        RuleOutcome("c", False, False, base, base),
        RuleOutcome("d", False, False, base, base),
    ]
    rep = report_rule("predicates", outcomes)
    assert (rep.runs, rep.firings, rep.errors) == (4, 2, 1)
    assert rep.firing_rate == 0.5 and rep.error_rate == 0.5  # over firings, not over runs
    assert rep.saved.steps == 7 and rep.saved.cost_usd == pytest.approx(0.07)
    assert rep.saved.latency_s == pytest.approx(14.0)
    text = render_reports([rep, report_rule("never", outcomes[2:])])
    header, first, second = text.splitlines()
    for col in ("firing rate", "error rate/firings", "steps saved", "cost saved", "latency saved"):
        assert col in header
    assert "50.0%" in first and "7 (25%)" in first and "$0.0700 (25%)" in first
    assert "n/a" in second  # a rule that never fired has no error rate
    with pytest.raises(ValueError):
        RuleOutcome("e", False, True, base, base)


def test_render_names_model_and_choice() -> None:
    text = measure(0.2).render()
    assert text.startswith("calibration on sim-planner-1") and "chosen threshold 0.85" in text
    assert len(text.splitlines()) == 2 + 9


def test_measure_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        Calibration.measure([], model_version="m", target_error_rate=0.1)
    with pytest.raises(ValueError):
        Calibration.measure(runs(), model_version="", target_error_rate=0.1)
    with pytest.raises(ValueError):
        LabelledRun("x", 1.5, True, RunCost(), RunCost())
