"""The studies' sizes, derived from the tables instead of written out as 576 and 432.

The closed-loop study crosses every checkpoint (each closed-loop task clean and incomplete) with
the frozen spec's seeds and every pipeline of the pipeline table (``runner.policies.PIPELINES``;
``schedules/v2.toml`` lists them all, a test keeps it so). The static grid crosses every static
task with C0 and each static fault of the fault table (``runner.worlds.FAULTS``). A pipeline or
a static fault added to its table moves these numbers, and every test that counts with them.
"""

from __future__ import annotations

from pathlib import Path

from runner.policies import PIPELINES, STATIC_ARMS
from runner.study import load_spec
from runner.worlds import STATIC_CONDITIONS, closed_loop_checkpoints, static_tasks

__all__ = ["STATIC_ARM_COUNT", "STATIC_SNAPSHOTS", "STUDY_CELLS", "STUDY_SEEDS", "study_cells"]

STUDY_SEEDS = load_spec(Path(__file__).resolve().parents[1] / "schedules" / "v2.toml").seeds


def study_cells(pipelines: int | None = None) -> int:
    """Rows of the frozen closed-loop study with ``pipelines`` pipelines (default: the table's)."""
    return len(closed_loop_checkpoints()) * STUDY_SEEDS * (
        len(PIPELINES) if pipelines is None else pipelines)


STUDY_CELLS = study_cells()
"""Rows (cells) of the frozen closed-loop study: 48 checkpoints x 3 seeds x 4 pipelines today."""

STATIC_SNAPSHOTS = len(static_tasks()) * len(STATIC_CONDITIONS)
"""Snapshots of the static grid: 48 static tasks x (C0 + 8 static faults) today."""

STATIC_ARM_COUNT = len(STATIC_ARMS)
"""The static study's arms (seven today)."""
