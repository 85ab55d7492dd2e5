"""Errors of the viewer (all under :class:`runner.errors.EctError`)."""

from __future__ import annotations

from runner.errors import EctError, ExitCategory

__all__ = ["NotFound", "ViewError"]


class ViewError(EctError):
    """The viewer cannot read what it was pointed at (not a store, not a static study, ...)."""

    exit_category = ExitCategory.USAGE


class NotFound(ViewError):
    """A cell, record or blob the page asked for is not in the store."""

    exit_category = ExitCategory.USAGE
