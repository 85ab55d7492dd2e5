"""`ect evals capture` on records a user may hand it: every malformed part of a run record is
named by its path in one line (never a traceback), and what a replay needs is kept: per-tool
timeouts, a wall-clock budget longer than an eval may run (capped, and said so), and the
idempotency key of every side-effect call, not only the last one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    RunController,
    SideEffectRule,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
    capture_case,
    run_case,
)
from runner.control._evalcase import MAX_EVAL_SECONDS
from tests.control.conftest import edited, merge, script, tools


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
