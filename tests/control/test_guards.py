"""Guards on side-effect tools and idempotency keys."""

from __future__ import annotations

import pytest

from runner.control import (
    Budget,
    Finish,
    Guard,
    RunController,
    RunState,
    SideEffectRule,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
    VerdictKind,
)
from tests.control.conftest import script

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
