"""The closed-loop trajectory engine and its independent outcome scoring (docs/protocol.md)."""

from runner.loop._outcome import OUTCOME_FIELDS, Outcome, ScoredRow, read_stop_reason
from runner.loop._scoring import score
from runner.loop._trajectory import (
    DecisionRecord,
    DecisionVerdict,
    PipelineJudgement,
    StopRules,
    ToolCallFn,
    Trajectory,
    TrajectoryConfig,
    run_trajectory,
    stop_rules_in_force,
    trace_bytes,
)

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
