"""What a run reports: :class:`RunSummary` (cells committed, stop reasons, cost, attempts) and the
accounting of provider failures in committed cells (:class:`FailureCounts`, :class:`CallFailure`)
(docs/study.md, docs/providers.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from runner.canonical import JsonObject, JsonRecord, derived, key, rounded, sorted_map, spec
from runner.providers import failure_class
from runner.study._journal import Accounting, class_counts
from runner.study._records import CellRecord
from runner.study._settings import ThrottleSettings

__all__ = ["CallFailure", "FailureCounts", "RunSummary", "record_failures"]


@dataclass
class FailureCounts(JsonRecord):
    """Provider failures counted by class, kind, role and pipeline, and the cells carrying one
    (written as their number; the cells with a transport failure by id, sorted)."""

    total: int = derived(lambda f: sum(f.by_class.values()))
    by_class: Counter[str] = field(default_factory=Counter, metadata=spec(write=class_counts))
    by_kind: Counter[str] = field(default_factory=Counter, metadata=spec(write=sorted_map))
    by_role: Counter[str] = field(default_factory=Counter, metadata=spec(write=sorted_map))
    by_pipeline: Counter[str] = field(default_factory=Counter, metadata=spec(write=sorted_map))
    cells: list[str] = field(default_factory=list, metadata=spec(write=len))
    transport_cells: list[str] = field(default_factory=list, metadata=spec(
        key="cells_with_transport_failure", write=sorted))

    def add(self, record: CellRecord) -> None:
        found = record_failures(record)
        for f in found:
            self.by_class[f.failure_class] += 1
            self.by_kind[f.kind] += 1
            self.by_role[f.role] += 1
            self.by_pipeline[record.schedule_row.policy] += 1
        if found:
            self.cells.append(record.cell_id)
            if any(f.failure_class == "transport" for f in found):
                self.transport_cells.append(record.cell_id)


@dataclass(frozen=True, slots=True)
class CallFailure(JsonRecord):
    """One failed provider call of a committed cell, as the accounting counts it: its kind
    (``"sdk_error"`` for one this runner does not know), class, role (``"unknown"`` in a store
    written before calls recorded it) and HTTP status."""

    kind: str
    failure_class: str = field(metadata=key("class"))
    role: str
    status: int | None


def record_failures(record: CellRecord) -> list[CallFailure]:
    """Every failed provider call of a committed cell, in call order."""
    return [CallFailure(f.known_kind, failure_class(f.known_kind), f.role or "unknown", f.status)
            for f in (call.failure for call in record.audit.calls) if f is not None]


def _throttle(throttle: ThrottleSettings | None) -> JsonObject:
    """The writer of a summary's throttle: ``{}`` when not set."""
    return {} if throttle is None else throttle.to_json()


@dataclass
class RunSummary(JsonRecord):
    store: str
    total: int
    committed: int = 0
    committed_now: int = 0
    stop_reasons: Counter[str] = field(default_factory=Counter, metadata=spec(write=sorted_map))
    cost_usd: float = field(default=0.0, metadata=spec(write=rounded(9)))
    provider: str = "simulated"
    provider_attempts: int = 0
    tool_calls: int = 0
    wall_s: float = field(default=0.0, metadata=spec(write=rounded(3)))
    halted: str | None = None
    orphan_attempts: int = 0
    executor: str = "local"
    tool_retries: int = 0
    failures: FailureCounts = field(default_factory=FailureCounts,
                                    metadata=spec(key="provider_failures"))
    on_transport_failure: str = "halt"
    # transport failures that halted a cell this session (the cell was not committed)
    transport_halts: list[str] = field(default_factory=list)
    # responses journaled for cells that never committed, replayed instead of paid again
    replayed_attempts: int = 0
    # None: not set (a summary made outside a run; written {})
    throttle: ThrottleSettings | None = field(default=None, metadata=spec(write=_throttle))
    # the cells this session aims at: ``total``, or the end row under --limit (not written)
    target: int | None = field(default=None, metadata=spec(skip=True))
    # the command that continues this run as printed (store and credential; see resume_command)
    resume_command: str | None = None
    # every attempt the store's journal holds, failures, halts and billed cost (None: not read)
    accounting: Accounting | None = None

    @property
    def goal(self) -> int:
        """The committed count this session runs to (``--limit`` counted): what an ETA uses."""
        return self.total if self.target is None else min(self.target, self.total)
