"""Errors of :mod:`runner.policies` (the :class:`runner.errors.StudyError` family).

    StudyError
    └── PolicyError                 a policy was asked for something it does not do
        ├── UnknownPolicy           an arm / pipeline / ablation name that does not exist
        └── CriticCoreInvariantBroken
                                    the critic core would call its model on a static snapshot
"""

from __future__ import annotations

from runner.errors import ExitCategory, StudyError

__all__ = ["CriticCoreInvariantBroken", "PolicyError", "UnknownPolicy"]


class PolicyError(StudyError):
    """A termination policy could not decide as the frozen protocol requires."""

    exit_category = ExitCategory.RUNTIME


class UnknownPolicy(PolicyError):
    """An arm, pipeline or ablation name is not one of the frozen names."""

    exit_category = ExitCategory.USAGE


class CriticCoreInvariantBroken(PolicyError):
    """The critic core left its deterministic fast paths on a static snapshot.

    The static study's information regime requires every static snapshot to be resolved by the
    fast paths; a model call from the critic core there would silently change the comparison, so
    it blocks the run instead.
    """

    exit_category = ExitCategory.RUNTIME
