"""Stop-reason evals: the bundled suite, the interpreter, and `ect evals run`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.canonical import canonical_bytes
from runner.cli import cli
from runner.control import (
    EVAL_FORMAT,
    EvalCase,
    EvalCaseError,
    StopReason,
    load_cases,
    run_case,
    run_evals,
)

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
