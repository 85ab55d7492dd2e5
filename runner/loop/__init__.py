"""The closed-loop trajectory engine and its independent outcome scoring (docs/protocol.md)."""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from runner._lazy import lazy_exports as _lazy_exports

if _TYPE_CHECKING:
    from runner.loop._config import StopRules, TrajectoryConfig, stop_rules_in_force
    from runner.loop._decision import DecisionRecord, DecisionVerdict, PipelineJudgement
    from runner.loop._outcome import OUTCOME_FIELDS, Outcome, ScoredRow, read_stop_reason
    from runner.loop._scoring import score
    from runner.loop._trajectory import ToolCallFn, Trajectory, run_trajectory, trace_bytes

# Each name is imported from its module on first use (runner/_lazy.py), so a command loads only
# the modules it uses; the same names as above, by module:
_EXPORTS: dict[str, tuple[str, ...]] = {
    "_config": ("StopRules", "TrajectoryConfig", "stop_rules_in_force"),
    "_decision": ("DecisionRecord", "DecisionVerdict", "PipelineJudgement"),
    "_outcome": ("OUTCOME_FIELDS", "Outcome", "ScoredRow", "read_stop_reason"),
    "_scoring": ("score",),
    "_trajectory": (
        "ToolCallFn", "Trajectory", "run_trajectory", "trace_bytes",
    ),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [
    "OUTCOME_FIELDS",
    "DecisionRecord",
    "DecisionVerdict",
    "Outcome",
    "PipelineJudgement",
    "ScoredRow",
    "StopRules",
    "ToolCallFn",
    "Trajectory",
    "TrajectoryConfig",
    "read_stop_reason",
    "run_trajectory",
    "score",
    "stop_rules_in_force",
    "trace_bytes",
]
