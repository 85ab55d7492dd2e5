"""Stop controls for any agent loop (docs/control.md).

Every run ends for a reason chosen in advance: exactly one typed :class:`StopReason`, carried by
a :class:`RunResult` whose output exists only for ``goal_met``. Budgets bound the run; stopping
rules decide when work may stop being necessary; guards refuse or escalate side-effect actions;
a no-progress detector ends loops; escalation hands over a :class:`HandoffPackage`; a
:class:`KillSwitch` sits outside the loop; stop-reason evals test how runs end.

The closed-loop engine (``runner.loop``) drives its loop through :class:`RunController`'s
step-by-step methods; ``RunController.run`` / ``arun`` wrap any other agent loop.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from runner._lazy import lazy_exports as _lazy_exports

if _TYPE_CHECKING:
    from runner.control._budget import Budget, ToolLimits
    from runner.control._calibration import (
        CALIBRATION_FORMAT,
        Calibration,
        LabelledRun,
        RuleOutcome,
        RuleReport,
        RunCost,
        ThresholdRow,
        render_reports,
        report_rule,
    )
    from runner.control._capture import capture_case
    from runner.control._conditions import (
        AllOf,
        AnyOf,
        DailySpendCap,
        EscalationRequested,
        ExternalStop,
        FinishGate,
        MaxCost,
        MaxSteps,
        MaxTime,
        MaxTokens,
        NoProgressDetector,
        RepeatedAction,
        RepeatedEmptyResult,
        StalledState,
        StopCondition,
        ToolCallLimit,
        ToolFailure,
        ToolTimeout,
        action_fingerprint,
    )
    from runner.control._controller import RunController
    from runner.control._errors import (
        CalibrationMismatch,
        DailyRunCeiling,
        DailySpendCeiling,
        EvalCaseError,
        KillSwitchEngaged,
        LedgerError,
        NoFinalOutput,
        NoSafeThreshold,
        RunRefused,
        UnmeteredUsage,
    )
    from runner.control._evalcase import BUNDLED_EVALS, EVAL_FORMAT, EvalCase, load_cases
    from runner.control._evals import CaseResult, EvalReport, import_agent, run_case, run_evals
    from runner.control._guards import Guard, GuardRule, SideEffectRule
    from runner.control._handoff import HandoffPackage, build_handoff
    from runner.control._killswitch import (
        KILL_SWITCH_LEDGER_FORMAT,
        Admission,
        CostAlert,
        KillSwitch,
    )
    from runner.control._ledger import IdempotencyLedger, Lease
    from runner.control._result import RUN_RECORD_FORMAT, RunResult
    from runner.control._rules import Predicate, StoppingRule
    from runner.control._types import (
        Action,
        Checkpoint,
        Condition,
        Directive,
        Escalate,
        Fact,
        Finish,
        Invalid,
        Phase,
        PredicateReport,
        Remaining,
        RunState,
        StepRecord,
        Stop,
        StopReason,
        ToolCall,
        ToolResult,
        Turn,
    )
    from runner.control._verdicts import (
        ContractViolation,
        Decide,
        Execute,
        Fold,
        Interrupted,
        KillSwitchStop,
        UserCodeError,
        Validate,
        Verdict,
        VerdictKind,
    )

# Each name is imported from its module on first use (runner/_lazy.py), so a command loads only
# the modules it uses; the same names as above, by module:
_EXPORTS: dict[str, tuple[str, ...]] = {
    "_budget": ("Budget", "ToolLimits"),
    "_calibration": (
        "CALIBRATION_FORMAT", "Calibration", "LabelledRun", "RuleOutcome", "RuleReport", "RunCost",
        "ThresholdRow", "render_reports", "report_rule",
    ),
    "_capture": ("capture_case",),
    "_conditions": (
        "AllOf", "AnyOf", "DailySpendCap", "EscalationRequested", "ExternalStop", "FinishGate",
        "MaxCost", "MaxSteps", "MaxTime", "MaxTokens", "NoProgressDetector", "RepeatedAction",
        "RepeatedEmptyResult", "StalledState", "StopCondition", "ToolCallLimit", "ToolFailure",
        "ToolTimeout", "action_fingerprint",
    ),
    "_controller": ("RunController",),
    "_errors": (
        "CalibrationMismatch", "DailyRunCeiling", "DailySpendCeiling", "EvalCaseError",
        "KillSwitchEngaged", "LedgerError", "NoFinalOutput", "NoSafeThreshold", "RunRefused",
        "UnmeteredUsage",
    ),
    "_evalcase": ("BUNDLED_EVALS", "EVAL_FORMAT", "EvalCase", "load_cases"),
    "_evals": ("CaseResult", "EvalReport", "import_agent", "run_case", "run_evals"),
    "_guards": ("Guard", "GuardRule", "SideEffectRule"),
    "_handoff": ("HandoffPackage", "build_handoff"),
    "_killswitch": ("KILL_SWITCH_LEDGER_FORMAT", "Admission", "CostAlert", "KillSwitch"),
    "_ledger": ("IdempotencyLedger", "Lease"),
    "_result": ("RUN_RECORD_FORMAT", "RunResult"),
    "_rules": ("Predicate", "StoppingRule"),
    "_types": (
        "Action", "Checkpoint", "Condition", "Directive", "Escalate", "Fact", "Finish", "Invalid",
        "Phase", "PredicateReport", "Remaining", "RunState", "StepRecord", "Stop", "StopReason",
        "ToolCall", "ToolResult", "Turn",
    ),
    "_verdicts": (
        "ContractViolation", "Decide", "Execute", "Fold", "Interrupted", "KillSwitchStop",
        "UserCodeError", "Validate", "Verdict", "VerdictKind",
    ),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [
    "BUNDLED_EVALS",
    "CALIBRATION_FORMAT",
    "EVAL_FORMAT",
    "KILL_SWITCH_LEDGER_FORMAT",
    "RUN_RECORD_FORMAT",
    "Action",
    "Admission",
    "AllOf",
    "AnyOf",
    "Budget",
    "Calibration",
    "CalibrationMismatch",
    "CaseResult",
    "Checkpoint",
    "Condition",
    "ContractViolation",
    "CostAlert",
    "DailyRunCeiling",
    "DailySpendCap",
    "DailySpendCeiling",
    "Decide",
    "Directive",
    "Escalate",
    "EscalationRequested",
    "EvalCase",
    "EvalCaseError",
    "EvalReport",
    "Execute",
    "ExternalStop",
    "Fact",
    "Finish",
    "FinishGate",
    "Fold",
    "Guard",
    "GuardRule",
    "HandoffPackage",
    "IdempotencyLedger",
    "Interrupted",
    "Invalid",
    "KillSwitch",
    "KillSwitchEngaged",
    "KillSwitchStop",
    "LabelledRun",
    "Lease",
    "LedgerError",
    "MaxCost",
    "MaxSteps",
    "MaxTime",
    "MaxTokens",
    "NoFinalOutput",
    "NoProgressDetector",
    "NoSafeThreshold",
    "Phase",
    "Predicate",
    "PredicateReport",
    "Remaining",
    "RepeatedAction",
    "RepeatedEmptyResult",
    "RuleOutcome",
    "RuleReport",
    "RunController",
    "RunCost",
    "RunRefused",
    "RunResult",
    "RunState",
    "SideEffectRule",
    "StalledState",
    "StepRecord",
    "Stop",
    "StopCondition",
    "StopReason",
    "StoppingRule",
    "ThresholdRow",
    "ToolCall",
    "ToolCallLimit",
    "ToolFailure",
    "ToolLimits",
    "ToolResult",
    "ToolTimeout",
    "Turn",
    "UnmeteredUsage",
    "UserCodeError",
    "Validate",
    "Verdict",
    "VerdictKind",
    "action_fingerprint",
    "build_handoff",
    "capture_case",
    "import_agent",
    "load_cases",
    "render_reports",
    "report_rule",
    "run_case",
    "run_evals",
]
