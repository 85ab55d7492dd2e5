"""Stop-reason evals: the bundled suite, the interpreter, the case reader, your own agent, and
`ect evals run`; output checks and replayed verdicts pinned exactly."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from runner.canonical import canonical_bytes
from runner.cli import cli
from runner.control import (
    EVAL_FORMAT,
    EvalCase,
    EvalCaseError,
    Finish,
    RunState,
    StopReason,
    ToolCall,
    import_agent,
    load_cases,
    run_case,
    run_evals,
)
from runner.control._types import Directive
from runner.control.evals.agents import follows_directive
from tests.control.helpers_refunds import never_stops

BUNDLED = Path(__file__).resolve().parents[2] / "runner" / "control" / "evals"


def write(path: Path, **overrides: object) -> Path:
    case = {
        "format": EVAL_FORMAT,
        "id": path.stem,
        "task": "What is v?",
        "expect_stop": "goal_met",
        "finish_check": {"require": ["v"]},
        "tools": {"get": {"results": [{"data": {"v": 1}}]}},
        "agent": {"turns": [{"call": {"tool": "get"}}, {"finish": {"v": 1}}]},
    }
    case.update(overrides)
    path.write_bytes(canonical_bytes(case))
    return path


def test_bundled_suite_covers_every_stop_reason_and_the_adversarial_cases() -> None:
    cases = load_cases()
    assert {c.expect_stop for c in cases} == set(StopReason)
    ids = {c.case_id for c in cases}
    for required in ("needs_human_unanswerable", "tool_error_always_fails",
                     "policy_block_scope_widening", "no_progress_repeated_empty_result"):
        assert required in ids
    assert len(cases) == len(list(BUNDLED.glob("*.json")))


def test_bundled_suite_passes_through_the_library() -> None:
    report = run_evals()
    assert report.ok, [r.failure_line() for r in report.results if not r.passed]
    assert report.summary() == f"{len(report.results)} passed, 0 failed"


def test_bundled_suite_passes_through_the_cli() -> None:
    result = CliRunner().invoke(cli, ["evals", "run"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"{len(load_cases())} passed, 0 failed"


@pytest.mark.child_process
def test_ect_script_runs_the_bundled_suite() -> None:
    ect = shutil.which("ect")
    argv = [ect] if ect else [sys.executable, "-c", "from runner.cli import main; main()"]
    proc = subprocess.run([*argv, "evals", "run"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].endswith("passed, 0 failed")


def test_failures_print_observed_and_expected_and_exit_non_zero(tmp_path: Path) -> None:
    write(tmp_path / "a_ok.json")
    write(tmp_path / "b_wrong_reason.json", expect_stop="needs_human")
    write(tmp_path / "c_wrong_output.json", expect_output={"equals": {"v": 2}})
    result = CliRunner().invoke(cli, ["evals", "run", str(tmp_path)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines == [
        "FAIL b_wrong_reason: stopped with goal_met (FinishGate: the finish passed every check), "
        "expected needs_human",
        'FAIL c_wrong_output: output check failed: expected {"v":2}, got {"v":1}',
        "1 passed, 2 failed",
    ]


def test_single_file_and_verbose(tmp_path: Path) -> None:
    path = write(tmp_path / "one.json", expect_output={"subset": {"v": 1}})
    result = CliRunner().invoke(cli, ["evals", "run", "-v", str(path)])
    assert result.exit_code == 0
    assert result.output.splitlines() == ["ok   one: goal_met (FinishGate)", "1 passed, 0 failed"]


@pytest.mark.parametrize(("override", "message"), [
    ({"expect_stop": "done"}, "$.expect_stop: must be one of goal_met"),
    ({"surprise": 1}, "$: unknown field 'surprise'"),
    ({"agent": {"turns": []}}, "$.agent.turns: must not be empty"),
    ({"agent": {"turns": [{"call": {"tool": "get"}, "finish": 1}]}},
     "$.agent.turns[0]: needs exactly one of"),
    ({"budget": {"max_steps": 0, "max_tokens": 5}}, "$.budget.max_steps: must be >= 1"),
    ({"budget": {"max_steps": 3}}, "$.budget: needs max_tokens or max_cost_usd"),
    ({"expect_stop": "step_budget", "expect_output": {"equals": 1}},
     "$.expect_output: only a goal_met case has an output to check"),
    ({"finish_check": {"require": "v"}}, "$.finish_check.require: must be a list"),
    ({"guard": {"allow": []}}, "$.guard: Guard.allow is empty"),
    ({"tools": {"get": {"results": [{"ok": "yes"}]}}}, "$.tools.get.results[0].ok: must be a boolean"),
])
def test_malformed_cases_name_file_and_field(tmp_path: Path, override: dict,
                                             message: str) -> None:
    path = write(tmp_path / "bad.json", **override)
    with pytest.raises(EvalCaseError) as e:
        load_cases(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value)
    result = CliRunner().invoke(cli, ["evals", "run", str(path)])
    assert result.exit_code == 2 and result.output.count("\n") <= 1
    assert "Traceback" not in result.output


def test_missing_path_and_duplicates_and_empty_dir(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["evals", "run", str(tmp_path / "nope")])
    assert result.exit_code == 2
    with pytest.raises(EvalCaseError, match="no eval cases"):
        load_cases(tmp_path)
    write(tmp_path / "x.json", id="same")
    write(tmp_path / "y.json", id="same")
    with pytest.raises(EvalCaseError, match="also used by"):
        load_cases(tmp_path)
    (tmp_path / "z.json").write_text('{"format": "ect.stop-eval/1", "id": 1, "id": 2}')
    with pytest.raises(EvalCaseError, match=r"z\.json"):
        load_cases(tmp_path / "z.json")


def test_interpreter_repeats_the_last_turn_and_last_result() -> None:
    case = EvalCase.from_json({
        "format": EVAL_FORMAT, "id": "loop", "task": "t", "expect_stop": "tool_error",
        "finish_check": {"require": ["v"]},
        "tools": {"get": {"results": [{"data": {"v": 1}}, {"ok": False, "error": "down"}]}},
        "agent": {"turns": [{"call": {"tool": "get", "args": {"i": 1}}},
                            {"call": {"tool": "get", "args": {"i": 2}}},
                            {"call": {"tool": "get", "args": {"i": 3}}}]},
    })
    out = run_case(case)
    assert out.passed and out.stop_detail == "get failed 2 times in a row: down"
    # running the same case again gives the same result (fresh run state every time)
    assert run_case(case) == out


def test_help_texts() -> None:
    for argv in (["evals", "--help"], ["evals", "run", "--help"]):
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == 0
    assert "N passed, M failed" in CliRunner().invoke(cli, ["evals", "run", "--help"]).output
    assert "evals" in CliRunner().invoke(cli, ["--help"]).output


def _hung_case(**budget: object) -> dict[str, object]:
    return {
        "format": EVAL_FORMAT, "id": "hung", "task": "t", "expect_stop": "goal_met",
        "budget": {"max_steps": 5, "max_tokens": 1000, **budget},
        "finish_check": {"require": ["v"]},
        "tools": {"get": {"results": [{"data": {"v": 1}, "delay_s": 600}]}},
        "agent": {"turns": [{"call": {"tool": "get", "args": {}}}, {"finish": {"v": 1}}]},
    }


def test_a_case_without_max_seconds_still_has_a_wall_clock_ceiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # issue 20: an eval case ran without end when nothing bounded its time; now every case runs
    # under MAX_EVAL_SECONDS unless it names a smaller max_seconds (patched small here)
    import runner.control._evalcase as evals

    monkeypatch.setattr(evals, "MAX_EVAL_SECONDS", 0.3)
    out = run_case(EvalCase.from_json(_hung_case()))
    assert not out.passed and str(out.observed) == "time_budget"


def test_a_case_max_seconds_above_the_ceiling_is_refused() -> None:
    from runner.control._evalcase import MAX_EVAL_SECONDS

    with pytest.raises(EvalCaseError, match=r"max_seconds.*must be <="):
        EvalCase.from_json(_hung_case(max_seconds=MAX_EVAL_SECONDS + 1))


# The eval harness pinned exactly: output-check messages, replayed verdicts, the crash detail,
# importing a user's agent, missing paths and duplicate ids, the bundled directive-following
# agent.
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


def test_evals_run_the_users_own_agent(tmp_path: Path) -> None:
    report = run_evals(decide=never_stops)
    assert not report.ok  # this agent cannot meet the goal_met cases
    res = CliRunner().invoke(cli, ["evals", "run", "--agent",
                                   "tests.control.helpers_refunds:never_stops"])
    assert res.exit_code == 1 and "FAIL goal_met_lookup_then_finish" in res.output
    res = CliRunner().invoke(cli, ["evals", "run", "--agent", "tests.nowhere:agent"])
    assert res.exit_code == 2 and res.output.startswith("ect: cannot import agent")


def test_eval_reports_steps_tools_and_side_effects(tmp_path: Path) -> None:
    case = {
        "format": "ect.stop-eval/1", "id": "strict", "task": "t", "expect_stop": "goal_met",
        "expect_steps": 3, "expect_tools": ["get", "get"], "expect_not_run": ["get"],
        "finish_check": {"require": ["v"]},
        "tools": {"get": {"results": [{"data": {"v": 1}}]}},
        "agent": {"turns": [{"call": {"tool": "get"}}, {"finish": {"v": 1}}]},
    }
    result = run_case(EvalCase.from_json(case))
    assert not result.passed
    assert result.problems == ("took 2 steps, expected 3", "ran tools ['get'], expected ['get', 'get']",
                               "executed get, which must not run")


def test_bundled_suite_covers_time_budget_and_internal_error() -> None:
    kinds = {c.expect_stop for c in load_cases()}
    assert {StopReason.TIME_BUDGET, StopReason.INTERNAL_ERROR} <= kinds


def test_the_case_reader_checks_the_types_of_amount_arg_and_idempotency_arg() -> None:
    for field, value in (("amount_arg", 5), ("idempotency_arg", ["k"])):
        case = {"format": "ect.stop-eval/1", "id": "c", "task": "t", "expect_stop": "goal_met",
                "guard": {"allow": ["pay"], "side_effects": {"pay": {field: value}}},
                "agent": {"turns": [{"finish": 1}]}, "finish_check": {"verdicts": [True]}}
        with pytest.raises(EvalCaseError) as e:
            EvalCase.from_json(case, "c.json")
        assert str(e.value) == f"c.json: $.guard.side_effects.pay.{field}: must be a string"
