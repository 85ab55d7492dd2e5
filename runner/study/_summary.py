"""What a run reports: :class:`RunSummary` (cells committed, stop reasons, cost, attempts) and the
accounting of provider failures in committed cells (:class:`FailureCounts`, :class:`CallFailure`)
(docs/study.md, docs/providers.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from runner.canonical import JsonRecord, JsonValue, key
from runner.providers import failure_class
from runner.study._journal import Accounting
from runner.study._records import CellRecord
from runner.study._settings import ThrottleSettings

__all__ = ["CallFailure", "FailureCounts", "RunSummary", "record_failures"]


@dataclass
class FailureCounts:
    """Provider failures counted by class, kind, role and pipeline, and the cells carrying one."""

    by_class: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    by_role: Counter[str] = field(default_factory=Counter)
    by_pipeline: Counter[str] = field(default_factory=Counter)
    cells: list[str] = field(default_factory=list)
    transport_cells: list[str] = field(default_factory=list)

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

    @property
    def total(self) -> int:
        return sum(self.by_class.values())

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "total": self.total,
            "by_class": {c: self.by_class.get(c, 0) for c in ("transport", "model_output")},
            "by_kind": dict(sorted(self.by_kind.items())),
            "by_role": dict(sorted(self.by_role.items())),
            "by_pipeline": dict(sorted(self.by_pipeline.items())),
            "cells": len(self.cells),
            "cells_with_transport_failure": [c for c in sorted(self.transport_cells)],
        }


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


@dataclass
class RunSummary:
    store: str
    total: int
    committed: int = 0
    committed_now: int = 0
    stop_reasons: Counter[str] = field(default_factory=Counter)
    cost_usd: float = 0.0
    provider_attempts: int = 0
    tool_calls: int = 0
    wall_s: float = 0.0
    halted: str | None = None
    orphan_attempts: int = 0
    provider: str = "simulated"
    executor: str = "local"
    tool_retries: int = 0
    failures: FailureCounts = field(default_factory=FailureCounts)
    throttle: ThrottleSettings | None = None  # None: not set (a summary made outside a run)
    on_transport_failure: str = "halt"
    # transport failures that halted a cell this session (the cell was not committed)
    transport_halts: list[str] = field(default_factory=list)
    # responses journaled for cells that never committed, replayed instead of paid again
    replayed_attempts: int = 0
    # the cells this session aims at: ``total``, or the end row under --limit
    target: int | None = None
    # the command that continues this run as printed (store and credential; see resume_command)
    resume_command: str | None = None
    # every attempt the store's journal holds, failures, halts and billed cost (None: not read)
    accounting: Accounting | None = None

    @property
    def goal(self) -> int:
        """The committed count this session runs to (``--limit`` counted): what an ETA uses."""
        return self.total if self.target is None else min(self.target, self.total)

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "store": self.store,
            "total": self.total,
            "committed": self.committed,
            "committed_now": self.committed_now,
            "stop_reasons": dict(sorted(self.stop_reasons.items())),
            "cost_usd": round(self.cost_usd, 9),
            "provider": self.provider,
            "provider_attempts": self.provider_attempts,
            "tool_calls": self.tool_calls,
            "wall_s": round(self.wall_s, 3),
            "halted": self.halted,
            "orphan_attempts": self.orphan_attempts,
            "executor": self.executor,
            "tool_retries": self.tool_retries,
            "provider_failures": self.failures.to_json(),
            "on_transport_failure": self.on_transport_failure,
            "transport_halts": list(self.transport_halts),
            "replayed_attempts": self.replayed_attempts,
            "throttle": self.throttle.to_json() if self.throttle is not None else {},
            "resume_command": self.resume_command,
            "accounting": self.accounting.to_json() if self.accounting is not None else None,
        }
