"""`capture_case` exactly: the case it writes for a run that used every kind of step (tool,
deduplicated side effect, invalid reply, rejected finish, accepted finish), and the error it
gives for each malformed record. Pinned field by field so a mutant that drops or alters one
field of the replay is caught (tests/control/mutation.py)."""

from __future__ import annotations

from typing import Any

import pytest

from runner.control import (
    Budget,
    EvalCase,
    EvalCaseError,
    Finish,
    Guard,
    Invalid,
    PredicateReport,
    RunController,
    SideEffectRule,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
    capture_case,
    run_case,
)
from tests.control.conftest import edited, merge, script, tools


def rich_record(allow_last: bool = True) -> dict[str, Any]:
    """A run through every trace kind; ``allow_last`` False makes the guard block step 6."""
    allow = {"get", "refund", "get2"} if allow_last else {"get", "refund"}
    guard = Guard(allow=allow, side_effects={"refund": SideEffectRule(
        amount_arg="amount", max_amount=1000, idempotency_arg="key")})
    rules = [StoppingRule("facts", {"v": lambda s: "v" in s.data, "w": lambda s: "w" in s.data}),
             StoppingRule("verifier", evaluate=lambda s: PredicateReport(("v",), ()))]
    ctl = RunController(Budget(max_steps=8, max_tokens=1000, max_cost_usd=5.0), guard=guard,
                        fold=merge, rules=rules, validate=lambda s, o: o == {"v": 1, "w": 2})
    decide = script(Turn(ToolCall("get", {"q": 1}), tokens=7, cost_usd=0.25),
                    Turn(ToolCall("refund", {"amount": 3, "key": "k1"})),
                    Turn(ToolCall("refund", {"amount": 3, "key": "k1"}), tokens=4),
                    Turn(Invalid("bad json"), tokens=3),
                    Turn(Finish({"v": 1}), tokens=5),
                    Turn(ToolCall("get2", {}), tokens=2),
                    Turn(Finish({"v": 1, "w": 2}), tokens=6, cost_usd=0.5))
    execute = tools({"get": ToolResult.success({"v": 1}), "refund": ToolResult.success({"w": 2}),
                     "get2": ToolResult.success({})})
    return ctl.run("Find v and w", decide, execute, run_id="r-7").to_json()


def ok(data: Any) -> dict[str, Any]:
    return {"cost_usd": 0.0, "data": data, "error": None, "fatal": False, "ok": True}


TURNS = [{"call": {"args": {"q": 1}, "tool": "get"}, "cost_usd": 0.25, "tokens": 7},
         {"call": {"args": {"amount": 3, "key": "k1"}, "tool": "refund"}},
         {"call": {"args": {"amount": 3, "key": "k1"}, "tool": "refund"}, "tokens": 4},
         {"invalid": "bad json", "tokens": 3},
         {"finish": {"v": 1}, "tokens": 5},
         {"call": {"args": {}, "tool": "get2"}, "tokens": 2}]
COMMON = {
    "format": "ect.stop-eval/1",
    "id": "captured_r-7",
    "task": "Find v and w",
    "budget": {"max_cost_usd": 5.0, "max_steps": 8, "max_tokens": 1000,
               "tool_limits": {"default": 8, "per_tool": {}, "side_effect_default": 1}},
    "no_progress": {"empty_results": 3, "repeats": 3},
    "tool_failure": {"consecutive": 2},
    "rules": [{"name": "facts", "require": ["v", "w"], "stop_early": False}],
}
GUARD_SIDE_EFFECTS = {"refund": {"amount_arg": "amount", "idempotency_arg": "key",
                                 "max_amount": 1000, "requires_approval": False}}


def test_capture_of_a_goal_met_run_pins_every_field() -> None:
    record = rich_record()
    assert record["stop"]["reason"] == "goal_met" and record["steps"] == 7
    case = capture_case(record)
    assert case == {
        **COMMON,
        "description": "captured from run r-7, which stopped goal_met: the finish passed every check",
        "expect_stop": "goal_met",
        "expect_steps": 7,
        "expect_tools": ["get", "refund", "get2"],
        "finish_check": {"verdicts": [False, True]},
        "guard": {"allow": ["get", "get2", "refund"], "approvals": [],
                  "side_effects": GUARD_SIDE_EFFECTS},
        "agent": {"turns": [*TURNS, {"cost_usd": 0.5, "finish": {"v": 1, "w": 2}, "tokens": 6}]},
        "tools": {"get": {"results": [ok({"v": 1})]}, "get2": {"results": [ok({})]},
                  "refund": {"results": [ok({"w": 2})]}},
    }
    replay = run_case(EvalCase.from_json(case, "captured"))
    assert replay.passed, replay.failure_line()
    assert replay.to_json() == {
        "id": "captured_r-7", "source": "captured", "expected": "goal_met", "observed": "goal_met",
        "stop_kind": "FinishGate", "stop_detail": "the finish passed every check",
        "output_ok": None, "problems": [], "passed": True}


def test_capture_of_a_blocked_run_with_a_chosen_expectation_and_id() -> None:
    record = rich_record(allow_last=False)
    assert record["stop"]["reason"] == "policy_block"
    case = capture_case(record, case_id="mine", expect="goal_met")
    assert case == {
        **COMMON,
        "id": "mine",
        "description": ("captured from run r-7, which stopped policy_block: "
                        "get2 is not on the allow-list"),
        "expect_stop": "goal_met",  # what should have happened; no steps/tools pinned
        "finish_check": {"verdicts": [False]},
        "guard": {"allow": ["get", "refund"], "approvals": [], "side_effects": GUARD_SIDE_EFFECTS},
        "agent": {"turns": TURNS},
        "tools": {"get": {"results": [ok({"v": 1})]}, "refund": {"results": [ok({"w": 2})]}},
    }
    as_is = capture_case(record, expect=StopReason.POLICY_BLOCK)
    assert as_is["expect_stop"] == "policy_block" and as_is["id"] == "captured_r-7"
    assert "expect_steps" not in as_is and "expect_tools" not in as_is


def test_capture_fills_a_step_with_no_recorded_action_and_keeps_a_structured_task() -> None:
    record = rich_record()
    record["task"] = {"ask": "v"}
    record["trace"] = [t for t in record["trace"] if t["step"] != 4]  # the invalid reply
    case = capture_case(record)
    assert case["task"] == '{"ask":"v"}'
    assert case["agent"]["turns"][3] == {"invalid": "(no action recorded for this step)",
                                        "tokens": 3}
    # a run without rules replays its verdicts even without a validator
    record = rich_record()
    record["controls"]["rules"] = []
    record["controls"]["validate"] = False
    case = capture_case(record)
    assert "rules" not in case and case["finish_check"] == {"verdicts": [False, True]}
    # with rules and no validator the rules alone judge the finish
    record["controls"]["rules"] = rich_record()["controls"]["rules"]
    assert "finish_check" not in capture_case(record)


def broken(path: str, value: Any) -> dict[str, Any]:
    return edited(RECORD, (path,), value)


RECORD = rich_record()


@pytest.mark.parametrize(("record", "message"), [
    ("nope", "$.format: must be 'ect.run-record/1' (a RunResult.to_json() record)"),
    ({"format": "ect.run-record/2"},
     "$.format: must be 'ect.run-record/1' (a RunResult.to_json() record)"),
    *[(broken(k, KeyError), f"$: missing field {k!r}")
      for k in ("run_id", "stop", "steps", "trace", "controls", "usage", "task")],
    (broken("controls", []), "$.controls: must be an object"),
    (broken("trace", {}), "$.trace: must be a list"),
    (broken("usage", {}), "$.usage: must be a list"),
    (broken("steps", "7"), "$.steps: must be an integer"),
    (broken("steps", -1), "$.steps: must be >= 0"),
    (broken("trace", ["x"]), "$.trace[0]: must be an object"),
    (broken("trace", [{"kind": "tool", "step": None}]), "$.trace[0].step: must be an integer"),
    (broken("trace", [{"kind": "tool", "step": 1, "tool": "get", "args": None, "result": 3}]),
     "$.trace[0].result: must be an object"),
    (broken("steps", 0), "$.steps: the run made no decision: there is nothing to replay"),
])
def test_capture_refuses_a_malformed_record_with_one_exact_line(record: Any, message: str) -> None:
    with pytest.raises(EvalCaseError) as e:
        capture_case(record, source="run.json")
    assert str(e.value) == f"run.json: {message}"
    with pytest.raises(EvalCaseError) as e:
        capture_case(record)
    assert str(e.value) == f"<record>: {message}"


def test_the_run_record_and_its_handoff_are_pinned() -> None:
    record = rich_record(allow_last=False)
    assert record["handoff"] == {
        "run_id": "r-7", "stop_reason": "policy_block", "asked": "Find v and w", "cost_usd": 0.25,
        "done": ['get({"q":1}) -> {"v":1}',
                 'refund({"amount":3,"key":"k1"}) -> {"w":2}',
                 'refund({"amount":3,"key":"k1"}) -> {"w":2} [deduplicated: not re-executed]',
                 "invalid reply: bad json",
                 "proposed a finish; rejected: missing finish_check"],
        "found": ["facts: satisfied v, w", "verifier: satisfied v"],
        "question": "A guard refused the action: is the guard right, or should it be allowed?",
        "steps": 6, "stop_detail": "get2 is not on the allow-list", "tool_calls": 2}
    assert {k: v for k, v in record.items() if k not in ("trace", "controls", "handoff")} == {
        "format": "ect.run-record/1", "run_id": "r-7", "task": "Find v and w",
        "stop": {"condition": {"name": "guard", "type": "Guard"}, "reason": "policy_block",
                 "detail": "get2 is not on the allow-list", "step": 6},
        "steps": 6, "tool_calls": 2, "tokens": 21, "cost_usd": 0.25, "data": {"v": 1, "w": 2},
        "last_action": {"call": {"args": {}, "tool": "get2"}},
        "reports": {"facts": {"detail": "", "escalate": None, "missing": [], "satisfied": ["v", "w"]},
                    "verifier": {"detail": "", "escalate": None, "missing": [], "satisfied": ["v"]}},
        "usage": [[7, 0.25], [0, 0.0], [4, 0.0], [3, 0.0], [5, 0.0], [2, 0.0]]}
    done = rich_record()
    assert done["output"] == {"v": 1, "w": 2} and "handoff" not in done


def test_state_that_is_not_json_is_kept_as_its_repr() -> None:
    from runner.control._result import _jsonable

    assert _jsonable({"s": {1}, "d": {"t": (1,), 2: {3}}}) == {"s": "{1}", "d": {"t": "(1,)", "2": "{3}"}}
    assert _jsonable({1}) == "{1}"
