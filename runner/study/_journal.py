"""The attempt journal read as typed entries (docs/store.md, docs/providers.md).

The store journals, before anything is sent, every provider attempt of every cell (committed
or not), every tool call re-run on another node and every halt of a run; it knows no field of
an entry beyond its ``cell_id``. :func:`read_journal` reads each entry back as a
:class:`JournalEntry` whose provider attempt is an :class:`runner.providers.AttemptRecord`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runner.canonical import JsonObject, JsonValue
from runner.errors import FormatError
from runner.providers import AttemptRecord

if TYPE_CHECKING:
    from runner.store import Store

__all__ = ["HaltEntry", "JournalEntry", "halt_entry", "read_journal"]


@dataclass(frozen=True, slots=True)
class HaltEntry:
    """A run that halted: when (UTC), at which cell (the first one not committed), why, and the
    kind of halt (``transport``: a transport failure survived its retry; ``stop``: a STOP file,
    a ceiling, an interrupt or a lost cluster)."""

    utc: str
    cell_id: str
    row: int | None
    kind: str
    reason: str

    def to_json(self) -> dict[str, JsonValue]:
        return {"utc": self.utc, "cell_id": self.cell_id, "row": self.row, "kind": self.kind,
                "reason": self.reason}

    @classmethod
    def from_json(cls, obj: object, path: str) -> HaltEntry:
        if not isinstance(obj, dict) or set(obj) != {"utc", "cell_id", "row", "kind", "reason"}:
            raise FormatError(f"{path}: not a halt entry")
        utc, cell_id, row, kind, reason = (obj["utc"], obj["cell_id"], obj["row"], obj["kind"],
                                           obj["reason"])
        if not (isinstance(utc, str) and isinstance(cell_id, str) and isinstance(kind, str)
                and isinstance(reason, str)
                and (row is None or (isinstance(row, int) and not isinstance(row, bool)))):
            raise FormatError(f"{path}: a halt entry's fields are mistyped")
        return cls(utc, cell_id, row, kind, reason)


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journaled event: a provider attempt (``begun`` set; ``ended`` None while it was in
    flight when the run stopped), a tool call re-run on another node (``tool_retry``) or a
    halt (``halt``)."""

    seq: int
    cell_id: str
    row: int | None
    begun: AttemptRecord | None = None
    ended: AttemptRecord | None = None
    tool_retry: bool = False
    halt: HaltEntry | None = None

    @property
    def is_attempt(self) -> bool:
        return self.begun is not None


def halt_entry(halt: HaltEntry) -> JsonObject:
    """The journal entry a halt is written as (begun and ended at once)."""
    return {"cell_id": halt.cell_id, "row": halt.row, "halt": halt.to_json()}


def _row(obj: dict[str, Any]) -> int | None:
    row = obj.get("row")
    return row if isinstance(row, int) and not isinstance(row, bool) else None


def read_journal(store: Store, *, exclude: Collection[str] = ()) -> list[JournalEntry]:
    """Every journal entry of ``store`` in begin order, except those of the cells in
    ``exclude``.

    Raises:
        RecordFormatError: an entry's attempt is not an attempt record (the path names it).
    """
    done = set(exclude)
    out: list[JournalEntry] = []
    for raw in store.attempts():
        cell_id = str(raw["cell_id"])
        if cell_id in done:
            continue
        begin, end = raw["begin"], raw["end"]
        path = f"attempt {raw['attempt_seq']}"
        if not isinstance(begin, dict):
            raise FormatError(f"{path}: not an object")
        if "halt" in begin:
            out.append(JournalEntry(raw["attempt_seq"], cell_id, _row(begin),
                                    halt=HaltEntry.from_json(begin["halt"], f"{path}.halt")))
        elif "tool_retry" in begin:
            out.append(JournalEntry(raw["attempt_seq"], cell_id, _row(begin), tool_retry=True))
        else:
            ended = (AttemptRecord.from_json(end["attempt"], f"{path}.end.attempt")
                     if isinstance(end, dict) and "attempt" in end else None)
            out.append(JournalEntry(raw["attempt_seq"], cell_id, _row(begin),
                                    begun=AttemptRecord.from_json(begin.get("attempt"),
                                                                  f"{path}.attempt"),
                                    ended=ended))
    return out
