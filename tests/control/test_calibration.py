"""Calibration of a confidence score and two-sided rule reports, on hand-checked fixtures; the
rendered tables, refusals and boundaries pinned exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.canonical import canonical_bytes, load_strict_file
from runner.control import (
    Budget,
    Calibration,
    CalibrationMismatch,
    LabelledRun,
    NoSafeThreshold,
    RuleOutcome,
    RuleReport,
    RunController,
    RunCost,
    StopReason,
    ToolCall,
    ToolResult,
    render_reports,
    report_rule,
)
from runner.errors import FormatError
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


# Calibration's contracts pinned exactly: the rendered tables (what a user reads), every
# refusal's message, the boundaries (a confidence equal to the threshold fires; ties keep the
# higher threshold) and the strict loader.
BASE = RunCost(7, 0.07, 14.0)


OUTCOMES = [RuleOutcome("a", True, False, BASE, RunCost(4, 0.04, 8.0)),
            RuleOutcome("b", True, True, BASE, RunCost(3, 0.03, 6.0)),
            RuleOutcome("c", False, False, BASE, BASE),
            RuleOutcome("d", False, False, BASE, BASE)]


def test_rule_reports_render_as_an_aligned_table() -> None:
    text = render_reports([report_rule("predicates", OUTCOMES), report_rule("never", OUTCOMES[2:])])
    assert text == (
        "rule        runs  fired  firing rate  errors  error rate/firings  steps saved  "
        "cost saved     latency saved\n"
        "predicates  4     2      50.0%        1       50.0%               7 (25%)      "
        "$0.0700 (25%)  14.0s (25%)\n"
        "never       2     0      0.0%         0       n/a                 0 (0%)       "
        "$0.0000 (0%)   0.0s (0%)\n")
    assert render_reports([]) == ("rule  runs  fired  firing rate  errors  error rate/firings  "
                                  "steps saved  cost saved  latency saved\n")


def test_rule_report_json_and_fractions() -> None:
    rep = report_rule("predicates", OUTCOMES)
    assert rep.to_json() == {
        "rule": "predicates", "runs": 4, "firings": 2, "firing_rate": 0.5, "errors": 1,
        "error_rate_over_firings": 0.5, "saved": {"steps": 7, "cost_usd": 0.07, "latency_s": 14.0},
        "baseline": {"steps": 28, "cost_usd": 0.28, "latency_s": 56.0}}
    assert rep.saved_fraction("steps") == 0.25
    empty = RuleReport("none", 0, 0, 0, RunCost(), RunCost())
    assert (empty.firing_rate, empty.error_rate, empty.saved_fraction("cost_usd")) == (0.0, None, 0.0)


def test_savings_are_rounded_to_nine_decimals() -> None:
    base = RunCost(1, 0.12345678912, 1.98765432109)
    rep = report_rule("r", [RuleOutcome("a", True, False, base, RunCost())])
    assert (rep.saved.cost_usd, rep.saved.latency_s) == (0.123456789, 1.987654321)


def test_a_rule_outcome_cannot_be_wrong_without_firing() -> None:
    with pytest.raises(ValueError) as e:
        RuleOutcome("e", False, True, BASE, BASE)
    assert str(e.value) == "e: a run the rule did not stop cannot be its error"


def test_calibration_render_names_the_choice_or_its_absence() -> None:
    assert measure(0.2).render().splitlines()[0] == (
        "calibration on sim-planner-1: target error rate over firings <= 20.0%; "
        "chosen threshold 0.85 (highest cost_usd saved)")
    none = Calibration("m-1", 0.05, "steps", measure(0.2).rows, None)
    assert none.render().splitlines()[0] == (
        "calibration on m-1: target error rate over firings <= 5.0%; "
        "chosen threshold none (no threshold meets the target) (highest steps saved)")


def labelled(run_id: str, confidence: float, correct: bool, saved: int) -> LabelledRun:
    return LabelledRun(run_id, confidence, correct, RunCost(10, 1.0, 10.0),
                       RunCost(10 - saved, (10 - saved) / 10, 10.0 - saved))


def test_measure_boundaries_and_ties() -> None:
    one = [labelled("a", 0.5, True, 3)]
    assert Calibration.measure(one, model_version="m", target_error_rate=0.1, min_runs=1).chosen == 0.5
    assert Calibration.measure(one, model_version="m", target_error_rate=0.1, min_runs=0).chosen == 0.5
    # 0.9 and 0.8 fire on the same runs and save the same: the tie keeps the higher threshold
    tie = [labelled("a", 0.9, True, 3), labelled("b", 0.2, True, 0)]
    cal = Calibration.measure(tie, model_version="m", target_error_rate=0.0,
                              thresholds=[0.8, 0.9], min_runs=2)
    assert [r.threshold for r in cal.rows] == [0.9, 0.8] and cal.chosen == 0.9
    for key in ("steps", "latency_s"):
        by = Calibration.measure(tie, model_version="m", target_error_rate=0.0, savings_by=key,  # type: ignore[arg-type]
                                 min_runs=2)
        assert by.savings_by == key and by.chosen == 0.9
    # a confidence exactly at the threshold fires
    assert cal.fires(0.9, model_version="m") and not cal.fires(0.8999, model_version="m")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"runs": []}, "calibration needs at least 5 labelled runs, got 0: a threshold measured on "
                   "fewer says nothing"),
    ({"runs": [], "min_runs": 0}, "calibration needs at least 1 labelled runs, got 0: a threshold "
                                  "measured on fewer says nothing"),
    ({"model_version": ""}, "calibration needs the model version it was measured on"),
    ({"target_error_rate": 1.0}, "target_error_rate must be within [0, 1)"),
    ({"target_error_rate": 1.5}, "target_error_rate must be within [0, 1)"),
    ({"target_error_rate": -0.1}, "target_error_rate must be within [0, 1)"),
    ({"savings_by": "tokens"}, "savings_by must be steps, cost_usd or latency_s"),
])
def test_measure_refuses_with_one_exact_message(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"runs": runs(), "model_version": "m", "target_error_rate": 0.1, **kwargs}
    with pytest.raises(ValueError) as e:
        Calibration.measure(args.pop("runs"), **args)
    assert str(e.value) == message


def test_labelled_runs_accept_the_closed_interval_and_keep_their_id() -> None:
    for c in (0.0, 1.0):
        assert LabelledRun("x", c, True, RunCost(), RunCost()).confidence == c
    with pytest.raises(ValueError) as e:
        LabelledRun("x", 1.5, True, RunCost(), RunCost())
    assert str(e.value) == "x: confidence must be within [0, 1]"
    run = LabelledRun.from_json({"run_id": 7, "confidence": 0.5, "correct": True,
                                 "full": BASE.to_json(), "at_signal": BASE.to_json()})
    assert run.run_id == "7" and run.outcome(0.5).run_id == "7"


def test_thresholds_refuse_other_models_and_unsafe_tables_with_exact_messages() -> None:
    cal = measure(0.2)
    with pytest.raises(CalibrationMismatch) as e:
        cal.fires(0.9, model_version="other")
    assert str(e.value) == ("calibration was measured on 'sim-planner-1', not 'other': "
                            "re-measure it (or pass allow_model_mismatch_unsafe=True)")
    assert cal.fires(0.85, model_version="other", allow_model_mismatch_unsafe=True)
    none = Calibration("m-1", 0.05, "steps", cal.rows, None)
    with pytest.raises(NoSafeThreshold) as n:
        none.fires(1.0, model_version="m-1")
    assert str(n.value) == "no threshold keeps errors over firings within 5.0% on 'm-1'"


def test_the_calibrated_rule_reports_its_label_and_default_name() -> None:
    cal = measure(0.2)
    rule = cal.stopping_rule(model_version="other", confidence=lambda s: s.data.get("c"),
                             allow_model_mismatch_unsafe=True)
    assert rule.name == "calibrated_confidence"
    ctl = RunController(Budget(max_steps=3, max_tokens=100), rules=[rule],
                        validate=lambda s, o: True)
    state = ctl.start("t")
    for c, sat, miss in ((None, (), ("confidence>=0.85",)), (0.84, (), ("confidence>=0.85",)),
                         (0.85, ("confidence>=0.85",), ())):
        state.data["c"] = c
        rep = rule.evaluate(state)
        assert (rep.satisfied, rep.missing) == (sat, miss)
    named = cal.stopping_rule(model_version="sim-planner-1", confidence=lambda s: 1.0, name="mine",
                              output=lambda s: "out")
    res = RunController(Budget(max_steps=3, max_tokens=100), rules=[named]).run(
        "t", script(), lambda call: None)  # type: ignore[arg-type,return-value]
    assert res.stop.reason is StopReason.GOAL_MET and res.output == "out"
    assert res.reports["mine"].satisfied == ("confidence>=0.85",)


def recorded(**change: Any) -> dict[str, Any]:
    return {**measure(0.2).to_json(), **change}


@pytest.mark.parametrize(("obj", "message"), [
    ("x", "calibration: not an ect.calibration/1 object"),
    (recorded(format="ect.calibration/2"), "calibration.format: not an ect.calibration/1 object"),
    (recorded(extra=1), "calibration: unknown field 'extra'"),
    ({k: v for k, v in recorded().items() if k != "chosen"},
     "calibration: missing field 'chosen'"),
    (recorded(rows=[{"threshold": 0.5}]), "calibration.rows[0]: missing field 'baseline'"),
    (recorded(savings_by="tokens"),
     "calibration.savings_by: expected 'steps' or 'cost_usd' or 'latency_s', got 'tokens'"),
    (recorded(model_version=""), "calibration.model_version: must not be empty"),
    (recorded(rows={}), "calibration.rows: expected an array, got object"),
    (recorded(rows=[{**recorded()["rows"][0], "runs": True}]),
     "calibration.rows[0].runs: expected an integer, got boolean"),
    (recorded(rows=[{**recorded()["rows"][0], "firing_rate": 0.75}]),
     "calibration.rows[0]: firing_rate 0.75 does not match the counts (0.1)"),
])
def test_a_recorded_calibration_is_loaded_strictly(obj: Any, message: str) -> None:
    with pytest.raises(FormatError) as e:
        Calibration.from_json(obj)
    assert str(e.value) == message


def test_a_recorded_calibration_round_trips_every_savings_key_and_no_choice() -> None:
    for key in ("steps", "cost_usd", "latency_s"):
        cal = Calibration.from_json(recorded(savings_by=key, chosen=None))
        assert (cal.savings_by, cal.chosen) == (key, None)
        assert Calibration.from_json(cal.to_json()) == cal
    assert Calibration.from_json(recorded(chosen=1)).chosen == 1.0


def test_calibration_refuses_a_single_labelled_run() -> None:
    full, early = RunCost(7, 0.07, 14.0), RunCost(4, 0.04, 8.0)
    with pytest.raises(ValueError, match="at least 5 labelled runs"):
        Calibration.measure([LabelledRun("r0", 0.9, True, full, early)], model_version="m",
                            target_error_rate=0.2)
