"""The control records declare their fields once and derive their JSON (runner/canonical's
record mechanism): keys written only in some states come out exactly as before
(tests/canonical/test_control_records.py counts what is left hand-written)."""

from __future__ import annotations

from runner.control import Guard, SideEffectRule, Stop, StopReason
from runner.control._conditions import MaxSteps
from runner.control._evals import CaseResult
from runner.control._types import StepRecord, ToolResult


def test_a_step_writes_output_only_when_a_finish_was_rejected_even_a_null_one() -> None:
    rejected = StepRecord(3, "finish_rejected", note="no", output=None)
    assert list(rejected.to_json().items()) == list({
        "step": 3, "kind": "finish_rejected", "tool": None, "args": None, "result": None,
        "note": "no", "output": None}.items())
    tool = StepRecord(4, "tool", "get", {"a": 1}, ToolResult.success(2), idempotency_key="k",
                      seconds=0.5)
    assert list(tool.to_json()) == ["step", "kind", "tool", "args", "result", "note",
                                    "idempotency_key", "seconds"]
    assert tool.to_json()["result"] == {"ok": True, "data": 2, "error": None, "fatal": False,
                                        "cost_usd": 0.0}
    assert "output" not in StepRecord(5, "invalid", note="x", output="ignored").to_json()


def test_a_stop_writes_causes_only_when_it_has_some_and_question_only_when_asked() -> None:
    limit = MaxSteps(2)
    inner = Stop(StopReason.STEP_BUDGET, limit, "2 steps", 2)
    assert inner.to_json() == {"reason": "step_budget",
                               "condition": {"type": "MaxSteps", "name": "max_steps=2"},
                               "detail": "2 steps", "step": 2}
    outer = Stop(StopReason.STEP_BUDGET, limit, "all", 2, (inner,), "why?")
    assert list(outer.to_json()) == ["reason", "condition", "detail", "step", "causes",
                                     "question"]
    assert outer.to_json()["causes"] == [inner.to_json()]
    assert outer == Stop(StopReason.STEP_BUDGET, limit, "all", 2, (inner,), "why?")


def test_a_guard_and_a_case_result_write_their_fields_as_before() -> None:
    guard = Guard(allow={"pay", "get"}, side_effects={"pay": SideEffectRule(amount_arg="usd")},
                  approvals={"pay"}, rules=(lambda call, state: None,))
    assert guard.to_json() == {
        "allow": ["get", "pay"], "approvals": ["pay"], "rules": 1,
        "side_effects": {"pay": {"amount_arg": "usd", "max_amount": None,
                                 "escalate_above": None, "requires_approval": False,
                                 "idempotency_arg": "idempotency_key"}}}
    result = CaseResult("c", "f.json", StopReason.GOAL_MET, StopReason.STEP_BUDGET, "MaxSteps",
                        "2 steps", None, "detail", ("p",))
    assert list(result.to_json().items()) == list({
        "id": "c", "source": "f.json", "expected": "goal_met", "observed": "step_budget",
        "stop_kind": "MaxSteps", "stop_detail": "2 steps", "output_ok": None,
        "problems": ["p"], "passed": False}.items())
