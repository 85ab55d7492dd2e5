"""The cell outcome: what :func:`runner.loop.score` judges a finished trajectory to be.

One frozen type, written by the study into each cell record (``result.outcome``) and read back
by the analysis. :meth:`Outcome.from_json` is strict: every field present, nothing extra, each
of its JSON type (``bool`` is not a number here), errors naming the path. ``stop_reason`` is
held as a :class:`runner.control.StopReason` and written as its value; a reason this runner does
not know is refused on read. The field names are part of the record format (digest domain
``ect/record/v1``): renaming one is a format change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Protocol

from runner.canonical import (
    JsonValue,
    RecordFormatError,
    read_bool,
    read_int,
    read_number,
    read_object,
    read_opt_str,
    read_str,
)
from runner.control import StopReason

__all__ = ["OUTCOME_FIELDS", "Outcome", "ScoredRow", "read_stop_reason"]


class ScoredRow(Protocol):
    """What scoring needs of a schedule row: its number, cell id and seed."""

    @property
    def row(self) -> int: ...
    @property
    def cell_id(self) -> str: ...
    @property
    def seed(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """One cell's scored outcome (definitions in :mod:`runner.loop._scoring`)."""

    row: int
    cell_id: str
    task_id: str
    world_id: str
    family: str
    checkpoint: str
    fault: str | None
    policy: str
    seed: int
    stop_reason: StopReason
    final_decision: str
    premature_unsupported: bool
    supported_completion: bool
    clean_false_continuation: bool
    recoverable_stuck: bool
    successful_recovery: bool
    recovered_then_supported: bool
    unsupported_claims: int
    turns: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    latency_s: int | float
    cost_usd: int | float
    postcondition_ok: bool

    def to_json(self) -> dict[str, JsonValue]:
        """The outcome object, fields in declaration order."""
        out: dict[str, JsonValue] = {name: getattr(self, name) for name in OUTCOME_FIELDS}
        out["stop_reason"] = self.stop_reason.value
        return out

    def without_timing(self) -> dict[str, JsonValue]:
        """The outcome without its wall-clock field (what a cell's result digest covers)."""
        out = self.to_json()
        del out["latency_s"]
        return out

    @classmethod
    def from_json(cls, obj: object, path: str = "outcome") -> Outcome:
        o = read_object(obj, path, OUTCOME_FIELDS)
        values: dict[str, object] = {}
        for name in OUTCOME_FIELDS:
            values[name] = _READERS[name](o[name], f"{path}.{name}")
        return cls(**values)  # type: ignore[arg-type]


def read_stop_reason(value: object, path: str) -> StopReason:
    """A stop reason as a record writes it (its value); an unknown one is refused, naming the
    path."""
    text = read_str(value, path)
    try:
        return StopReason(text)
    except ValueError:
        raise RecordFormatError(path, f"unknown stop reason {text[:60]!r}") from None


OUTCOME_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Outcome))
"""Every field of a cell outcome, in record order."""

_INTS = ("row", "seed", "unsupported_claims", "turns", "tool_calls", "input_tokens",
         "output_tokens")
_BOOLS = ("premature_unsupported", "supported_completion", "clean_false_continuation",
          "recoverable_stuck", "successful_recovery", "recovered_then_supported",
          "postcondition_ok")
_READERS: dict[str, Callable[[object, str], object]] = {
    **{name: read_str for name in OUTCOME_FIELDS},
    **{name: read_int for name in _INTS},
    **{name: read_bool for name in _BOOLS},
    "fault": read_opt_str,
    "stop_reason": read_stop_reason,
    "latency_s": read_number,
    "cost_usd": read_number,
}
