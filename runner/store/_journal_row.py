"""One attempt of the store's journal as the store returns it (docs/store.md).

The store knows no field of an attempt entry beyond its ``cell_id``: a row carries the begin
and end entries as the JSON objects the caller wrote. ``runner.study`` reads them into its
typed ``JournalEntry`` (a provider attempt as an ``AttemptRecord``, a halt, a tool retry).
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.canonical import JsonObject

__all__ = ["JournalRow"]


@dataclass(frozen=True, slots=True)
class JournalRow:
    """One journaled attempt: its begin seq, its cell, the begin entry and, once it ended, the
    end entry and its seq (``None`` while it has not ended)."""

    seq: int
    cell_id: str
    begin: JsonObject
    end: JsonObject | None = None
    end_seq: int | None = None

    @property
    def ended(self) -> bool:
        return self.end is not None
