"""The closed-loop results as records: Table 4, the gates H2-H4, the intervals, strata, scope,
inputs, reason codes, provider failures and accounting, the plan against the actual run, the
verifier audit, and :class:`ClosedLoopResults` that holds them (``results.json``'s
``closed_loop``; docs/analysis.md). :mod:`runner.analysis._closed` computes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.analysis._common import (
    BootstrapInfo,
    ProviderInfo,
    RateInterval,
)
from runner.analysis._honesty import Choice, SimulatorBlock
from runner.analysis._paper import PaperVsRun
from runner.analysis._record import FLAT, OMIT, Record
from runner.errors import AnalysisError
from runner.study import Accounting, FailureCounts, StratumReasons

__all__ = [
    "AUDIT_NOTE",
    "CLOSED_FORMAT",
    "STRUCTURAL_NOTE",
    "AuditRow",
    "ClosedInputs",
    "ClosedIntervals",
    "ClosedLoopResults",
    "H2Gate",
    "H3Gate",
    "H4Gate",
    "HaltRow",
    "MeanInterval",
    "PairedComparison",
    "PlanRow",
    "PlanVsActual",
    "ProviderAccounting",
    "ProviderFailures",
    "ReasonCodeRow",
    "Scope",
    "SecondaryEstimate",
    "StoreInputs",
    "Stratum",
    "Structural",
    "Table4Counts",
    "Table4Row",
    "Unseen",
    "VerifierAudit",
]


CLOSED_FORMAT = "ect.analysis.closed_loop/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Table4Counts(Record):
    """Table 4's four counts for one policy, each with its denominator (a sweep point keeps
    only these)."""

    U: int
    U_den: int
    S: int
    S_den: int
    FC: int
    FC_den: int
    R: int
    R_den: int

    def count(self, measure: str) -> tuple[int, int]:
        """``(count, denominator)`` of ``measure`` (U, S, FC or R)."""
        return {"U": (self.U, self.U_den), "S": (self.S, self.S_den),
                "FC": (self.FC, self.FC_den), "R": (self.R, self.R_den)}[measure]

    def counts(self) -> Table4Counts:
        """The four counts alone."""
        return Table4Counts(U=self.U, U_den=self.U_den, S=self.S, S_den=self.S_den, FC=self.FC,
                            FC_den=self.FC_den, R=self.R, R_den=self.R_den)


@dataclass(frozen=True, slots=True, kw_only=True)
class Table4Row(Table4Counts):
    """Table 4's columns for one policy (counts with their denominators, per-trajectory means)."""

    recoverable_stuck: int
    unsupported_claims: int
    postcondition_ok: int
    mean_turns: float
    mean_calls: float
    mean_tokens: float
    mean_latency_s: float
    mean_cost_usd: float
    stop_reasons: dict[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedComparison(Record):
    """What an ECT-minus-controller paired difference compares, and how its interval was drawn
    (written into the gate's or estimate's own object)."""

    treatment: str
    comparator: str
    n_treatment: int
    n_comparator: int
    sum_treatment: float
    sum_comparator: float
    mean_treatment: float
    mean_comparator: float
    bootstrap: BootstrapInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class H2Gate(Record):
    """H2: the difference in percentage points, its interval and the gate's outcome."""

    paired: PairedComparison = field(metadata=FLAT)
    diff_pp: float
    ci_pp: tuple[float, float]
    passed: bool
    rule: str
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class H3Gate(H2Gate):
    """H3: as H2, with the noninferiority margin."""

    margin_pp: float


@dataclass(frozen=True, slots=True, kw_only=True)
class H4Gate(Record):
    """H4: ECT's recovery events on incomplete checkpoints."""

    eligible: int
    recoveries: int
    recovered_then_supported: int
    passed: bool
    rule: str
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SecondaryEstimate(Record):
    """A secondary paired difference in the measure's own units."""

    paired: PairedComparison = field(metadata=FLAT)
    label: str
    diff_raw: float
    ci_raw: tuple[float, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class MeanInterval(Record):
    """A per-trajectory mean with its task-cluster interval."""

    mean: float
    ci: tuple[float, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedIntervals(Record):
    """One policy's rates (absent when the policy has no row of the rate's checkpoint) and means."""

    U: RateInterval | None = field(default=None, metadata=OMIT)
    S: RateInterval | None = field(default=None, metadata=OMIT)
    FC: RateInterval | None = field(default=None, metadata=OMIT)
    R: RateInterval | None = field(default=None, metadata=OMIT)
    turns: MeanInterval
    tool_calls: MeanInterval
    tokens: MeanInterval
    cost_usd: MeanInterval

    def rate(self, measure: str) -> RateInterval:
        found = {"U": self.U, "S": self.S, "FC": self.FC, "R": self.R}[measure]
        if found is None:
            raise AnalysisError(f"no {measure} interval for this policy")
        return found

    def mean_of(self, key: str) -> MeanInterval:
        return {"turns": self.turns, "tool_calls": self.tool_calls, "tokens": self.tokens,
                "cost_usd": self.cost_usd}[key]


@dataclass(frozen=True, slots=True, kw_only=True)
class Stratum(Record):
    """Table 4's columns per policy over a set of tasks (a fault's, or the trust boundary's)."""

    tasks: tuple[str, ...]
    policies: dict[str, Table4Row]


@dataclass(frozen=True, slots=True, kw_only=True)
class Unseen(Record):
    """The unseen faults U1-U3: pooled over the primary scope, and fault by fault."""

    pooled: dict[str, Table4Row]
    by_fault: dict[str, Stratum]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope(Record):
    """Which rows the primary analysis covers."""

    excluded_trust_boundary_tasks: tuple[str, ...]
    primary_clusters: int
    primary_rows: int
    seeds_per_cell_group: int
    policies: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreInputs(Record):
    """What identifies the store and the schedule a report was made from (no paths, no clock)."""

    store_id: str
    store_head_seq: int
    store_head_chain: str
    store_records: int
    schedule_sha256: str
    schedule_rows: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedInputs(Record):
    """results.json's ``"inputs"``: the store's identity (when analysed from one) and the
    analysis's own settings."""

    store_id: str | None = field(default=None, metadata=OMIT)
    store_head_seq: int | None = field(default=None, metadata=OMIT)
    store_head_chain: str | None = field(default=None, metadata=OMIT)
    store_records: int | None = field(default=None, metadata=OMIT)
    schedule_sha256: str | None = field(default=None, metadata=OMIT)
    schedule_rows: int | None = field(default=None, metadata=OMIT)
    rows: int
    seed: int
    replicates: int
    confidence: float
    interval: str
    cluster: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasonCodeRow(Record):
    """The reason codes one pipeline gave on one fault stratum (``runner.study.StratumReasons``)."""

    stratum: str
    pipeline: str
    cells: int
    codes: dict[str, int]

    @classmethod
    def of(cls, entry: StratumReasons) -> ReasonCodeRow:
        return cls(stratum=entry.stratum, pipeline=entry.pipeline, cells=entry.cells,
                   codes=dict(entry.codes))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderFailures(Record):
    """Provider failures of the committed cells (``runner.study.FailureCounts``)."""

    total: int
    by_class: dict[str, int]
    by_kind: dict[str, int]
    by_role: dict[str, int]
    by_pipeline: dict[str, int]
    cells: int
    cells_with_transport_failure: tuple[str, ...]

    @classmethod
    def of(cls, counts: FailureCounts) -> ProviderFailures:
        return cls(
            total=counts.total,
            by_class={c: counts.by_class.get(c, 0) for c in ("transport", "model_output")},
            by_kind=dict(sorted(counts.by_kind.items())),
            by_role=dict(sorted(counts.by_role.items())),
            by_pipeline=dict(sorted(counts.by_pipeline.items())),
            cells=len(counts.cells),
            cells_with_transport_failure=tuple(sorted(counts.transport_cells)),
        )

    def counted_by(self) -> tuple[tuple[str, dict[str, int]], ...]:
        """Each breakdown, by its name (class, kind, role, pipeline)."""
        return (("class", self.by_class), ("kind", self.by_kind), ("role", self.by_role),
                ("pipeline", self.by_pipeline))


@dataclass(frozen=True, slots=True)
class HaltRow(Record):
    """One halt of the run (the store's journal): when, at which cell, what kind, why."""

    utc: str
    cell_id: str
    row: int | None
    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class ProviderAccounting(Record):
    """Every provider attempt the store's journal holds (``runner.study.Accounting``): retried
    and failed ones and those of cells that never committed included, the halts, and the billed
    cost of the attempts that reached the model (``estimated_usd`` of it estimated: replies
    without usage), beside the committed cells' cost (``committed_usd``)."""

    attempts: int
    retries: int
    failed_attempts: int
    failures_by_class: dict[str, int]
    failures_by_kind: dict[str, int]
    billed_attempts: int
    billed_usd: float
    estimated_attempts: int
    estimated_usd: float
    unbilled_attempts: int
    in_flight: int
    orphan_attempts: int
    orphan_usd: float
    committed_usd: float
    halts: tuple[HaltRow, ...]

    @classmethod
    def of(cls, acc: Accounting, committed_usd: float) -> ProviderAccounting:
        return cls(
            attempts=acc.attempts, retries=acc.retries, failed_attempts=acc.failed_attempts,
            failures_by_class={c: acc.by_class.get(c, 0) for c in ("transport", "model_output")},
            failures_by_kind=dict(sorted(acc.by_kind.items())),
            billed_attempts=acc.billed_attempts, billed_usd=round(acc.billed_usd, 9),
            estimated_attempts=acc.estimated_attempts,
            estimated_usd=round(acc.estimated_usd, 9),
            unbilled_attempts=acc.unbilled_attempts, in_flight=acc.in_flight,
            orphan_attempts=acc.orphan_attempts, orphan_usd=round(acc.orphan_usd, 9),
            committed_usd=round(committed_usd, 9),
            halts=tuple(HaltRow(h.utc, h.cell_id, h.row, h.kind, h.reason) for h in acc.halts),
        )


@dataclass(frozen=True, slots=True)
class PlanRow(Record):
    """One figure of ``ect plan`` (its range) beside what the run actually did."""

    figure: str
    min: float
    expected: float
    max: float
    actual: float


@dataclass(frozen=True, slots=True)
class PlanVsActual(Record):
    """``ect report --plan``: the plan given (``ect plan --json``; SIMULATED unless a pilot
    rescaled it) beside the run's actual requests, tokens and cost."""

    cells: int
    pilot: bool
    rows: tuple[PlanRow, ...]


STRUCTURAL_NOTE = (
    "ECT's U and FC are structural, not measured: a completion is supported when the "
    "project's verifier says complete and the values equal gold, and ECT completes only when "
    "that same verifier says complete, so ECT's FC is 0 in every run and its U counts only "
    "completions the verifier accepted with a value off gold (the verifier audit below). The "
    "measured parts of ECT's row are S, R, turns, calls, tokens and cost."
)


AUDIT_NOTE = (
    "Not circular (the verifier never sees gold): per pipeline, the primary-scope runs that "
    "stopped goal_met, how many of their final certificates the project's verifier accepts "
    "against the final ledger, and how many of those carry a value that differs from gold. "
    "0 is expected on the simulated provider (every tool answers from the world the gold "
    "comes from); a live run could differ."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Structural(Record):
    """Which Table 4 figures of which policy hold by construction, and why."""

    policy: str
    measures: tuple[str, ...]
    note: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRow(Record):
    """The verifier audit of one policy (primary scope)."""

    completions: int
    verifier_accepts: int
    off_gold: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifierAudit(Record):
    """results.json's ``"verifier_audit"``: the note and one row per policy."""

    note: str
    policies: dict[str, AuditRow]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedLoopResults(Record):
    """Every closed-loop figure: ``to_json`` is results.json (``ect report``)."""

    format: str = CLOSED_FORMAT
    provider: ProviderInfo
    provider_line: str
    inputs: ClosedInputs
    scope: Scope
    table4: dict[str, Table4Row]
    structural: Structural
    verifier_audit: VerifierAudit | None
    h2: H2Gate
    h3: H3Gate
    h4: H4Gate
    gates_passed: bool
    simulator: SimulatorBlock | None
    choices: tuple[Choice, ...]
    reason_codes: tuple[ReasonCodeRow, ...] | None
    provider_failures: ProviderFailures | None
    # every journaled attempt, failure, halt and the billed cost: present for a real provider's
    # store, or a simulated one with a retry, a failed attempt or a halt (else left out)
    provider_accounting: ProviderAccounting | None = field(default=None, metadata=OMIT)
    # `ect report --plan`: the plan beside the actual figures (left out without one)
    plan_vs_actual: PlanVsActual | None = field(default=None, metadata=OMIT)
    secondary: dict[str, SecondaryEstimate]
    intervals: dict[str, ClosedIntervals]
    unseen: Unseen
    trust_boundary: Stratum
    per_fault: dict[str, Stratum]
    paper_vs_run: PaperVsRun

    def __post_init__(self) -> None:
        if self.format != CLOSED_FORMAT:
            raise AnalysisError(f"closed-loop results: format {self.format!r}, "
                                f"not {CLOSED_FORMAT!r}")

    def gates(self) -> tuple[tuple[str, bool, str], ...]:
        """``(name, passed, outcome in words)`` of H2, H3 and H4."""
        return (("H2", self.h2.passed, self.h2.outcome), ("H3", self.h3.passed, self.h3.outcome),
                ("H4", self.h4.passed, self.h4.outcome))
