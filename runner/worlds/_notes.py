"""The parent's in-memory record of ``record_note`` side effects (the tool itself is pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.canonical import canonical_bytes

__all__ = ["NoteBook"]


@dataclass
class NoteBook:
    """Notes recorded by ``record_note``, keyed by idempotency key (first write wins).

    ``record`` returns ``"recorded"`` for a new note, ``"duplicate"`` for a replay of the same
    note under the same idempotency key (no second effect), and ``"conflict"`` when the key is
    reused for a different note (also no effect). Postcondition checks read :attr:`notes`.
    """

    by_idempotency_key: dict[str, tuple[str, Any]] = field(default_factory=dict)

    def record(self, args: dict[str, Any]) -> str:
        ikey, key, value = args["idempotency_key"], args["key"], args["value"]
        previous = self.by_idempotency_key.get(ikey)
        if previous is None:
            self.by_idempotency_key[ikey] = (key, value)
            return "recorded"
        if previous[0] == key and canonical_bytes(previous[1]) == canonical_bytes(value):
            return "duplicate"
        return "conflict"

    @property
    def notes(self) -> dict[str, Any]:
        """key -> value of the latest recorded note per key (in recording order)."""
        out: dict[str, Any] = {}
        for key, value in self.by_idempotency_key.values():
            out[key] = value
        return out
