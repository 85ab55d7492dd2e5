"""The closed-loop trajectory engine and its independent outcome scoring (DESIGN §8)."""

from runner.loop._outcome import OUTCOME_FIELDS, CellIdentity, Outcome
from runner.loop._scoring import score
from runner.loop._trajectory import (
    DecisionRecord,
    ToolCallFn,
    Trajectory,
    TrajectoryConfig,
    run_trajectory,
    trace_bytes,
)

__all__ = [
    "OUTCOME_FIELDS",
    "CellIdentity",
    "DecisionRecord",
    "Outcome",
    "ToolCallFn",
    "Trajectory",
    "TrajectoryConfig",
    "run_trajectory",
    "score",
    "trace_bytes",
]
