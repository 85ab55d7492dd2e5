"""The public surface of runner.control is exactly the curated __all__."""

from __future__ import annotations

import runner.control as control

EXPECTED = {
    "BUNDLED_EVALS", "CALIBRATION_FORMAT", "EVAL_FORMAT", "KILL_SWITCH_LEDGER_FORMAT",
    "Action", "Admission", "AllOf", "AnyOf", "Budget", "Calibration", "CalibrationMismatch",
    "CaseResult", "Checkpoint", "Condition", "CostAlert", "DailyRunCeiling", "DailySpendCap",
    "DailySpendCeiling", "Decide", "Directive", "Escalate", "EscalationRequested", "EvalCase",
    "EvalCaseError", "EvalReport", "Execute", "ExternalStop", "Finish", "FinishGate", "Fold",
    "Guard", "GuardRule", "HandoffPackage", "Invalid", "KillSwitch", "KillSwitchEngaged",
    "LabelledRun", "LedgerError", "MaxCost", "MaxSteps", "MaxTokens", "NoFinalOutput",
    "NoProgressDetector", "NoSafeThreshold", "Phase", "Predicate", "PredicateReport",
    "RepeatedAction", "RepeatedEmptyResult", "RuleOutcome", "RuleReport", "RunController",
    "RunCost", "RunRefused", "RunResult", "RunState", "SideEffectRule", "StepRecord", "Stop",
    "StopCondition", "StopReason", "StoppingRule", "ThresholdRow", "ToolCall", "ToolCallLimit",
    "ToolFailure", "ToolLimits", "ToolResult", "Turn", "Validate", "Verdict", "VerdictKind",
    "action_fingerprint", "build_handoff", "load_cases", "render_reports", "report_rule",
    "run_case", "run_evals",
    # v2: deadlines, typed internal errors, leases, shared idempotency, facts, evals of agents
    "ContractViolation", "Fact", "IdempotencyLedger", "Interrupted", "KillSwitchStop", "Lease",
    "MaxTime", "Remaining", "ToolTimeout", "UnmeteredUsage", "UserCodeError",
    "RUN_RECORD_FORMAT", "capture_case", "import_agent", "StalledState",
}


def test_exported_set_is_curated() -> None:
    assert set(control.__all__) == EXPECTED
    assert len(control.__all__) == len(EXPECTED)  # no duplicates
    # that each name is defined, and nothing public leaks past __all__, is
    # tests/test_exported_members.py's check for every package


def test_stop_reason_values_are_the_eight_of_the_design_plus_time_and_internal_error() -> None:
    assert [str(r) for r in control.StopReason] == [
        "goal_met", "step_budget", "token_budget", "tool_limit", "no_progress", "needs_human",
        "tool_error", "policy_block", "time_budget", "internal_error",
    ]
    budget = {r for r in control.StopReason if r.is_budget}
    assert budget == {control.StopReason.STEP_BUDGET, control.StopReason.TOKEN_BUDGET,
                      control.StopReason.TOOL_LIMIT, control.StopReason.TIME_BUDGET}


def test_errors_hang_off_the_control_family() -> None:
    from runner.errors import ControlError, FormatError

    for cls in (control.KillSwitchEngaged, control.DailyRunCeiling, control.DailySpendCeiling,
                control.LedgerError, control.NoFinalOutput, control.CalibrationMismatch,
                control.NoSafeThreshold):
        assert issubclass(cls, ControlError)
    assert issubclass(control.EvalCaseError, FormatError)
    assert issubclass(control.KillSwitchEngaged, control.RunRefused)


def test_control_imports_nothing_above_it() -> None:
    import ast
    from pathlib import Path

    root = Path(control.__file__).parent
    banned = ("runner.policies", "runner.loop", "runner.study", "runner.analysis", "runner.cli")
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(banned), (path.name, node.module)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith(banned), (path.name, alias.name)
