"""Analysing the static study: Table 2, Table 3 (ablations), H1, and the breakdowns.

``runner.study.run_static`` decides the snapshots; ``analyse_static`` turns its decision rows
(:class:`runner.study.StaticDecisionRow`) into figures, one function per table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from runner.analysis._common import STATIC_POLICIES, ProviderInfo, RateInterval, rnd
from runner.analysis._honesty import (
    CHOICES,
    STATIC_SIMULATOR_NOTE,
    Choice,
    SimulatorBlock,
    flat_parameters,
    static_gate_text,
)
from runner.analysis._paper import PAPER_NOTE, PaperVsRun, static_paper_vs_run
from runner.analysis._record import FLAT, Record, key
from runner.analysis._stats import (
    BootstrapResult,
    cluster_bootstrap_diff,
    cluster_bootstrap_mean,
    macro_f1,
    mcnemar_exact,
)
from runner.errors import AnalysisError
from runner.study import TABLE3_ABLATIONS, CheckAblation, StaticDecisionRow, StaticSpec
from runner.worlds import STATIC_CONDITIONS

__all__ = [
    "STATIC_FORMAT",
    "AblationEffect",
    "ConditionCounts",
    "FamilyCounts",
    "H1Gate",
    "NoMatchedFault",
    "Residual",
    "ResidualCase",
    "SpecSummary",
    "StaticInputs",
    "StaticIntervals",
    "StaticResults",
    "Table2Row",
    "Table3Row",
    "analyse_static",
]

STATIC_FORMAT = "ect.analysis.static/1"

# --------------------------------------------------------------------------- the results


@dataclass(frozen=True, slots=True, kw_only=True)
class Table2Row(Record):
    """Table 2's columns for one arm (counts with their denominators, calls, tokens, cost)."""

    unsafe: int
    unsafe_den: int
    clean_noncomplete: int
    clean_den: int
    stuck: int
    stuck_den: int
    macro_f1: float
    model_calls: int
    attempts: int
    retries: int
    provider_failures: int
    unparseable: int
    input_tokens: int
    output_tokens: int
    cost_usd: float

    def count(self, measure: str) -> tuple[int, int]:
        """``(count, denominator)`` of ``measure`` (U, C or S)."""
        return {"U": (self.unsafe, self.unsafe_den), "C": (self.clean_noncomplete, self.clean_den),
                "S": (self.stuck, self.stuck_den)}[measure]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConditionCounts(Record):
    """One arm's decisions on one condition's held-out snapshots."""

    n: int
    complete: int
    # "continue" is a keyword: the field is named for the decision it counts.
    continue_: int = field(metadata=key("continue"))
    stuck: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyCounts(Record):
    """Unsafe completes among one task family's fault snapshots."""

    unsafe: int
    faults: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ResidualCase(Record):
    """A matched case the ablated ECT still contained, and the codes that contained it."""

    snapshot_id: str
    decision: str
    codes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Residual(Record):
    """Residual containment of the matched fault under an ablation."""

    contained: int
    not_contained: int
    codes: dict[str, int]
    cases: tuple[ResidualCase, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AblationEffect(Record):
    """A matched check's ablation on its fault's held-out snapshots: ``measure`` (``ect``,
    ``ablated``, ``effect``) and both U and S under ablation and under full ECT."""

    den: int
    ect: int
    ablated: int
    effect: int
    ect_U: int
    ablated_U: int
    effect_U: int
    ect_S: int
    ablated_S: int
    effect_S: int
    fires_on_target: int
    ablated_reason_families: dict[str, int]
    residual: Residual


@dataclass(frozen=True, slots=True, kw_only=True)
class NoMatchedFault(Record):
    """An ablation no static fault targets: how many held-out fault decisions it changed."""

    note: str
    changed_decisions: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Table3Row(Record):
    """One single-check ablation (a row of Table 3): a check matched to a fault carries its
    ``ablation`` effect, one without (``target_fault`` null) its ``unmatched`` note; both write
    their keys into the row's own object."""

    check: str
    label: str
    removes: tuple[str, ...]
    measure: str
    matched: str
    paper_target: str
    paper_fault: str
    fires_heldout: int
    fires_by_condition: dict[str, int]
    fires_on_no_snapshot: bool
    target_fault: str | None
    fault_label: str | None
    ablation: AblationEffect | None = field(default=None, metadata=FLAT)
    unmatched: NoMatchedFault | None = field(default=None, metadata=FLAT)

    def __post_init__(self) -> None:
        matched = self.target_fault is not None
        if (self.ablation is not None) != matched or (self.unmatched is not None) == matched:
            raise AnalysisError(
                f"Table 3 row {self.check!r}: a matched check carries its ablation effect, an "
                "unmatched one its note and changed decisions, never both")


@dataclass(frozen=True, slots=True, kw_only=True)
class H1Gate(Record):
    """H1: ECT vs the critic core on the held-out fault snapshots."""

    tasks: int
    worlds: int
    fault_snapshots: int
    ect_unsafe: int
    critic_unsafe: int
    ect_tasks_with_unsafe: int
    critic_tasks_with_unsafe: int
    b_ect: int
    b_critic: int
    mcnemar_p: float
    diff_pp: float
    ci_pp: tuple[float, float]
    world_ci_pp: tuple[float, float]
    replicates: int
    confidence: float
    seed: int
    passed: bool
    rule: str
    depends_on_simulator: bool
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StaticIntervals(Record):
    """One arm's U, C and S rates with task-cluster intervals (for the plots)."""

    U: RateInterval
    C: RateInterval
    S: RateInterval

    def rate(self, measure: str) -> RateInterval:
        return {"U": self.U, "C": self.C, "S": self.S}[measure]


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationSummary(Record):
    """The static spec's generation settings."""

    temperature: float
    seed: int
    max_output_tokens: int
    top_p: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SpecSummary(Record):
    """The static spec as results.json records it."""

    sha256: str
    seed: int
    bootstrap_replicates: int
    confidence: float
    generation: GenerationSummary
    simulated_critic: dict[str, float]
    price_usd_per_mtok: dict[str, float]

    @classmethod
    def of(cls, spec: StaticSpec) -> SpecSummary:
        g = spec.generation
        return cls(
            sha256=spec.sha256, seed=spec.seed, bootstrap_replicates=spec.replicates,
            confidence=spec.confidence,
            generation=GenerationSummary(temperature=g.temperature, seed=g.seed,
                                         max_output_tokens=g.max_output_tokens, top_p=g.top_p),
            simulated_critic=dict(spec.critic), price_usd_per_mtok=dict(spec.price),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StaticInputs(Record):
    """results.json's ``"inputs"``: the spec, the seed and the sizes of what was decided."""

    spec: SpecSummary
    spec_sha256: str
    seed: int
    replicates: int
    snapshots: int
    heldout_snapshots: int
    heldout_tasks: int
    decisions: int
    arms: tuple[str, ...]
    cluster: str
    interval: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StaticResults(Record):
    """Every static figure: ``to_json`` is results.json (``ect static``)."""

    format: str = STATIC_FORMAT
    provider: ProviderInfo
    provider_line: str
    inputs: StaticInputs
    table2: dict[str, Table2Row]
    table2_dev: dict[str, Table2Row]
    table3: tuple[Table3Row, ...]
    h1: H1Gate
    per_fault: dict[str, dict[str, ConditionCounts]]
    per_family: dict[str, dict[str, FamilyCounts]]
    ect_reason_families: dict[str, dict[str, int]]
    intervals: dict[str, StaticIntervals]
    simulator: SimulatorBlock | None
    choices: tuple[Choice, ...]
    paper_vs_run: PaperVsRun

    def __post_init__(self) -> None:
        if self.format != STATIC_FORMAT:
            raise AnalysisError(f"static results: format {self.format!r}, not {STATIC_FORMAT!r}")

    def gates(self) -> tuple[tuple[str, bool, str], ...]:
        """``(name, passed, outcome in words)`` of H1."""
        return (("H1", self.h1.passed, self.h1.outcome),)

    def model_calls(self) -> tuple[int, int]:
        """``(model calls, failed calls)`` over the held-out arms of Table 2."""
        return (sum(v.model_calls for v in self.table2.values()),
                sum(v.provider_failures for v in self.table2.values()))


# -------------------------------------------------------------------------- the analysis


def _table2_row(rows: Sequence[StaticDecisionRow]) -> Table2Row:
    faults = [r for r in rows if r.condition != "C0"]
    clean = [r for r in rows if r.condition == "C0"]
    return Table2Row(
        unsafe=sum(1 for r in faults if r.decision == "complete"),
        unsafe_den=len(faults),
        clean_noncomplete=sum(1 for r in clean if r.decision != "complete"),
        clean_den=len(clean),
        stuck=sum(1 for r in faults if r.decision == "stuck"),
        stuck_den=len(faults),
        macro_f1=rnd(macro_f1([r.gold for r in rows], [r.decision for r in rows])),
        model_calls=sum(r.model_calls for r in rows),
        attempts=sum(r.attempts for r in rows),
        retries=sum(r.retries for r in rows),
        provider_failures=sum(1 for r in rows if r.provider_failure),
        unparseable=sum(1 for r in rows if "critic.unparseable" in r.reasons),
        input_tokens=sum(r.input_tokens for r in rows),
        output_tokens=sum(r.output_tokens for r in rows),
        cost_usd=rnd(sum(r.cost_usd for r in rows)),
    )


def _per_condition(rows: Sequence[StaticDecisionRow]) -> dict[str, ConditionCounts]:
    out: dict[str, ConditionCounts] = {}
    for cond in STATIC_CONDITIONS:
        sel = [r for r in rows if r.condition == cond]
        counts = Counter(r.decision for r in sel)
        out[cond] = ConditionCounts(
            n=len(sel),
            complete=counts.get("complete", 0),
            continue_=counts.get("continue", 0),
            stuck=counts.get("stuck", 0),
        )
    return out


def _h1(by_arm: Mapping[str, list[StaticDecisionRow]], spec: StaticSpec, seed: int,
        simulated: bool) -> H1Gate:
    """H1: per held-out task, "any unsafe complete among its fault snapshots", ECT vs critic
    core (exact McNemar), with task- and world-cluster bootstrap intervals."""
    reps = spec.replicates

    def unsafe_rows(arm: str) -> list[StaticDecisionRow]:
        return [r for r in by_arm[arm] if r.condition != "C0"]

    ect_f, critic_f = unsafe_rows("ect"), unsafe_rows("critic_core")
    tasks = sorted({r.task_id for r in ect_f})
    if tasks != sorted({r.task_id for r in critic_f}):
        raise AnalysisError("ECT and critic core decided different held-out tasks")

    def indicator(frows: Sequence[StaticDecisionRow]) -> list[bool]:
        hit = {r.task_id for r in frows if r.decision == "complete"}
        return [t in hit for t in tasks]

    mc = mcnemar_exact(indicator(ect_f), indicator(critic_f))

    def boot(cluster_key: str, label: str) -> BootstrapResult:
        return cluster_bootstrap_diff(
            [getattr(r, cluster_key) for r in ect_f],
            [float(r.decision == "complete") for r in ect_f],
            [getattr(r, cluster_key) for r in critic_f],
            [float(r.decision == "complete") for r in critic_f],
            replicates=reps,
            seed=seed,
            label=label,
            confidence=spec.confidence,
        )

    task_b = boot("task_id", "h1/task")
    world_b = boot("world_id", "h1/world")
    diff_pp, lo_pp, hi_pp = (rnd(x) for x in task_b.pp())
    passed = bool(diff_pp < 0 and mc.p_value < 0.05 and hi_pp < 0)
    return H1Gate(
        tasks=len(tasks),
        worlds=world_b.n_clusters,
        fault_snapshots=len(ect_f),
        ect_unsafe=sum(1 for r in ect_f if r.decision == "complete"),
        critic_unsafe=sum(1 for r in critic_f if r.decision == "complete"),
        ect_tasks_with_unsafe=sum(indicator(ect_f)),
        critic_tasks_with_unsafe=sum(indicator(critic_f)),
        b_ect=mc.b_x,
        b_critic=mc.b_y,
        mcnemar_p=rnd(mc.p_value),
        diff_pp=diff_pp,
        ci_pp=(lo_pp, hi_pp),
        world_ci_pp=(rnd(world_b.lo * 100), rnd(world_b.hi * 100)),
        replicates=reps,
        confidence=spec.confidence,
        seed=seed,
        passed=passed,
        rule="ECT-minus-critic-core UCR < 0, exact McNemar p < .05, and the task-cluster "
        "95% interval wholly below 0",
        # H1 compares ECT and the critic core, neither of which calls a model: no simulator
        # parameter enters it (they shape only the self-check and full-trace arms).
        depends_on_simulator=False,
        outcome=static_gate_text(passed, simulated),
    )


def _per_family(by_arm: Mapping[str, list[StaticDecisionRow]], arms: Sequence[str],
                held: Sequence[StaticDecisionRow]) -> dict[str, dict[str, FamilyCounts]]:
    """Per arm and task family: unsafe completes among the fault snapshots."""
    families = sorted({r.family for r in held})
    return {
        a: {
            fam: FamilyCounts(
                unsafe=sum(
                    1
                    for r in by_arm[a]
                    if r.family == fam and r.condition != "C0" and r.decision == "complete"
                ),
                faults=sum(
                    1 for r in by_arm[a] if r.family == fam and r.condition != "C0"
                ),
            )
            for fam in families
        }
        for a in arms
    }


def _ect_reason_families(ect_held: Sequence[StaticDecisionRow]) -> dict[str, dict[str, int]]:
    """Per condition: how often each reason family appears in ECT's held-out decisions."""
    return {
        cond: dict(
            sorted(
                Counter(
                    f for r in ect_held if r.condition == cond for f in r.reason_families
                ).items()
            )
        )
        for cond in STATIC_CONDITIONS
    }


def _fires(check: CheckAblation, row: StaticDecisionRow) -> bool:
    """Whether ``check`` fired on full ECT's decision ``row`` (one of its reasons is there)."""
    if check.removes == ("recovery",):
        return "policy.recovery_available" in row.reasons
    return any(code in check.removes or code.split(".", 1)[0] in check.removes
               for code in row.reasons)


def _counts(rows: Sequence[StaticDecisionRow]) -> tuple[int, int]:
    return (sum(1 for r in rows if r.decision == "complete"),
            sum(1 for r in rows if r.decision == "stuck"))


def _table3_row(check: CheckAblation, abl: Sequence[StaticDecisionRow],
                ect_held: Sequence[StaticDecisionRow]) -> Table3Row:
    """One single-check ablation: the matched fault's U and S under ablation minus full ECT,
    the residual containment of each case, and where the check fires at all."""
    fires_heldout = sum(1 for r in ect_held if _fires(check, r))
    return Table3Row(
        check=check.name,
        label=check.paper_check,
        removes=tuple(check.removes),
        measure=check.measure,
        matched=check.matched,
        paper_target=check.paper_target,
        paper_fault=check.paper_fault,
        fires_heldout=fires_heldout,
        fires_by_condition=dict(sorted(Counter(
            r.condition for r in ect_held if _fires(check, r)).items())),
        fires_on_no_snapshot=fires_heldout == 0,
        target_fault=check.fault,
        fault_label=None if check.fault is None else check.paper_target,
        ablation=None if check.fault is None else _ablation(check, check.fault, abl, ect_held),
        unmatched=_unmatched(abl, ect_held) if check.fault is None else None,
    )


def _unmatched(abl: Sequence[StaticDecisionRow], ect_held: Sequence[StaticDecisionRow]
               ) -> NoMatchedFault:
    """An ablation without a matched fault: how many held-out fault decisions it changed."""
    before = {r.snapshot_id: r.decision for r in ect_held if r.condition != "C0"}
    changed = sum(1 for r in abl if r.condition != "C0" and before[r.snapshot_id] != r.decision)
    return NoMatchedFault(
        note=f"no matched fault in the frozen grid; {changed} of "
        f"{len(before)} held-out fault decisions changed",
        changed_decisions=changed,
    )


def _ablation(check: CheckAblation, fault: str, abl: Sequence[StaticDecisionRow],
              ect_held: Sequence[StaticDecisionRow]) -> AblationEffect:
    """The matched fault's U and S under ablation minus full ECT, and the residual
    containment of each case."""
    tgt_ect = [r for r in ect_held if r.condition == fault]
    tgt_abl = [r for r in abl if r.condition == fault]
    (u_ect, s_ect), (u_abl, s_abl) = _counts(tgt_ect), _counts(tgt_abl)
    counted = "complete" if check.measure == "U" else "stuck"
    contained = [r for r in tgt_abl if r.decision != counted]
    return AblationEffect(
        den=len(tgt_abl),
        ect=u_ect if check.measure == "U" else s_ect,
        ablated=u_abl if check.measure == "U" else s_abl,
        effect=(u_abl - u_ect) if check.measure == "U" else (s_abl - s_ect),
        ect_U=u_ect, ablated_U=u_abl, effect_U=u_abl - u_ect,
        ect_S=s_ect, ablated_S=s_abl, effect_S=s_abl - s_ect,
        fires_on_target=sum(1 for r in tgt_ect if _fires(check, r)),
        ablated_reason_families=dict(sorted(
            Counter(f for r in tgt_abl for f in r.reason_families).items())),
        residual=Residual(
            contained=len(contained),
            not_contained=len(tgt_abl) - len(contained),
            codes=dict(sorted(Counter(c for r in contained for c in r.reasons).items())),
            cases=tuple(
                ResidualCase(snapshot_id=r.snapshot_id, decision=r.decision,
                             codes=tuple(r.reasons))
                for r in sorted(contained, key=lambda r: r.snapshot_id)
            ),
        ),
    )


def _table3(rows: Sequence[StaticDecisionRow], ect_held: Sequence[StaticDecisionRow]
            ) -> tuple[Table3Row, ...]:
    """Table 3: each prespecified single-check ablation of ECT against full ECT."""
    table3 = []
    for check in TABLE3_ABLATIONS:
        abl = [
            r for r in rows if r.ablate == check.name and r.split == "heldout" and r.arm == "ect"
        ]
        if not abl:
            raise AnalysisError(f"no held-out decisions for the {check.name!r} ablation")
        table3.append(_table3_row(check, abl, ect_held))
    return tuple(table3)


def _intervals(by_arm: Mapping[str, list[StaticDecisionRow]], arms: Sequence[str],
               spec: StaticSpec, seed: int) -> dict[str, StaticIntervals]:
    """Per arm: U, C and S rates with task-cluster bootstrap intervals (for the plots)."""
    intervals: dict[str, StaticIntervals] = {}
    for a in arms:
        faults = [r for r in by_arm[a] if r.condition != "C0"]
        clean = [r for r in by_arm[a] if r.condition == "C0"]
        rates: dict[str, RateInterval] = {}
        for measure, sel, wanted, positive in (
            ("U", faults, "complete", True),
            ("C", clean, "complete", False),
            ("S", faults, "stuck", True),
        ):
            rates[measure] = RateInterval.of(cluster_bootstrap_mean(
                [r.task_id for r in sel],
                [float((r.decision == wanted) == positive) for r in sel],
                replicates=spec.replicates,
                seed=seed,
                label=f"rate/{a}/{measure}",
                confidence=spec.confidence,
            ))
        intervals[a] = StaticIntervals(U=rates["U"], C=rates["C"], S=rates["S"])
    return intervals


def analyse_static(
    rows: Sequence[StaticDecisionRow],
    *,
    spec: StaticSpec,
    provider: ProviderInfo,
    seed: int | None = None,
) -> StaticResults:
    """Table 2, Table 3, H1 and the plot intervals from the decision rows of ``run_static``."""
    seed = spec.seed if seed is None else seed
    base = [r for r in rows if r.ablate == ""]
    held = [r for r in base if r.split == "heldout"]
    arms = [a for a in STATIC_POLICIES if any(r.arm == a for r in held)]
    for need in ("ect", "critic_core"):
        if need not in arms:
            raise AnalysisError(f"static analysis needs held-out decisions of arm {need!r}")
    by_arm = {a: [r for r in held if r.arm == a] for a in arms}
    sizes = {a: len(v) for a, v in by_arm.items()}
    if len(set(sizes.values())) != 1:
        raise AnalysisError(f"arms decided different numbers of held-out snapshots: {sizes}")

    table2 = {a: _table2_row(by_arm[a]) for a in arms}
    dev = [r for r in base if r.split == "dev"]
    h1 = _h1(by_arm, spec, seed, provider.simulated)
    table3 = _table3(rows, by_arm["ect"])
    return StaticResults(
        provider=provider,
        provider_line=provider.describe(),
        inputs=StaticInputs(
            spec=SpecSummary.of(spec),
            spec_sha256=spec.sha256,
            seed=seed,
            replicates=spec.replicates,
            snapshots=len({r.snapshot_id for r in base}),
            heldout_snapshots=sizes[arms[0]],
            heldout_tasks=len({r.task_id for r in held}),
            decisions=len(rows),
            arms=tuple(arms),
            cluster="task_id (sensitivity: world_id)",
            interval="percentile",
        ),
        table2=table2,
        table2_dev={
            a: _table2_row([r for r in dev if r.arm == a])
            for a in arms
            if any(r.arm == a for r in dev)
        },
        table3=table3,
        h1=h1,
        per_fault={a: _per_condition(by_arm[a]) for a in arms},
        per_family=_per_family(by_arm, arms, held),
        ect_reason_families=_ect_reason_families(by_arm["ect"]),
        intervals=_intervals(by_arm, arms, spec, seed),
        simulator=(
            SimulatorBlock.of(flat_parameters({"critic": spec.critic}),
                              f"the static spec ({spec.sha256}), table [simulated.critic]",
                              STATIC_SIMULATOR_NOTE)
            if provider.simulated else None
        ),
        choices=CHOICES,
        paper_vs_run=PaperVsRun(note=PAPER_NOTE,
                                rows=static_paper_vs_run(table2, table3, h1)),
    )
