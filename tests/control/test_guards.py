"""Guards on side-effect tools and idempotency keys: the allow-list before a tool runs, amount
limits, approvals, plain-code rules and their contract, and the guard's JSON."""

from __future__ import annotations

import pytest

from runner.control import (
    Budget,
    Finish,
    Guard,
    PredicateReport,
    RunController,
    RunState,
    SideEffectRule,
    Stop,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
    VerdictKind,
)
from runner.control._conditions import RepeatedEmptyResult
from runner.control._types import Checkpoint, Phase
from tests.control.conftest import script
from tests.control.helpers_runs import ok

R = StopReason


def guard(**kw: object) -> Guard:
    rule = SideEffectRule(amount_arg="amount", max_amount=1000, escalate_above=100)
    return Guard(allow={"lookup", "refund", "wire"},
                 side_effects={"refund": rule, "wire": SideEffectRule(requires_approval=True)},
                 **kw)  # type: ignore[arg-type]


def judge(g: Guard, call: ToolCall, state: RunState | None = None) -> tuple | None:
    return g.judge(call, state or RunState("r", "t"))


def test_allow_list_refuses_unknown_tools() -> None:
    out = judge(guard(), ToolCall("drop_table", {}))
    assert out is not None and out[0] is R.POLICY_BLOCK and "allow-list" in out[1]
    assert judge(guard(), ToolCall("lookup", {"q": 1})) is None


def test_amounts_block_or_escalate() -> None:
    g = guard()
    assert judge(g, ToolCall("refund", {"amount": 50}, idempotency_key="a")) is None
    assert judge(g, ToolCall("refund", {"amount": 100}, idempotency_key="a")) is None  # not over
    reason, detail, question = judge(g, ToolCall("refund", {"amount": 250}, idempotency_key="a"))
    assert reason is R.NEEDS_HUMAN and "250" in detail and question and "Approve refund" in question
    reason, detail, _ = judge(g, ToolCall("refund", {"amount": 5000}, idempotency_key="a"))
    assert reason is R.POLICY_BLOCK and "exceeds the maximum 1000" in detail
    reason, detail, _ = judge(g, ToolCall("refund", {"amount": "lots"}, idempotency_key="a"))
    assert reason is R.POLICY_BLOCK and "must be a number" in detail
    reason, _, _ = judge(g, ToolCall("refund", {"amount": True}, idempotency_key="a"))
    assert reason is R.POLICY_BLOCK


def test_approval_flag() -> None:
    call = ToolCall("wire", {"to": "x"}, idempotency_key="w1")
    reason, _, question = judge(guard(), call)
    assert reason is R.NEEDS_HUMAN and question
    assert judge(guard(approvals={"wire"}), call) is None


def test_idempotency_key_required_from_field_or_argument() -> None:
    g = guard()
    reason, detail, _ = judge(g, ToolCall("refund", {"amount": 5}))
    assert reason is R.POLICY_BLOCK and "idempotency key" in detail
    assert judge(g, ToolCall("refund", {"amount": 5, "idempotency_key": "k"})) is None
    assert judge(g, ToolCall("refund", {"amount": 5, "idempotency_key": ""})) is not None


def test_custom_plain_code_rule() -> None:
    def no_weekend(call: ToolCall, state: RunState) -> tuple[StopReason, str] | None:
        return (R.NEEDS_HUMAN, "flagged customer") if call.args.get("customer") == 9 else None

    g = guard(rules=(no_weekend,))
    reason, detail, question = judge(g, ToolCall("lookup", {"customer": 9}))
    assert reason is R.NEEDS_HUMAN and detail == "flagged customer" and question
    assert judge(g, ToolCall("lookup", {"customer": 1})) is None
    bad = guard(rules=(lambda c, s: (R.GOAL_MET, "nope"),))
    with pytest.raises(ValueError):
        judge(bad, ToolCall("lookup", {}))


def test_guard_construction_fails_closed() -> None:
    with pytest.raises(ValueError):
        Guard(allow=set())
    with pytest.raises(TypeError):
        Guard(allow="lookup")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Guard(allow={"a"}, side_effects={"b": SideEffectRule()})
    with pytest.raises(ValueError):
        SideEffectRule(max_amount=5)


def _controller() -> RunController:
    return RunController(Budget(max_steps=8, max_tokens=1000,
                                tool_limits=ToolLimits(side_effect_default=2)),
                         guard=guard(), validate=lambda s, o: True)


def test_repeated_key_is_deduplicated_not_re_executed() -> None:
    executed: list[ToolCall] = []

    def execute(call: ToolCall) -> ToolResult:
        executed.append(call)
        return ToolResult.success({"refund_id": len(executed)})

    call = ToolCall("refund", {"amount": 20}, idempotency_key="r-1")
    res = _controller().run("t", script(call, call, Finish("done")), execute)
    assert res.reason is R.GOAL_MET
    assert len(executed) == 1 and res.tool_calls == 1
    kinds = [r.kind for r in res.trace]
    assert kinds == ["tool", "deduplicated"]
    assert res.trace[1].result == res.trace[0].result  # the earlier result, returned again


def test_step_api_reports_deduplicated_verdict() -> None:
    c = _controller()
    state = c.start("t")
    call = ToolCall("refund", {"amount": 20, "idempotency_key": "r-1"})
    assert c.check_before_model(state) is None
    v = c.on_action(state, call)
    assert v.kind is VerdictKind.EXECUTE
    c.on_tool_result(state, call, ToolResult.success({"ok": 1}))
    assert c.check_before_model(state) is None
    v = c.on_action(state, call)
    assert v.kind is VerdictKind.DEDUPLICATED and v.result == ToolResult.success({"ok": 1})


def test_failed_side_effect_may_be_retried_with_the_same_key() -> None:
    results = iter([ToolResult.failure("timeout"), ToolResult.success({"ok": 1})])
    call = ToolCall("refund", {"amount": 20}, idempotency_key="r-1")
    res = _controller().run("t", script(call, call, Finish("x")), lambda c: next(results))
    assert res.reason is R.GOAL_MET and res.tool_calls == 2


def test_same_key_different_arguments_is_refused() -> None:
    a = ToolCall("refund", {"amount": 20}, idempotency_key="r-1")
    b = ToolCall("refund", {"amount": 90}, idempotency_key="r-1")
    res = _controller().run("t", script(a, b), lambda c: ToolResult.success({"ok": 1}))
    assert res.reason is R.POLICY_BLOCK and "reused with different arguments" in res.stop.detail
    assert res.tool_calls == 1


def test_refused_action_never_executes() -> None:
    executed: list[ToolCall] = []
    call = ToolCall("refund", {"amount": 250}, idempotency_key="r-9")
    res = _controller().run("t", script(call), lambda c: executed.append(c) or ToolResult())
    assert res.reason is R.NEEDS_HUMAN and executed == []
    assert res.handoff is not None and "Approve refund" in res.handoff.question


# The guard's judgement pinned exactly: amount limits at their boundary, rules without an
# amount argument, the label in a question, plain-code rules in order, their contract and the
# guard's JSON.
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


# -- targeted tests for the nine controller bugs of the issue (see tests/control/mutants) --------
def test_guard_refuses_before_the_tool_runs() -> None:  # M2
    ran: list[str] = []

    def execute(call: ToolCall) -> ToolResult:
        ran.append(call.tool)
        return ToolResult.success({"refunded": True})

    guard = Guard(allow={"refund"}, side_effects={"refund": SideEffectRule(
        amount_arg="amount", max_amount=100)})
    result = RunController(Budget(max_steps=3, max_tokens=100), guard=guard, validate=ok).run(
        "t", script(ToolCall("refund", {"amount": 500}, idempotency_key="k")), execute)
    assert result.reason is StopReason.POLICY_BLOCK and ran == []


# -- 5. papercuts and loose ends -----------------------------------------------------------------
def test_a_guard_rules_stop_is_limited_like_its_tuple() -> None:
    from runner.control import FinishGate

    claim = Guard(allow={"x"}, rules=(lambda c, s: Stop(StopReason.STEP_BUDGET, FinishGate(), "no"),))
    with pytest.raises(ValueError, match="policy_block or needs_human, not step_budget"):
        claim.judge(ToolCall("x"), RunState("r", "t"))
