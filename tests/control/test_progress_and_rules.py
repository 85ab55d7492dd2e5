"""No progress (fingerprints, empty results, stale facts; and turning it off), predicate stopping
rules and directives."""

from __future__ import annotations

from typing import Any

import pytest

from runner.control import (
    Budget,
    EvalCase,
    Finish,
    Guard,
    NoProgressDetector,
    PredicateReport,
    RepeatedAction,
    RunController,
    RunResult,
    RunState,
    SideEffectRule,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
    action_fingerprint,
    capture_case,
    run_case,
)
from tests.control.conftest import merge, script, tools
from tests.control.helpers_refunds import Clock
from tests.control.helpers_runs import ok

R = StopReason


def test_fingerprint_uses_canonical_args() -> None:
    a = ToolCall("t", {"x": 1, "y": [1.0, "é"]})
    b = ToolCall("t", {"y": [1, "é"], "x": 1.0})
    assert action_fingerprint(a) == action_fingerprint(b)  # key order, 1 vs 1.0 (RFC 8785)
    assert action_fingerprint(a) != action_fingerprint(ToolCall("u", {"x": 1, "y": [1, "é"]}))
    assert action_fingerprint(a, "sha256:" + "0" * 64) != action_fingerprint(a)
    assert action_fingerprint(a).startswith("sha256:")


def test_state_hash_lets_the_same_call_run_in_a_new_state() -> None:
    page = {"n": 0}

    def execute(call: ToolCall) -> ToolResult:
        page["n"] += 1
        return ToolResult.success({"cursor": page["n"]})

    same = ToolCall("next_page", {})
    plain = RunController(Budget(max_steps=5, max_tokens=99), validate=lambda s, o: True,
                          fold=merge)
    assert plain.run("t", script(same), execute).reason is R.NO_PROGRESS
    keyed = RunController(Budget(max_steps=5, max_tokens=99), validate=lambda s, o: True,
                          fold=merge,
                          no_progress=NoProgressDetector(state_key=lambda s: s.data.get("cursor")))
    res = keyed.run("t", script(same), execute)
    assert res.reason is R.STEP_BUDGET and res.tool_calls == 5


def test_repeats_threshold_is_configurable() -> None:
    c = RunController(Budget(max_steps=9, max_tokens=99), validate=lambda s, o: True,
                      no_progress=NoProgressDetector(repeats=2))
    res = c.run("t", script(ToolCall("a", {})), tools({"a": ToolResult.success(1)}))
    assert res.reason is R.NO_PROGRESS and isinstance(res.stop.condition, RepeatedAction)
    assert res.tool_calls == 1


def test_non_empty_result_resets_the_empty_streak() -> None:
    results = iter([[], [], [1], [], [], []])
    c = RunController(Budget(max_steps=9, max_tokens=99), validate=lambda s, o: True)
    res = c.run("t", script(*[ToolCall("s", {"q": i}) for i in range(9)]),
                lambda call: ToolResult.success(next(results)))
    assert res.reason is R.NO_PROGRESS and res.tool_calls == 6


def rule() -> StoppingRule:
    return StoppingRule("ticket", {
        "shipment_id": lambda s: s.data.get("shipment_id") is not None,
        "eligibility_run": lambda s: "eligible" in s.data,
        "amount_within_cap": lambda s: s.data["amount"] <= 50,  # KeyError -> not satisfied
    })


def test_predicates_report_satisfied_and_missing() -> None:
    s = RunState("r", "t", data={"shipment_id": "SH-1"})
    rep = rule().evaluate(s)
    assert rep.satisfied == ("shipment_id",)
    assert rep.missing == ("eligibility_run", "amount_within_cap")
    s.data.update(eligible=True, amount=20)
    assert rule().evaluate(s).ok


def test_missing_list_becomes_the_directive_after_folding_before_the_model() -> None:
    results = {"get_shipment": ToolResult.success({"shipment_id": "SH-1"}),
               "eligibility": ToolResult.success({"eligible": True, "amount": 20})}
    directives: list[tuple[str, ...]] = []

    def decide(state: RunState) -> object:
        # the directive the model sees reflects every result folded so far
        directives.append(state.directive.missing if state.directive else ())
        return [ToolCall("get_shipment", {}), ToolCall("eligibility", {}), Finish("resolved")][
            state.step]

    c = RunController(Budget(max_steps=6, max_tokens=99), rules=[rule()], fold=merge)
    res = c.run("ticket 1", decide, tools(results))  # type: ignore[arg-type]
    assert res.reason is R.GOAL_MET and res.output == "resolved"
    assert directives == [
        ("shipment_id", "eligibility_run", "amount_within_cap"),
        ("eligibility_run", "amount_within_cap"),
        (),
    ]


def test_finish_is_rejected_while_predicates_are_missing() -> None:
    c = RunController(Budget(max_steps=4, max_tokens=99), rules=[rule()], fold=merge)
    res = c.run("t", script(*[Finish(f"guess {i}") for i in range(4)]), tools({}))
    assert res.reason is R.STEP_BUDGET  # the rule never went green; the budget bounded the run
    assert [r.kind for r in res.trace] == ["finish_rejected"] * 4
    assert "missing shipment_id" in res.trace[0].note


def test_rule_with_output_stops_at_the_earliest_step() -> None:
    early = StoppingRule("ticket", rule().predicates, output=lambda s: dict(s.data))
    results = {"a": ToolResult.success({"shipment_id": "SH-1", "eligible": False, "amount": 5}),
               "b": ToolResult.success({"more": 1})}
    c = RunController(Budget(max_steps=6, max_tokens=99), rules=[early], fold=merge)
    res = c.run("t", script(ToolCall("a", {}), ToolCall("b", {})), tools(results))
    assert res.reason is R.GOAL_MET and res.steps == 1 and res.output["shipment_id"] == "SH-1"


def test_rule_is_separate_from_the_budget() -> None:
    # a rule that is never satisfied does not bound anything: the budget still ends the run
    never = StoppingRule("never", {"impossible": lambda s: False}, output=lambda s: None)
    c = RunController(Budget(max_steps=3, max_tokens=99), rules=[never])
    res = c.run("t", script(*[ToolCall("a", {"i": i}) for i in range(9)]),
                tools({"a": ToolResult.success({"x": 1})}))
    assert res.reason is R.STEP_BUDGET and type(res.stop.condition).__name__ == "MaxSteps"


def test_evaluate_form_and_failing_evaluator() -> None:
    ok = StoppingRule("verifier", evaluate=lambda s: PredicateReport(("a",), ("b",)))
    assert ok.evaluate(RunState("r", "t")).missing == ("b",)
    broken = StoppingRule("verifier", evaluate=lambda s: 1 / 0)  # type: ignore[arg-type,return-value]
    rep = broken.evaluate(RunState("r", "t"))
    assert not rep.ok and rep.missing == ("verifier",) and "ZeroDivisionError" in rep.detail


def test_a_rule_can_demand_a_human() -> None:
    conflict = StoppingRule("sources", evaluate=lambda s: PredicateReport(
        escalate="Carrier and warehouse disagree on delivery: which is right?"))
    c = RunController(Budget(max_steps=3, max_tokens=99), rules=[conflict])
    res = c.run("t", script(ToolCall("a", {})), tools({}))
    assert res.reason is R.NEEDS_HUMAN and res.steps == 0
    assert res.handoff is not None and res.handoff.question.startswith("Carrier and warehouse")


def test_predicate_names_are_exact() -> None:
    from runner.control import RunState as _State
    from runner.control import StoppingRule as _Rule

    rule = _Rule("r", {"a": lambda s: True, "A": lambda s: False})
    report = rule.evaluate(_State("r", "t"))
    assert (report.satisfied, report.missing) == (("a",), ("A",))


def _repeating_run(no_progress: NoProgressDetector | bool | None) -> RunResult[Any]:
    """The same call, answered with the same empty result, until the step budget ends it."""
    ctl = RunController(Budget(max_steps=8, max_tokens=10_000,
                               tool_limits=ToolLimits(default=20, total=20)),
                        no_progress=no_progress,  # type: ignore[arg-type]
                        validate=lambda state, output: True)
    return ctl.run("poll", script(ToolCall("poll", {})), tools({"poll": ToolResult.success(None)}))


def test_no_progress_off_never_stops_for_no_progress() -> None:
    # issue 40: RunController had no "off"; runner.loop bypassed NoProgressDetector.__init__
    # with a member-less subclass. no_progress=False is the real off.
    on = _repeating_run(None)
    assert on.stop.reason is R.NO_PROGRESS and on.steps == 3  # the default detector fires
    off = _repeating_run(False)
    assert off.stop.reason is R.STEP_BUDGET  # only the budget ends it
    assert off.steps == 8 and off.tool_calls == 8
    assert off.record["controls"]["no_progress"] is None  # the record says it was off


def test_no_progress_off_survives_capture_and_replay() -> None:
    off = _repeating_run(False)
    case = capture_case(off.to_json())
    assert case["no_progress"] is None
    replay = run_case(EvalCase.from_json(case))
    assert replay.passed and replay.observed is R.STEP_BUDGET


def test_no_progress_refuses_anything_but_a_detector_none_or_false() -> None:
    with pytest.raises(TypeError, match="no_progress must be a NoProgressDetector"):
        RunController(Budget(max_steps=2, max_tokens=10), no_progress=True)  # type: ignore[arg-type]


def test_the_loop_turns_no_progress_off_without_bypassing_the_detector() -> None:
    import runner.loop._trajectory as trajectory

    assert not hasattr(trajectory, "_NoProgressOff")
    # no subclass of the detector anywhere in runner skips its __init__ to switch it off
    assert NoProgressDetector.__subclasses__() == []


def test_a_fact_expires_and_a_write_tool_invalidates_it() -> None:
    clock = Clock()
    ctl = RunController(Budget(max_steps=9, max_tokens=100), clock=clock, validate=lambda s, o: True,
                        guard=Guard(allow={"get_stock", "reserve"},
                                    side_effects={"reserve": SideEffectRule()}))
    state = ctl.start("t")
    state.set_fact("stock", 5, ttl_s=30)
    state.set_fact("price", 9)  # voided by any write tool
    state.set_fact("sku", "A-1", invalidated_by=set())  # never voided by a tool
    assert state.fact("stock") == 5
    clock.now = 31.0
    assert state.fact("stock") is None and state.fact("stock", "stale") == "stale"
    assert ctl.check_before_model(state) is None
    v = ctl.on_action(state, ToolCall("reserve", {"n": 1}, idempotency_key="k"))
    ctl.on_tool_result(state, v.call, ToolResult.success({"ok": True}))  # type: ignore[arg-type]
    assert state.fact("price") is None and state.fact("sku") == "A-1"


def test_stale_fact_cannot_satisfy_a_rule() -> None:
    clock = Clock()

    def fold(state: RunState, call: ToolCall, result: ToolResult) -> None:
        if call.tool == "check":
            state.set_fact("eligible", True, ttl_s=10)
        clock.now += 20  # every tool call takes 20 s: the fact is stale by the next step

    rule = StoppingRule("r", {"eligible": lambda s: s.fact("eligible") is True})
    ctl = RunController(Budget(max_steps=4, max_tokens=100), rules=[rule], fold=fold, clock=clock)
    result = ctl.run("t", script(ToolCall("check"), ToolCall("other"), Finish("x")),
                     tools({"check": ToolResult.success(1), "other": ToolResult.success(2)}))
    assert result.reason is not StopReason.GOAL_MET
    assert result.reports["r"].missing == ("eligible",)


# -- progress as change in the folded state ------------------------------------------------------
def test_results_that_teach_the_run_nothing_are_no_progress() -> None:
    from runner.control import NoProgressDetector, StalledState

    n = iter(range(100))  # every call is new, every result non-empty, yet nothing new is learnt
    ctl = RunController(Budget(max_steps=20, max_tokens=1000), validate=lambda s, o: True,
                        fold=merge, no_progress=NoProgressDetector(stalled=3))
    result = ctl.run("t", lambda s: ToolCall("search", {"page": next(n)}),
                     tools({"search": ToolResult.success({"hits": ["doc-1"]})}))
    assert result.reason is StopReason.NO_PROGRESS and type(result.stop.condition) is StalledState
    assert result.tool_calls == 4  # the first result taught something; three more did not
    assert result.stop.detail == "3 tool results in a row left the run state unchanged"
    learning = iter(range(100))
    ctl2 = RunController(Budget(max_steps=6, max_tokens=1000), validate=lambda s, o: True,
                         fold=merge, no_progress=NoProgressDetector(stalled=3))
    moving = ctl2.run("t", lambda s: ToolCall("search", {"page": next(learning)}),
                      lambda c: ToolResult.success({"hits": [c.args["page"]]}))
    assert moving.reason is StopReason.STEP_BUDGET
    with pytest.raises(ValueError, match=r"StalledState\.results must be >= 2"):
        StalledState(1)


# -- 1. the stopping rule is judged before the empty-result check ---------------------------------
def test_rule_that_holds_wins_over_empty_results() -> None:
    """Predicates all hold, yet the last three tools returned None / {}: the run is goal_met."""
    def fold(state: RunState, call: ToolCall, result: ToolResult) -> None:
        state.data["calls"] = state.data.get("calls", 0) + 1

    rule = StoppingRule("enough", {"three_calls": lambda s: s.data.get("calls", 0) >= 3},
                        output=lambda s: s.data["calls"])
    ctl = RunController(Budget(max_steps=10, max_tokens=1000), rules=[rule], fold=fold)
    calls = [ToolCall("a", {"i": 1}), ToolCall("b", {"i": 2}), ToolCall("c", {"i": 3})]
    result = ctl.run("t", script(*calls), tools({"a": ToolResult.success({}),
                                                 "b": ToolResult.success({}),
                                                 "c": ToolResult.success({})}))
    assert result.reason is StopReason.GOAL_MET
    assert result.output == 3


# -- 8. predicates, progress, idempotency across runs, calibration -------------------------------
def test_truthy_predicate_counts_as_satisfied() -> None:
    rule = StoppingRule("r", {"has_id": lambda s: s.data.get("shipment_id")},  # type: ignore[dict-item]
                        output=lambda s: s.data["shipment_id"])
    ctl = RunController(Budget(max_steps=5, max_tokens=100), rules=[rule], fold=merge)
    result = ctl.run("t", script(ToolCall("lookup")),
                     tools({"lookup": ToolResult.success({"shipment_id": "SH-1"})}))
    assert result.reason is StopReason.GOAL_MET and result.output == "SH-1"


def test_results_wrapper_with_nothing_in_it_is_no_progress() -> None:
    n = iter(range(100))
    ctl = RunController(Budget(max_steps=20, max_tokens=1000), validate=ok)
    result = ctl.run("t", lambda s: ToolCall("search", {"q": next(n)}),
                     tools({"search": ToolResult.success({"results": []})}))
    assert result.reason is StopReason.NO_PROGRESS
    assert result.steps < 20


def test_a_rule_still_missing_refuses_a_validated_finish() -> None:  # M9
    rule = StoppingRule("resolution", {"shipment": lambda s: "shipment_id" in s.data,
                                       "eligibility": lambda s: "eligible" in s.data})
    result = RunController(Budget(max_steps=4, max_tokens=100), rules=[rule], fold=merge,
                           validate=ok).run(
        "t", script(ToolCall("get"), Finish({"shipment_id": "SH-1"})),
        tools({"get": ToolResult.success({"shipment_id": "SH-1"})}))
    assert result.reason is not StopReason.GOAL_MET
    assert result.reports["resolution"].missing == ("eligibility",)
