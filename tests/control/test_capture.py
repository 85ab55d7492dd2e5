"""Capture (``capture_case``, ``ect evals capture``): the run record a replay needs, the case
written for every kind of step, replays of tool timeouts and spent time budgets, and records a
user may hand it: every malformed part named by its path in one line (never a traceback)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from runner.canonical import canonical_bytes
from runner.cli import cli
from runner.control import (
    Budget,
    EvalCase,
    EvalCaseError,
    Finish,
    Guard,
    Invalid,
    PredicateReport,
    RunController,
    RunState,
    SideEffectRule,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
    capture_case,
    run_case,
)
from runner.control._evalcase import MAX_EVAL_SECONDS
from tests.control.conftest import edited, merge, script, tools
from tests.control.helpers_pay_retry import _replayed
from tests.control.helpers_refunds import failing_run


def record(budget: Budget | None = None) -> dict[str, Any]:
    """A goal_met run: a read, a guarded refund with an idempotency key, a checked finish."""
    ctl = RunController(
        budget or Budget(max_steps=5, max_tokens=100),
        guard=Guard(allow={"get", "refund"}, side_effects={"refund": SideEffectRule()}),
        fold=merge, validate=lambda s, o: o == {"v": 1})
    decide = script(Turn(ToolCall("get", {"q": 1}), tokens=3),
                    Turn(ToolCall("refund", {"amount": 3}, idempotency_key="k1"), tokens=2),
                    Turn(Finish({"v": 1}), tokens=1))
    execute = tools({"get": ToolResult.success({"v": 1}), "refund": ToolResult.success({})})
    result = ctl.run("Find v, then refund", decide, execute, run_id="r-9")
    assert result.reason is StopReason.GOAL_MET
    return result.to_json()


def test_every_side_effect_call_keeps_its_idempotency_key() -> None:
    # the refund is not the run's last action: before, its key was lost and the replay
    # stopped policy_block ("needs an idempotency key") instead of goal_met
    rec = record()
    assert rec["trace"][1]["idempotency_key"] == "k1"
    assert "idempotency_key" not in rec["trace"][0]  # a call without a key records none
    case = capture_case(rec)
    assert case["agent"]["turns"][1] == {
        "call": {"tool": "refund", "args": {"amount": 3}, "idempotency_key": "k1"}, "tokens": 2}
    assert case["agent"]["turns"][0] == {"call": {"tool": "get", "args": {"q": 1}}, "tokens": 3}
    res = run_case(EvalCase.from_json(case))
    assert res.passed, res.problems
    assert res.observed is StopReason.GOAL_MET


def test_a_deduplicated_call_keeps_its_key_and_replays_as_deduplicated() -> None:
    ctl = RunController(
        Budget(max_steps=5, max_tokens=100),
        guard=Guard(allow={"refund"}, side_effects={"refund": SideEffectRule()}),
        fold=merge, validate=lambda s, o: o == {"w": 2})
    refund = Turn(ToolCall("refund", {"amount": 3}, idempotency_key="k1"), tokens=2)
    result = ctl.run("Refund once", script(refund, refund, Turn(Finish({"w": 2}), tokens=1)),
                     tools({"refund": ToolResult.success({"w": 2})}), run_id="r-2")
    rec = result.to_json()
    assert [(t["kind"], t.get("idempotency_key")) for t in rec["trace"]] == [
        ("tool", "k1"), ("deduplicated", "k1")]
    case = capture_case(rec)
    assert [t["call"]["idempotency_key"] for t in case["agent"]["turns"][:2]] == ["k1", "k1"]
    assert case["expect_tools"] == ["refund"]  # the repeat was not executed, then or now
    res = run_case(EvalCase.from_json(case))
    assert res.passed, res.problems


def test_per_tool_timeouts_are_captured_and_replayed() -> None:
    rec = record(Budget(max_steps=5, max_tokens=100, tool_timeouts={"get": 2.0}))
    case = capture_case(rec)
    assert case["budget"]["tool_timeouts"] == {"get": 2.0}
    loaded = EvalCase.from_json(case)
    assert loaded.controller.budget.tool_timeouts == {"get": 2.0}
    assert run_case(loaded).passed


def test_a_run_without_per_tool_timeouts_writes_none() -> None:
    rec = record(Budget(max_steps=5, max_tokens=100, max_seconds=30))
    assert rec["controls"]["budget"]["tool_timeouts"] == {}
    assert "tool_timeouts" not in capture_case(rec)["budget"]


def case_with(**budget: Any) -> dict[str, Any]:
    return {"format": "ect.stop-eval/1", "id": "t", "task": "x", "expect_stop": "time_budget",
            "budget": {"max_steps": 3, "max_tokens": 100, **budget},
            "finish_check": {"require": ["v"]},
            "tools": {"slow": {"results": [{"data": {"v": 1}, "delay_s": 30}]},
                      "fast": {"results": [{"data": {"v": 1}, "delay_s": 30}]}},
            "agent": {"turns": [{"call": {"tool": "slow"}}, {"finish": {"v": 1}}]}}


def test_a_case_tool_timeout_cancels_that_tool_only() -> None:
    res = run_case(EvalCase.from_json(case_with(tool_timeouts={"slow": 0.05})))
    assert res.passed, res.problems
    assert res.observed is StopReason.TIME_BUDGET
    assert res.stop_kind == "ToolTimeout"
    # a timeout for another tool leaves the slow one to the case's own deadline
    res = run_case(EvalCase.from_json(case_with(tool_timeouts={"fast": 0.05}, max_seconds=0.2)))
    assert res.observed is StopReason.TIME_BUDGET
    assert res.stop_kind == "MaxTime"


@pytest.mark.parametrize(("value", "message"), [
    ([], "$.budget.tool_timeouts: must be an object"),
    ({"slow": 0}, "$.budget.tool_timeouts.slow: must be > 0"),
    ({"slow": "1"}, "$.budget.tool_timeouts.slow: must be a number"),
    ({"slow": True}, "$.budget.tool_timeouts.slow: must be a number"),
])
def test_a_malformed_case_tool_timeout_is_named(value: Any, message: str) -> None:
    with pytest.raises(EvalCaseError) as e:
        EvalCase.from_json(case_with(tool_timeouts=value), "c.json")
    assert str(e.value) == f"c.json: {message}"


def test_a_wall_clock_budget_longer_than_an_eval_may_run_is_capped_and_said() -> None:
    case = capture_case(record(Budget(max_steps=5, max_tokens=100, max_seconds=900)))
    assert case["budget"]["max_seconds"] == MAX_EVAL_SECONDS == 300
    assert case["description"] == (
        "captured from run r-9, which stopped goal_met: the finish passed every check"
        " (its wall-clock budget of 900 s is capped at 300 s for the replay)")
    assert run_case(EvalCase.from_json(case)).passed
    at_cap = capture_case(record(Budget(max_steps=5, max_tokens=100, max_seconds=300)))
    assert at_cap["budget"]["max_seconds"] == 300
    assert "capped" not in at_cap["description"]


def edit(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    return edited(RECORD, path, value)


RECORD = record()


@pytest.mark.parametrize(("rec", "message"), [
    (edit(("stop",), 3), "$.stop: must be an object"),
    (edit(("stop", "reason"), KeyError), "$.stop: missing field 'reason'"),
    (edit(("stop", "reason"), "bogus"), "$.stop.reason: must be one of " + ", ".join(StopReason)),
    (edit(("stop", "reason"), ["goal_met"]),
     "$.stop.reason: must be one of " + ", ".join(StopReason)),
    (edit(("trace", 0, "kind"), KeyError), "$.trace[0]: missing field 'kind'"),
    (edit(("trace", 0, "step"), KeyError), "$.trace[0]: missing field 'step'"),
    (edit(("trace", 0, "step"), 0), "$.trace[0].step: must be >= 1"),
    (edit(("trace", 0, "kind"), "teleport"),
     "$.trace[0].kind: must be one of tool, deduplicated, finish_rejected, invalid"),
    (edit(("trace", 0, "tool"), KeyError), "$.trace[0]: missing field 'tool'"),
    (edit(("trace", 0, "args"), KeyError), "$.trace[0]: missing field 'args'"),
    (edit(("trace", 0, "tool"), 7), "$.trace[0].tool: must be a string"),
    (edit(("trace", 0, "args"), [1]), "$.trace[0].args: must be an object"),
    (edit(("trace", 1, "idempotency_key"), 5), "$.trace[1].idempotency_key: must be a string"),
    (edit(("usage", 0), 5), "$.usage[0]: must be a [tokens, cost_usd] pair"),
    (edit(("usage", 0), [1, 2, 3]), "$.usage[0]: must be a [tokens, cost_usd] pair"),
    (edit(("usage", 1), [-1, 0]), "$.usage[1][0]: must be >= 0"),
    (edit(("usage", 1), [1, "0"]), "$.usage[1][1]: must be a number"),
    (edit(("controls",), {}), "$.controls: missing field 'budget'"),
    (edit(("controls", "no_progress"), KeyError), "$.controls: missing field 'no_progress'"),
    (edit(("controls", "tool_failure"), KeyError), "$.controls: missing field 'tool_failure'"),
    (edit(("controls", "budget"), []), "$.controls.budget: must be an object"),
    (edit(("controls", "budget", "tool_limits"), 8),
     "$.controls.budget.tool_limits: must be an object"),
    (edit(("controls", "guard"), {"x": 1}), "$.controls.guard: missing field 'allow'"),
    (edit(("controls", "guard", "side_effects"), []),
     "$.controls.guard.side_effects: must be an object"),
    (edit(("controls", "guard", "side_effects", "refund"), None),
     "$.controls.guard.side_effects.refund: must be an object"),
    (edit(("controls", "rules"), {"a": 1}), "$.controls.rules: must be a list"),
    (edit(("controls", "rules"), [{"name": "r"}]), "$.controls.rules[0]: missing field 'predicates'"),
    (edit(("controls", "rules"), ["r"]), "$.controls.rules[0]: must be an object"),
])
def test_a_malformed_record_is_named_by_its_path(rec: dict[str, Any], message: str) -> None:
    with pytest.raises(EvalCaseError) as e:
        capture_case(rec, source="run.json")
    assert str(e.value) == f"run.json: {message}"


def test_an_invalid_reply_whose_note_is_not_text_is_named() -> None:
    ctl = RunController(Budget(max_steps=3, max_tokens=100), validate=lambda s, o: True)
    rec = ctl.run("x", script(Turn(Invalid("bad json"), tokens=1), Turn(Finish(1), tokens=1)),
                  tools({}), run_id="r-3").to_json()
    assert capture_case(rec)["agent"]["turns"][0] == {"invalid": "bad json", "tokens": 1}
    rec["trace"][0]["note"] = {"text": "bad json"}
    with pytest.raises(EvalCaseError) as e:
        capture_case(rec, source="run.json")
    assert str(e.value) == "run.json: $.trace[0].note: must be a string"


def test_the_cli_names_a_malformed_record_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "run.json"
    bad.write_bytes(canonical_bytes(edit(("trace", 0, "tool"), KeyError)))
    out = tmp_path / "case.json"
    res = CliRunner().invoke(cli, ["evals", "capture", str(bad), "-o", str(out)])
    assert res.exit_code == 2
    assert res.output == f"ect: {bad}: $.trace[0]: missing field 'tool'\n"
    assert not out.exists()


# `capture_case` exactly: the case it writes for a run that used every kind of step (tool,
# deduplicated side effect, invalid reply, rejected finish, accepted finish), and the error it
# gives for each malformed record. Pinned field by field so a mutant that drops or alters one
# field of the replay is caught (tests/control/mutation.py).
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


def test_run_record_keeps_what_a_replay_and_the_rule_need() -> None:
    record = failing_run().to_json()
    assert record["format"] == "ect.run-record/1" and "output" not in record
    assert record["task"] == "What is v?" and record["steps"] == 4  # the third same finish
    assert record["usage"] == [[7, 0.0], [5, 0.0], [5, 0.0], [5, 0.0]]
    assert record["data"] == {"v": 1}
    assert record["controls"]["budget"]["max_steps"] == 5
    assert record["last_action"] == {"finish": {"v": 2}}
    canonical_bytes(record)  # plain JSON


def test_capture_replays_the_run_and_can_expect_the_right_stop(tmp_path: Path) -> None:
    record = failing_run().to_json()
    case_obj = capture_case(record)
    case = EvalCase.from_json(case_obj, "captured")
    replay = run_case(case)
    assert replay.passed, replay.failure_line()
    assert replay.observed is StopReason.NO_PROGRESS
    # pinned to what should have happened, the captured case fails until the agent is fixed
    wanted = EvalCase.from_json(capture_case(record, expect="goal_met"), "captured")
    assert not run_case(wanted).passed
    with pytest.raises(EvalCaseError, match=r"ect\.run-record/1"):
        capture_case({"format": "other"})


def test_cli_capture_writes_a_case_that_ect_evals_run_accepts(tmp_path: Path) -> None:
    rec = tmp_path / "run.json"
    rec.write_bytes(canonical_bytes(failing_run().to_json()))
    out = tmp_path / "cases" / "case.json"
    out.parent.mkdir()
    res = CliRunner().invoke(cli, ["evals", "capture", str(rec), "-o", str(out), "--id", "v_case"])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["id"] == "v_case"
    res = CliRunner().invoke(cli, ["evals", "run", str(out.parent)])
    assert res.exit_code == 0 and res.output.strip().endswith("1 passed, 0 failed")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "x"}')
    res = CliRunner().invoke(cli, ["evals", "capture", str(bad)])
    assert res.exit_code == 2 and res.output.startswith("ect: ") and "\n" == res.output[-1]


def test_capture_replays_a_tool_timeout() -> None:
    async def hangs(call: ToolCall) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError

    ctl = RunController(Budget(max_steps=4, max_tokens=100, tool_timeout_s=0.05),
                        validate=lambda s, o: True)
    res = anyio.run(ctl.arun, "t", script(ToolCall("fast"), ToolCall("slow")),
                    lambda call: hangs(call) if call.tool == "slow" else ToolResult.success({"v": 1}))
    assert res.stop.kind == "ToolTimeout"
    replay = _replayed(res.to_json())
    assert replay.passed and (replay.observed, replay.stop_kind) == ("time_budget", "ToolTimeout")


@pytest.mark.parametrize("slow", ["decide", "tool"])
def test_capture_replays_a_run_whose_time_budget_ran_out(slow: str) -> None:
    release = threading.Event()

    def decide(state: RunState) -> ToolCall:
        if slow == "decide" and state.step == 1:
            release.wait(20)  # the second model call never answers in time
        return ToolCall("t", {"n": state.step})

    def execute(call: ToolCall) -> ToolResult:
        if slow == "tool" and call.args["n"] == 1:
            release.wait(20)
        return ToolResult.success({"n": call.args["n"]})

    ctl = RunController(Budget(max_steps=4, max_tokens=100, max_seconds=0.3),
                        validate=lambda s, o: True)
    res = ctl.run("t", decide, execute)
    release.set()
    assert res.stop.kind == "MaxTime"
    replay = _replayed(res.to_json())
    assert replay.passed and (replay.observed, replay.stop_kind) == ("time_budget", "MaxTime")
