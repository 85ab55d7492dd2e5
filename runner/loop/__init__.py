"""The closed-loop trajectory engine and its independent outcome scoring (DESIGN §8)."""

from runner.loop._scoring import OUTCOME_FIELDS, score
from runner.loop._trajectory import (
    Decision,
    ToolExecutor,
    Trajectory,
    TrajectoryConfig,
    run_trajectory,
    trace_bytes,
)

__all__ = [
    "OUTCOME_FIELDS",
    "Decision",
    "ToolExecutor",
    "Trajectory",
    "TrajectoryConfig",
    "run_trajectory",
    "score",
    "trace_bytes",
]
