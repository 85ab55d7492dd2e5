"""The cell outcome: what :func:`runner.loop.score` judges a finished trajectory to be.

One frozen type, written by the study into each cell record (``result.outcome``) and read back
by the analysis. :meth:`Outcome.from_json` is strict: every field present, nothing extra, each
of its JSON type (``bool`` is not a number here), errors naming the path. ``stop_reason`` is
held as a :class:`runner.control.StopReason` and written as its value; a reason this runner does
not know is refused on read. The field names are part of the record format (digest domain
``ect/record/v1``): renaming one is a format change.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Protocol

from runner.canonical import JsonRecord, JsonValue, RecordFormatError, read_str, spec
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


def read_stop_reason(value: object, path: str) -> StopReason:
    """A stop reason as a record writes it (its value); an unknown one is refused, naming the
    path."""
    text = read_str(value, path)
    try:
        return StopReason(text)
    except ValueError:
        raise RecordFormatError(path, f"unknown stop reason {text[:60]!r}") from None


@dataclass(frozen=True, slots=True)
class Outcome(JsonRecord):
    """One cell's scored outcome (definitions in :mod:`runner.loop._scoring`); its JSON holds
    the fields in declaration order."""

    _path = "outcome"

    row: int
    cell_id: str
    task_id: str
    world_id: str
    family: str
    checkpoint: str
    fault: str | None
    policy: str
    seed: int
    stop_reason: StopReason = field(metadata=spec(read=read_stop_reason))
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

    def without_timing(self) -> dict[str, JsonValue]:
        """The outcome without its wall-clock field (what a cell's result digest covers)."""
        out = self.to_json()
        del out["latency_s"]
        return out


OUTCOME_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Outcome))
"""Every field of a cell outcome, in record order."""
