"""The eval harness pinned exactly: output-check messages, replayed verdicts, the crash detail,
importing a user's agent, missing paths and duplicate ids, the bundled directive-following
agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.control import (
    EvalCase,
    EvalCaseError,
    Finish,
    RunState,
    ToolCall,
    import_agent,
    load_cases,
    run_case,
)
from runner.control._types import Directive
from runner.control.evals.agents import follows_directive


def case(**kw: Any) -> dict[str, Any]:
    return {"format": "ect.stop-eval/1", "id": "c", "task": "t", "expect_stop": "goal_met",
            "finish_check": {"verdicts": [True]},
            "tools": {"get": {"results": [{"data": {"v": 1, "w": 2}}]}},
            "agent": {"turns": [{"call": {"tool": "get"}}, {"finish": {"v": 1, "w": 3}}]}, **kw}


def run(**kw: Any) -> Any:
    return run_case(EvalCase.from_json(case(**kw)))


@pytest.mark.parametrize(("expect", "finish", "ok", "detail"), [
    ({"equals": {"v": 1, "w": 3}}, {"v": 1, "w": 3}, True, ""),
    ({"equals": {"v": 1}}, {"v": 1, "w": 3}, False, 'expected {"v":1}, got {"v":1,"w":3}'),
    ({"subset": {"v": 1}}, {"v": 1, "w": 3}, True, ""),
    ({"subset": {"v": 1, "w": 2, "x": None}}, {"v": 1, "w": 3}, False,
     'expected {"w":2,"x":null}, got {"w":3,"x":null}'),
    ({"subset": {"v": 1}}, "text", False, 'expected an object containing {"v":1}, got "text"'),
])
def test_output_checks_say_exactly_what_differs(expect: dict[str, Any], finish: Any, ok: bool,
                                                detail: str) -> None:
    res = run(expect_output=expect, agent={"turns": [{"finish": finish}]})
    assert (res.output_ok, res.output_detail, res.passed) == (ok, detail, ok)
    if not ok:
        assert res.failure_line() == f"FAIL c: output check failed: {detail}"


def test_recorded_verdicts_replay_in_order_and_the_last_repeats() -> None:
    # a finish rejected twice, accepted the third time (outputs differ: no repeat detector)
    turns = [{"finish": 1}, {"finish": 2}, {"finish": 3}]
    res = run(finish_check={"verdicts": [False, False, True]}, expect_steps=3,
              agent={"turns": turns})
    assert res.to_json() == {
        "id": "c", "source": "<case>", "expected": "goal_met", "observed": "goal_met",
        "stop_kind": "FinishGate", "stop_detail": "the finish passed every check",
        "output_ok": None, "problems": [], "passed": True}
    # one recorded verdict: every later finish gets it too
    res = run(finish_check={"verdicts": [False]}, expect_stop="step_budget",
              budget={"max_steps": 3, "max_tokens": 100}, agent={"turns": turns})
    assert res.passed, res.failure_line()
    assert res.stop_detail == "used all 3 steps without a validated result"


def test_a_failed_case_lists_every_problem_on_one_line() -> None:
    res = run(expect_steps=3, expect_tools=["get", "get"], expect_not_run=["get"],
              agent={"turns": [{"call": {"tool": "get"}}, {"finish": {"v": 1}}]})
    assert res.failure_line() == ("FAIL c: took 2 steps, expected 3; ran tools ['get'], expected "
                                  "['get', 'get']; executed get, which must not run")


def test_a_crashing_agent_is_reported_with_its_message() -> None:
    res = run(expect_stop="internal_error", agent={"turns": [{"raise": "boom"}]})
    assert res.passed and res.stop_detail == "decide raised RuntimeError: boom"


@pytest.mark.parametrize(("budget", "message"), [
    ({"max_steps": 3, "max_tokens": 9, "max_seconds": 0}, "$.budget.max_seconds: must be > 0"),
    ({"max_steps": 3, "max_tokens": 9, "tool_timeout_s": 0}, "$.budget.tool_timeout_s: must be > 0"),
    ({"max_steps": 3, "max_tokens": 9, "max_seconds": 300.5}, "$.budget.max_seconds: must be <= 300"),
])
def test_time_limits_must_be_positive_and_bounded(budget: dict[str, Any], message: str) -> None:
    with pytest.raises(EvalCaseError) as e:
        EvalCase.from_json(case(budget=budget))
    assert str(e.value) == f"<case>: {message}"
    ok = EvalCase.from_json(case(budget={"max_steps": 3, "max_tokens": 9, "max_seconds": 300}))
    assert ok.controller.budget.max_seconds == 300.0


def test_importing_an_agent() -> None:
    assert import_agent("runner.control.evals.agents:follows_directive") is follows_directive
    assert import_agent("runner.control:EvalCase.from_json") == EvalCase.from_json
    with pytest.raises(EvalCaseError) as e:
        import_agent("runner.control.evals.agents:follows_directive:x")
    assert str(e.value) == ("cannot import agent 'runner.control.evals.agents:follows_directive:x': "
                            "module 'runner.control.evals.agents' has no attribute "
                            "'follows_directive:x'")
    with pytest.raises(EvalCaseError) as e:
        import_agent("runner.control._evalcase:EVAL_FORMAT")
    assert str(e.value) == "agent 'runner.control._evalcase:EVAL_FORMAT' is not callable"


def test_missing_path_and_duplicate_ids_are_named(tmp_path: Path) -> None:
    nope = tmp_path / "nope"
    with pytest.raises(FileNotFoundError) as e:
        load_cases(nope)
    assert str(e.value) == f"[Errno 2] No such file or directory: '{nope}'"
    assert (e.value.errno, e.value.filename) == (2, str(nope))
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_bytes(
            b'{"format": "ect.stop-eval/1", "id": "same", "task": "t", "expect_stop": "goal_met",'
            b' "finish_check": {"verdicts": [true]}, "agent": {"turns": [{"finish": 1}]}}')
    with pytest.raises(EvalCaseError) as d:
        load_cases(tmp_path)
    assert str(d.value) == f"{tmp_path / 'b.json'}: $.id: 'same' also used by {tmp_path / 'a.json'}"


def state(data: dict[str, Any], missing: tuple[str, ...] | None = None) -> RunState:
    s = RunState("r", "t")
    s.data.update(data)
    if missing is not None:
        s.directive = Directive(missing=missing)
    return s


def test_the_bundled_directive_following_agent() -> None:
    assert follows_directive(state({})) == ToolCall("get_shipment", {"ticket": 4471})
    assert follows_directive(state({"shipment_id": "S1"})) == Finish({"shipment_id": "S1"})
    assert follows_directive(state({"shipment_id": "S1"}, ("eligible",))) == ToolCall(
        "check_eligibility", {"shipment": "S1"})
    assert follows_directive(state({"shipment_id": "S1", "eligible": True}, ("eligible",))) == Finish(
        {"shipment_id": "S1", "eligible": True})


def test_a_minimal_case_gets_the_documented_defaults() -> None:
    from runner.control import Budget, Guard, SideEffectRule, ToolLimits, ToolResult

    c = EvalCase.from_json({
        "format": "ect.stop-eval/1", "id": "c", "task": "t", "expect_stop": "goal_met",
        "finish_check": {"verdicts": [True]}, "guard": {"allow": ["pay"], "side_effects": {"pay": {}}},
        "tools": {"get": {"results": [{"ok": False}, {"delay_s": 0.5}]}},
        "agent": {"turns": [{"finish": 1}]}})
    assert c.controller.budget == Budget(max_steps=12, max_tokens=60_000, max_seconds=300.0,
                                         tool_limits=ToolLimits(default=8, side_effect_default=1))
    guard = c.controller.guard
    assert isinstance(guard, Guard) and guard.allow == frozenset({"pay"})
    assert guard.side_effects == {"pay": SideEffectRule(idempotency_arg="idempotency_key")}
    np_ = c.controller.no_progress
    assert (np_.repeats, np_.empty_results) == (3, 3)  # type: ignore[attr-defined]
    assert c.controller.tool_failure.consecutive == 2  # type: ignore[union-attr]
    assert c.tool_results == {"get": (ToolResult(ok=False, error="failed"), ToolResult())}
    assert c.delays == {"get": (0.0, 0.5)}
    assert (c.description, c.expect_steps, c.expect_tools, c.expect_not_run, c.expect_kind) == (
        "", None, None, (), None)
