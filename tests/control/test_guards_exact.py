"""The guard's judgement pinned exactly: amount limits at their boundary, rules without an
amount argument, the label in a question, plain-code rules in order, their contract and the
guard's JSON."""

from __future__ import annotations

import pytest

from runner.control import (
    Budget,
    Guard,
    PredicateReport,
    RunController,
    RunState,
    SideEffectRule,
    StopReason,
    ToolCall,
)
from runner.control._conditions import RepeatedEmptyResult
from runner.control._types import Checkpoint, Phase, ToolResult

R = StopReason


def state() -> RunState:
    return RunState("r", "t")


def test_amount_limits_hold_at_their_boundary_and_need_an_amount_argument() -> None:
    g = Guard(allow={"pay"}, side_effects={"pay": SideEffectRule(
        amount_arg="amount", max_amount=100, escalate_above=50)})
    at_max = ToolCall("pay", {"amount": 100}, idempotency_key="k")
    assert g.judge(at_max, state()) == (
        R.NEEDS_HUMAN, "pay: amount=100 is over the 50 approval threshold",
        'Approve pay({"amount":100})? Policy requires a person above 50.')
    s = state()
    s.approvals = frozenset({"pay"})
    assert g.judge(at_max, s) is None  # exactly the maximum is allowed
    assert g.judge(ToolCall("pay", {"amount": 101}, idempotency_key="k"), s) == (
        R.POLICY_BLOCK, "pay: amount=101 exceeds the maximum 100", None)
    # an amount argument without a limit is not checked at all, not even for being a number
    loose = Guard(allow={"pay"}, side_effects={"pay": SideEffectRule(amount_arg="amount")})
    assert loose.judge(ToolCall("pay", {"amount": "lots"}, idempotency_key="k"), state()) is None


def test_a_question_names_the_call_with_its_arguments_cut_at_sixty_characters() -> None:
    g = Guard(allow={"pay"}, side_effects={"pay": SideEffectRule(requires_approval=True)})
    verdict = g.judge(ToolCall("pay", {"note": "x" * 80}, idempotency_key="k"), state())
    args = '{"note":"' + "x" * 50 + "…"
    assert len(args) == 60
    assert verdict == (R.NEEDS_HUMAN, "pay requires approval and none was given",
                       f"Approve pay({args})? This action needs a person's approval.")


def test_plain_code_rules_run_in_order_see_the_state_and_keep_to_their_contract() -> None:
    seen: list[object] = []

    def quiet(call: ToolCall, s: RunState) -> None:
        seen.append(s.data.get("who"))

    def no_deletes(call: ToolCall, s: RunState) -> tuple[str, str] | None:
        return ("policy_block", "no deletes") if call.tool == "delete" else None

    def ask(call: ToolCall, s: RunState) -> tuple[str, str]:
        return ("needs_human", "Sure?")

    s = state()
    s.data["who"] = "me"
    g = Guard(allow={"delete", "get"}, rules=(quiet, no_deletes))
    assert g.judge(ToolCall("delete"), s) == (R.POLICY_BLOCK, "no deletes", None)
    assert g.judge(ToolCall("get"), s) is None and seen == ["me", "me"]
    asking = Guard(allow={"get"}, rules=(ask,))
    assert asking.judge(ToolCall("get", {"q": 1}), s) == (R.NEEDS_HUMAN, "Sure?",
                                                          'Sure? Allow get({"q":1})?')
    bad = Guard(allow={"get"}, rules=(lambda c, s: ("goal_met", "done"),))
    with pytest.raises(ValueError) as e:
        bad.judge(ToolCall("get"), s)
    assert str(e.value) == "a guard rule may only return policy_block or needs_human, not goal_met"


def test_guard_json() -> None:
    g = Guard(allow={"pay", "get"}, side_effects={"pay": SideEffectRule(
        amount_arg="amount", escalate_above=5)}, approvals={"pay"}, rules=(lambda c, s: None,))
    assert g.to_json() == {
        "allow": ["get", "pay"], "approvals": ["pay"], "rules": 1,
        "side_effects": {"pay": {"amount_arg": "amount", "max_amount": None, "escalate_above": 5,
                                 "requires_approval": False, "idempotency_arg": "idempotency_key"}}}


def test_a_check_result_is_normalised_or_refused_by_name() -> None:
    assert PredicateReport.of(True) == PredicateReport(satisfied=("check",))
    assert PredicateReport.of(False, "v") == PredicateReport(missing=("v",))
    with pytest.raises(TypeError) as e:
        PredicateReport.of(5)  # type: ignore[arg-type]
    assert str(e.value) == "a check must return bool or PredicateReport, got int"


def test_only_a_rejected_finish_records_its_output() -> None:
    c = RunController(Budget(max_steps=2, max_tokens=10), validate=lambda s, o: True)
    res = c.run("t", lambda s: ToolCall("get") if s.step == 0 else None,  # type: ignore[arg-type,return-value]
                lambda call: ToolResult.success(1))
    assert "output" not in res.trace[0].to_json()


def test_empty_results_that_are_not_json_are_told_apart() -> None:
    cond = RepeatedEmptyResult(count=2)
    s = state()
    call = ToolCall("get")
    for data in ({1: []}, {2: []}):  # empty, not JSON (int keys), and different
        point = Checkpoint(Phase.AFTER_TOOL, s, action=call, call=call, result=ToolResult(data=data))
        assert cond.check(point) is None
        cond.observe(point)


def test_a_guard_keeps_its_own_copies_of_what_it_was_given() -> None:
    allow, approvals = {"get"}, {"get"}
    side: dict[str, SideEffectRule] = {}
    rules: list[object] = []
    g = Guard(allow=allow, approvals=approvals, side_effects=side, rules=rules)  # type: ignore[arg-type]
    allow.add("pay")
    approvals.add("pay")
    side["get"] = SideEffectRule()
    rules.append(lambda c, s: (R.POLICY_BLOCK, "late rule"))
    s = RunState("r", "t")
    assert g.judge(ToolCall("pay"), s) == (R.POLICY_BLOCK, "pay is not on the allow-list", None)
    assert g.judge(ToolCall("get"), s) is None  # no later rule, no later side effect
    assert (g.allow, g.approvals, g.side_effects, g.rules) == (frozenset({"get"}), frozenset({"get"}), {}, ())


def test_a_rule_may_name_its_reason_as_a_plain_string() -> None:
    g = Guard(allow={"get"}, rules=(lambda c, s: ("needs_human", "Sure?"),))
    reason, detail, question = g.judge(ToolCall("get", {"q": 1}), RunState("r", "t"))  # type: ignore[misc]
    assert type(reason) is R and reason is R.NEEDS_HUMAN
    assert (detail, question) == ("Sure?", 'Sure? Allow get({"q":1})?')


def test_approvals_name_tools_exactly() -> None:
    rule = SideEffectRule(amount_arg="amount", escalate_above=100)
    g = Guard(allow={"refund", "pay"}, approvals={"Pay"},
              side_effects={"refund": rule, "pay": SideEffectRule(requires_approval=True)})
    s = RunState("r", "t", approvals=frozenset({"Refund"}))
    big = ToolCall("refund", {"amount": 500}, idempotency_key="k")
    assert g.judge(big, s)[0] is R.NEEDS_HUMAN  # type: ignore[index]  # "Refund" is not refund
    assert g.judge(ToolCall("pay", {}, idempotency_key="j"), s)[0] is R.NEEDS_HUMAN  # type: ignore[index]
    s.approvals = frozenset({"refund", "pay"})
    assert g.judge(big, s) is None and g.judge(ToolCall("pay", {}, idempotency_key="j"), s) is None


def test_a_rules_stop_keeps_its_own_detail_and_question() -> None:
    from runner.control import FinishGate, Stop

    asked = Stop(R.NEEDS_HUMAN, FinishGate(), "over the limit", question="Allow it?")
    g = Guard(allow={"get"}, rules=(lambda c, s: asked,))
    assert g.judge(ToolCall("get"), RunState("r", "t")) == (R.NEEDS_HUMAN, "over the limit",
                                                             "Allow it?")
    pay = Guard(allow={"pay"}, side_effects={"pay": SideEffectRule(requires_approval=True)})
    shouted = RunState("r", "t", approvals=frozenset({"PAY"}))  # not the tool's name
    assert pay.judge(ToolCall("pay", {}, idempotency_key="k"), shouted)[0] is R.NEEDS_HUMAN  # type: ignore[index]
