"""Errors of the viewer (all under :class:`runner.errors.EctError`)."""

from __future__ import annotations

from runner.errors import EctError, ExitCategory
from runner.store import damage_label

__all__ = ["NotFound", "RecordDamaged", "ViewError"]


class ViewError(EctError):
    """The viewer cannot read what it was pointed at (not a store, not a static study, ...)."""

    exit_category = ExitCategory.USAGE


class NotFound(ViewError):
    """A cell, record or blob the page asked for is not in the store."""

    exit_category = ExitCategory.USAGE


class RecordDamaged(ViewError):
    """A record of the store is damaged: SQLite cannot read it (``corrupt``), its body no
    longer hashes to its leaf (``tamper``), or a record the checkpoint commits to is missing
    (``truncation``). Named as ``store verify`` names it: ``DAMAGED (kind) at seq N``."""

    exit_category = ExitCategory.REFUSED

    def __init__(self, message: str, *, kind: str, seq: int) -> None:
        self.kind = kind
        self.seq = seq
        self.detail = message
        self.label = damage_label(kind, seq)
        super().__init__(f"{self.label}: {message}")
