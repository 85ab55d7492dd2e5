"""Errors raised by the stop controls. All derive from :class:`runner.errors.ControlError`::

    ControlError
    ├── RunRefused                 a run was refused before it started (one-line message)
    │   ├── KillSwitchEngaged      the disable flag (file or environment variable) is set
    │   ├── DailyRunCeiling        today's (UTC) run ceiling is reached
    │   └── DailySpendCeiling      today's (UTC) spend ceiling is reached
    ├── LedgerError                the kill-switch ledger file is unreadable or malformed
    ├── NoFinalOutput              asked a non-``goal_met`` result for its final output
    ├── CalibrationMismatch        a calibration applied to a model version it was not measured on
    └── NoSafeThreshold            no threshold met the target error rate

Malformed eval cases raise :class:`EvalCaseError`, a :class:`runner.errors.FormatError`.
"""

from __future__ import annotations

from runner.errors import ControlError, ExitCategory, FormatError

__all__ = [
    "CalibrationMismatch",
    "DailyRunCeiling",
    "DailySpendCeiling",
    "EvalCaseError",
    "KillSwitchEngaged",
    "LedgerError",
    "NoFinalOutput",
    "NoSafeThreshold",
    "RunRefused",
    "UnmeteredUsage",
]


class RunRefused(ControlError):
    """A kill switch refused to start a run."""

    exit_category = ExitCategory.REFUSED


class KillSwitchEngaged(RunRefused):
    """The disable flag is set."""

    exit_category = ExitCategory.REFUSED


class DailyRunCeiling(RunRefused):
    """The number of runs today (UTC) reached the ceiling."""

    exit_category = ExitCategory.REFUSED


class DailySpendCeiling(RunRefused):
    """Spend today (UTC) reached the ceiling."""

    exit_category = ExitCategory.REFUSED


class LedgerError(ControlError):
    """The kill-switch ledger cannot be read or written; runs are refused (fail closed)."""

    exit_category = ExitCategory.RUNTIME


class NoFinalOutput(ControlError):
    """Only a ``goal_met`` run has a final output; budget and other stops never do."""

    exit_category = ExitCategory.RUNTIME


class CalibrationMismatch(ControlError):
    """A calibration measured on one model version was applied to another."""

    exit_category = ExitCategory.USAGE


class NoSafeThreshold(ControlError):
    """No candidate threshold keeps the error rate over firings within the target."""

    exit_category = ExitCategory.NEGATIVE


class EvalCaseError(FormatError):
    """A stop-reason eval case file is malformed (the message names the file and field)."""

    exit_category = ExitCategory.USAGE


class UnmeteredUsage(UserWarning):
    """A run has a token or cost ceiling but ``decide`` reported no usage (plain actions, not
    ``Turn``): the ceiling cannot bound what it cannot see."""
