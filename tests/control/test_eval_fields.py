"""The eval case fields beyond the controls: the case's own clock (``elapsed_s``), a kill switch
whose flag is raised mid-run, expectations on the handoff, a calibrated early-stop rule, and their
exact refusals. These cases catch single-line bugs the suite was blind to (tests/control/
maintainer_bugs.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runner.control import EvalCase, EvalCaseError, RunState, ToolCall, Turn, run_case

BASE: dict[str, Any] = {
    "format": "ect.stop-eval/1", "id": "c", "task": "t", "expect_stop": "time_budget",
    "budget": {"max_steps": 6, "max_tokens": 60000, "max_seconds": 60},
    "finish_check": {"require": ["v"]},
    "tools": {"get": {"results": [{"data": {"v": 1}}]}},
    "agent": {"turns": [{"call": {"tool": "get", "args": {"n": 1}}, "elapsed_s": 30},
                        {"call": {"tool": "get", "args": {"n": 2}}, "elapsed_s": 30},
                        {"finish": {"v": 1}}]},
}


def case(**change: Any) -> EvalCase:
    obj = copy.deepcopy(BASE)
    obj.update(change)
    return EvalCase.from_json(obj, "c.json")


@pytest.mark.parametrize(("elapsed", "steps", "tools"), [
    (30, 2, ["get"]),  # 60 s of 60: spent at the second call, before its tool runs
    (29.5, 3, ["get", "get"]),  # 59 s: the second tool runs; the third call ends it
])
def test_the_case_clock_judges_a_time_budget_exactly(elapsed: float, steps: int,
                                                     tools: list[str]) -> None:
    turns = [{**t, "elapsed_s": elapsed}
             for t in BASE["agent"]["turns"]]
    res = run_case(case(agent={"turns": turns}, expect_steps=steps, expect_tools=tools,
                        expect_kind="MaxTime"))
    assert res.passed, res.failure_line()
    assert res.stop_detail == "used the whole 60-second time budget"


def test_an_agent_of_your_own_runs_on_real_time_plus_the_case_clock() -> None:
    def decide(state: RunState) -> Turn:
        return Turn(ToolCall("get", {"n": state.step}), tokens=1)

    res = run_case(case(expect_stop="step_budget",
                        no_progress={"repeats": 9}), decide=decide)  # real time: far from 60 s
    assert res.passed, res.failure_line()


def test_the_kill_switch_flag_raised_after_a_tool_call_stops_the_next_step() -> None:
    c = case(expect_stop="policy_block", expect_kind="KillSwitchStop", expect_steps=1,
             expect_tools=["get"], kill_switch={"engage_after_calls": 1},
             budget={"max_steps": 6, "max_tokens": 60000})
    res = run_case(c)
    assert res.passed, res.failure_line()
    assert run_case(c).passed  # a fresh flag every run
    late = run_case(case(expect_stop="policy_block", kill_switch={"engage_after_calls": 5},
                         budget={"max_steps": 6, "max_tokens": 60000}))
    assert late.observed == "goal_met"  # never engaged: the run finishes


def test_a_handoff_field_that_differs_fails_the_case_naming_it() -> None:
    c = case(expect_stop="step_budget", budget={"max_steps": 1, "max_tokens": 60000},
             expect_handoff={"question": "Retry with a larger step budget, or close the task "
                                         "as out of scope?", "done": ['get({"n":1}) -> {"v":1}']})
    assert run_case(c).passed
    wrong = case(expect_stop="step_budget", budget={"max_steps": 1, "max_tokens": 60000},
                 expect_handoff={"question": "Why?", "found": ["x"]})
    assert run_case(wrong).problems == (
        'the handoff\'s found is [], expected ["x"]',
        "the handoff's question is \"Retry with a larger step budget, or close the task as out "
        'of scope?", expected "Why?"')


_LABELLED = [{"confidence": c, "correct": ok} for c, ok in
             ((0.95, True), (0.9, True), (0.8, False), (0.7, False), (0.6, True))]


@pytest.mark.parametrize(("target", "steps", "answer"), [(0.25, 2, 2), (0.4, 1, 1)])
def test_a_calibrated_rule_stops_at_the_threshold_measured_on_the_labelled_runs(
        target: float, steps: int, answer: int) -> None:
    """Errors over firings: 0.9 keeps 0 of 2, 0.8 1 of 3 (33%): within 25% only 0.9 fires on
    0.92, not on 0.85; within 40% 0.8 is safe and the run stops on 0.85."""
    c = case(expect_stop="goal_met", expect_steps=steps, expect_output={"equals": {"v": answer}},
             finish_check={"verdicts": [False]},
             calibrated_rule={"name": "confident", "require": ["v"],
                              "confidence_key": "confidence", "target_error_rate": target,
                              "labelled": _LABELLED},
             tools={"get": {"results": [{"data": {"v": 1, "confidence": 0.85}},
                                        {"data": {"v": 2, "confidence": 0.92}}]}},
             budget={"max_steps": 6, "max_tokens": 60000})
    res = run_case(c)
    assert res.passed, res.failure_line()


@pytest.mark.parametrize(("change", "message"), [
    ({"kill_switch": {}}, "$.kill_switch: needs max_spend_per_day_usd or engage_after_calls"),
    ({"kill_switch": {"step_reserve_usd": 0.1}},
     "$.kill_switch.step_reserve_usd: needs max_spend_per_day_usd"),
    ({"kill_switch": {"engage_after_calls": -1}}, "$.kill_switch.engage_after_calls: must be >= 0"),
    ({"kill_switch": {"engage_after_calls": 1}, "expect_spend": {"spend_usd": 0, "reserved_usd": 0}},
     "$.expect_spend: needs a kill_switch with max_spend_per_day_usd (its ledger holds the spend)"),
    ({"expect_stop": "goal_met", "expect_handoff": {}}, "$.expect_handoff: a goal_met run has no handoff"),
    ({"expect_handoff": {"who": 1}}, "$.expect_handoff: unknown field 'who'"),
    ({"expect_handoff": {"question": 1}}, "$.expect_handoff.question: must be a string"),
    ({"expect_handoff": {"done": "x"}}, "$.expect_handoff.done: must be a list of non-empty strings"),
    ({"agent": {"turns": [{"finish": 1, "elapsed_s": "x"}]}},
     "$.agent.turns[0].elapsed_s: must be a number"),
    ({"calibrated_rule": {"name": "r"}}, "$.calibrated_rule: missing field 'confidence_key'"),
    ({"calibrated_rule": {"name": "r", "require": ["v"], "confidence_key": "c",
                          "target_error_rate": 0.2, "labelled": _LABELLED[:2]}},
     "$.calibrated_rule: calibration needs at least 5 labelled runs, got 2: a threshold "
     "measured on fewer says nothing"),
    ({"calibrated_rule": {"name": "r", "require": ["v"], "confidence_key": "c",
                          "target_error_rate": 0.2,
                          "labelled": [*_LABELLED[:4], {"confidence": 2, "correct": True}]}},
     "$.calibrated_rule.labelled[4]: l4: confidence must be within [0, 1]"),
    ({"calibrated_rule": {"name": "r", "require": ["v"], "confidence_key": "c",
                          "target_error_rate": 0.0,
                          "labelled": [{"confidence": 0.5, "correct": False}] * 5}},
     "$.calibrated_rule: no threshold keeps errors over firings within 0.0% on 'eval'"),
])
def test_malformed_v4_fields_are_refused_naming_the_field(change: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(EvalCaseError) as e:
        case(**change)
    assert str(e.value) == f"c.json: {message}"
