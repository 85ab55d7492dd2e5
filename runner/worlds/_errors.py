"""Errors of :mod:`runner.worlds` (all in the :class:`runner.errors.WorldError` family)."""

from __future__ import annotations

from typing import Any

from runner.errors import ExitCategory, WorldError

__all__ = ["ExportRefused", "OracleDisagreement", "UnknownTask", "UnknownWorld"]


class UnknownWorld(WorldError):
    """A world id that is not one of the study's worlds."""

    exit_category = ExitCategory.USAGE


class UnknownTask(WorldError):
    """A task id that is not in the static or closed-loop task set."""

    exit_category = ExitCategory.USAGE


class OracleDisagreement(WorldError):
    """The SQL and pure-Python oracles computed different gold answers: the task is refused."""

    exit_category = ExitCategory.RUNTIME

    def __init__(self, task_id: str, sql_value: Any, python_value: Any) -> None:
        self.task_id = task_id
        self.sql_value = sql_value
        self.python_value = python_value
        super().__init__(
            f"oracles disagree on task {task_id}: sql={sql_value!r} python={python_value!r}"
        )


class ExportRefused(WorldError):
    """``export_all`` was pointed at a path that exists and is not an empty directory."""

    exit_category = ExitCategory.USAGE
