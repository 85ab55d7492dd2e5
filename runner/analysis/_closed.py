"""The closed-loop analysis: inventory, Table 4, H2-H4, strata and secondary estimates (the
records it fills are :mod:`runner.analysis._closed_results`).

Input is the list of cell outcomes ``runner.study`` commits into each record body
(``body["result"]["outcome"]``, shape in INTERFACES.md "Cell outcome") and the canonical
schedule rows. Nothing is computed unless every schedule row is present exactly once.

Definitions (the ECT paper, "Closed-Loop Confirmation"; docs/analysis.md states them in full):

- primary scope: every row except those of the task clusters assigned fault ``T1``;
- U: premature unsupported termination among incomplete-checkpoint rows;
- S: supported completion within budget among rows of both checkpoint conditions;
- FC: clean false continuation among clean-checkpoint rows;
- R: successful recovery among incomplete-checkpoint rows;
- H2: ECT-minus-controller U rate, task-cluster bootstrap; passes when the point estimate is
  negative and the 95% interval lies wholly below zero;
- H3: ECT-minus-controller S rate; passes when the interval's lower bound exceeds -10 points;
- H4: among ECT's primary incomplete rows, at least one successful recovery, and a strict
  majority of those recoveries then completed with support.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from runner.analysis._audit import VerifiedCompletion
from runner.analysis._closed_results import (
    AUDIT_NOTE,
    STRUCTURAL_NOTE,
    AuditRow,
    ClosedInputs,
    ClosedIntervals,
    ClosedLoopResults,
    H2Gate,
    H3Gate,
    H4Gate,
    MeanInterval,
    PairedComparison,
    PlanVsActual,
    ProviderAccounting,
    ProviderFailures,
    ReasonCodeRow,
    Scope,
    SecondaryEstimate,
    StoreInputs,
    Stratum,
    Structural,
    Table4Row,
    Unseen,
    VerifierAudit,
)
from runner.analysis._common import (
    CLOSED_LOOP_POLICIES,
    BootstrapInfo,
    ProviderInfo,
    RateInterval,
    rnd,
)
from runner.analysis._errors import InventoryIncomplete
from runner.analysis._honesty import CHOICES, SimulatorBlock, gate_text
from runner.analysis._paper import PAPER_NOTE, PaperVsRun, closed_paper_vs_run
from runner.analysis._stats import cluster_bootstrap_diff, cluster_bootstrap_mean, noninferior
from runner.errors import AnalysisError
from runner.loop import Outcome
from runner.policies import gate_pipeline
from runner.study import FailureCounts, ScheduleRow, StratumReasons
from runner.worlds import CLOSED_LOOP_FAULTS, TRUST_BOUNDARY_FAULT, UNSEEN_FAULTS

__all__ = ["analyse_closed_loop", "check_inventory"]


COMPARATOR = gate_pipeline("comparator")  # the pipeline table's gate roles
TREATMENT = gate_pipeline("treatment")

SECONDARY: tuple[tuple[str, str], ...] = (
    ("turns", "decision turns"),
    ("tool_calls", "tool calls"),
    ("tokens", "tokens (input + output)"),
    ("latency_s", "provider seconds"),
    ("cost_usd", "estimated cost (USD)"),
)

def _check_vocabulary(o: Outcome) -> None:
    """The closed-loop analysis knows these checkpoints, policies and faults only."""
    where = f"outcome row {o.row}"
    if o.checkpoint not in ("clean", "incomplete"):
        raise AnalysisError(f"{where}: checkpoint {o.checkpoint!r} is not clean/incomplete")
    if o.policy not in CLOSED_LOOP_POLICIES:
        raise AnalysisError(f"{where}: unknown policy {o.policy!r}")
    if o.fault is not None and o.fault not in CLOSED_LOOP_FAULTS:
        raise AnalysisError(f"{where}: unknown fault {o.fault!r}")


def check_inventory(schedule_rows: Sequence[ScheduleRow], outcomes: Sequence[Outcome]) -> None:
    """Every schedule row exactly once, nothing else; InventoryIncomplete otherwise."""
    expected = {srow.row: srow.cell_id for srow in schedule_rows}
    if len(expected) != len(schedule_rows):
        raise AnalysisError("the schedule itself repeats a row number")
    seen = Counter(o.row for o in outcomes if expected.get(o.row) == o.cell_id)
    unexpected = sorted(
        f"row {o.row} cell {o.cell_id}" for o in outcomes if expected.get(o.row) != o.cell_id
    )
    missing = sorted(r for r in expected if seen[r] == 0)
    duplicate = sorted(r for r, n in seen.items() if n > 1)
    if missing or duplicate or unexpected:
        raise InventoryIncomplete(missing, duplicate, unexpected, expected=len(expected))


def _task_faults(outcomes: Iterable[Outcome]) -> dict[str, str]:
    faults: dict[str, str] = {}
    for o in outcomes:
        if o.fault is None:
            continue
        prior = faults.setdefault(o.task_id, o.fault)
        if prior != o.fault:
            raise AnalysisError(
                f"task {o.task_id} is assigned two faults ({prior}, {o.fault})"
            )
    return faults


def _count(rows: Iterable[Outcome], field: str) -> int:
    return sum(1 for r in rows if getattr(r, field))


def _mean(rows: Sequence[Outcome], key: str) -> float:
    return sum(_value(r, key) for r in rows) / len(rows) if rows else 0.0


def _value(row: Outcome, key: str) -> float:
    if key == "tokens":
        return float(row.input_tokens + row.output_tokens)
    return float(getattr(row, key))


def _table4_row(rows: Sequence[Outcome]) -> Table4Row:
    inc = [r for r in rows if r.checkpoint == "incomplete"]
    clean = [r for r in rows if r.checkpoint == "clean"]
    return Table4Row(
        U=_count(inc, "premature_unsupported"),
        U_den=len(inc),
        S=_count(rows, "supported_completion"),
        S_den=len(rows),
        FC=_count(clean, "clean_false_continuation"),
        FC_den=len(clean),
        R=_count(inc, "successful_recovery"),
        R_den=len(inc),
        recoverable_stuck=_count(inc, "recoverable_stuck"),
        unsupported_claims=sum(int(r.unsupported_claims) for r in rows),
        postcondition_ok=_count(rows, "postcondition_ok"),
        mean_turns=rnd(_mean(rows, "turns")),
        mean_calls=rnd(_mean(rows, "tool_calls")),
        mean_tokens=rnd(_mean(rows, "tokens")),
        mean_latency_s=rnd(_mean(rows, "latency_s")),
        mean_cost_usd=rnd(_mean(rows, "cost_usd")),
        stop_reasons=dict(sorted(Counter(r.stop_reason.value for r in rows).items())),
    )


@dataclass(frozen=True, slots=True)
class _Diff:
    """A paired difference before it is worded as a gate or a secondary estimate."""

    paired: PairedComparison
    diff: float
    ci: tuple[float, float]


def _diff(
    rows: Sequence[Outcome],
    key: str,
    *,
    checkpoint: str | None,
    label: str,
    seed: int,
    replicates: int,
    scale: float,
) -> _Diff:
    sel = [r for r in rows if checkpoint is None or r.checkpoint == checkpoint]
    a = [r for r in sel if r.policy == TREATMENT]
    b = [r for r in sel if r.policy == COMPARATOR]
    res = cluster_bootstrap_diff(
        [r.task_id for r in a],
        [_value(r, key) for r in a],
        [r.task_id for r in b],
        [_value(r, key) for r in b],
        replicates=replicates,
        seed=seed,
        label=label,
    )
    paired = PairedComparison(
        treatment=TREATMENT,
        comparator=COMPARATOR,
        n_treatment=len(a),
        n_comparator=len(b),
        sum_treatment=rnd(sum(_value(r, key) for r in a)),
        sum_comparator=rnd(sum(_value(r, key) for r in b)),
        mean_treatment=rnd(_mean(a, key) * scale),
        mean_comparator=rnd(_mean(b, key) * scale),
        bootstrap=BootstrapInfo.of(res, cluster="task_id"),
    )
    return _Diff(paired, rnd(res.estimate * scale), (rnd(res.lo * scale), rnd(res.hi * scale)))


def _strata(rows: Sequence[Outcome], faults: Mapping[str, str]) -> dict[str, Stratum]:
    """Per assigned fault x policy: U on incomplete rows and S over both conditions."""
    out: dict[str, Stratum] = {}
    for fault in CLOSED_LOOP_FAULTS:
        frows = [r for r in rows if faults.get(r.task_id) == fault]
        if not frows:
            continue
        out[fault] = Stratum(
            tasks=tuple(sorted({r.task_id for r in frows})),
            policies=_by_policy(frows, CLOSED_LOOP_POLICIES),
        )
    return out


def _h2(primary: Sequence[Outcome], seed: int, replicates: int, simulated: bool) -> H2Gate:
    """H2: premature unsupported termination on incomplete checkpoints, ECT minus controller."""
    d = _diff(
        primary,
        "premature_unsupported",
        checkpoint="incomplete",
        label="h2",
        seed=seed,
        replicates=replicates,
        scale=100.0,
    )
    passed = bool(d.diff < 0 and d.ci[1] < 0)
    return H2Gate(
        paired=d.paired,
        diff_pp=d.diff, ci_pp=d.ci, passed=passed,
        rule="ECT-minus-controller point estimate < 0 and 95% interval wholly below 0",
        outcome=gate_text(passed, simulated),
    )


def _h3(primary: Sequence[Outcome], seed: int, replicates: int, margin_pp: float,
        simulated: bool) -> H3Gate:
    """H3: supported completion over both checkpoints, noninferiority at ``margin_pp``."""
    d = _diff(
        primary,
        "supported_completion",
        checkpoint=None,
        label="h3",
        seed=seed,
        replicates=replicates,
        scale=100.0,
    )
    passed = noninferior(float(d.ci[0]), margin_pp)
    return H3Gate(
        paired=d.paired,
        diff_pp=d.diff, ci_pp=d.ci, margin_pp=margin_pp, passed=passed,
        rule=f"lower bound of the 95% interval > {margin_pp:g} pp",
        outcome=gate_text(passed, simulated),
    )


def _h4(primary: Sequence[Outcome], simulated: bool) -> H4Gate:
    """H4: ECT's successful recovery events on incomplete checkpoints (the event-level gate)."""
    ect_inc = [r for r in primary if r.policy == TREATMENT and r.checkpoint == "incomplete"]
    recovered = [r for r in ect_inc if r.successful_recovery]
    then_supported = [r for r in recovered if r.recovered_then_supported]
    passed = bool(recovered) and 2 * len(then_supported) > len(recovered)
    return H4Gate(
        eligible=len(ect_inc),
        recoveries=len(recovered),
        recovered_then_supported=len(then_supported),
        passed=passed,
        rule="ECT: successful recovery events > 0 and a strict majority of them then "
        "complete with support",
        outcome=gate_text(passed, simulated),
    )


def _secondary(primary: Sequence[Outcome], seed: int, replicates: int
               ) -> dict[str, SecondaryEstimate]:
    """The paired secondary differences (turns, calls, tokens, latency, cost, ...)."""
    out: dict[str, SecondaryEstimate] = {}
    for key, text in SECONDARY:
        d = _diff(primary, key, checkpoint=None, label=f"secondary/{key}", seed=seed,
                  replicates=replicates, scale=1.0)
        out[key] = SecondaryEstimate(
            paired=d.paired,
            label=text, diff_raw=d.diff, ci_raw=d.ci,
        )
    return out


_RATES: tuple[tuple[str, str], ...] = (
    ("U", "premature_unsupported"),
    ("S", "supported_completion"),
    ("FC", "clean_false_continuation"),
    ("R", "successful_recovery"),
)


def _policy_intervals(prow: Sequence[Outcome], p: str, seed: int, replicates: int
                      ) -> ClosedIntervals:
    inc = [r for r in prow if r.checkpoint == "incomplete"]
    clean = [r for r in prow if r.checkpoint == "clean"]
    selections = {"U": inc, "S": prow, "FC": clean, "R": inc}
    rates: dict[str, RateInterval] = {}
    for key, outcome_field in _RATES:
        sel = selections[key]
        if not sel:
            continue
        res = cluster_bootstrap_mean(
            [r.task_id for r in sel],
            [float(getattr(r, outcome_field)) for r in sel],
            replicates=replicates,
            seed=seed,
            label=f"rate/{p}/{key}",
        )
        rates[key] = RateInterval.of(res)
    means: dict[str, MeanInterval] = {}
    for key in ("turns", "tool_calls", "tokens", "cost_usd"):
        res = cluster_bootstrap_mean(
            [r.task_id for r in prow],
            [_value(r, key) for r in prow],
            replicates=replicates,
            seed=seed,
            label=f"mean/{p}/{key}",
        )
        means[key] = MeanInterval(mean=rnd(res.estimate), ci=(rnd(res.lo), rnd(res.hi)))
    return ClosedIntervals(
        U=rates.get("U"), S=rates.get("S"), FC=rates.get("FC"), R=rates.get("R"),
        turns=means["turns"], tool_calls=means["tool_calls"], tokens=means["tokens"],
        cost_usd=means["cost_usd"],
    )


def _closed_intervals(primary: Sequence[Outcome], policies: Sequence[str], seed: int,
                      replicates: int) -> dict[str, ClosedIntervals]:
    """Per policy: U, S, FC, R rates and per-trajectory means with task-cluster intervals."""
    return {p: _policy_intervals([r for r in primary if r.policy == p], p, seed, replicates)
            for p in policies}


def _audit(verified: Sequence[VerifiedCompletion], excluded: set[str],
           policies: Sequence[str]) -> VerifierAudit:
    rows = [v for v in verified if v.task_id not in excluded]
    return VerifierAudit(note=AUDIT_NOTE, policies={
        p: AuditRow(
            completions=sum(v.completed for v in rows if v.policy == p),
            verifier_accepts=sum(v.verifier_accepts for v in rows if v.policy == p),
            off_gold=sum(v.off_gold for v in rows if v.policy == p),
        )
        for p in policies
    })


def _by_policy(rows: Sequence[Outcome], policies: Iterable[str]) -> dict[str, Table4Row]:
    """Table 4's columns for each policy that has rows among ``rows``."""
    return {
        p: _table4_row([r for r in rows if r.policy == p])
        for p in policies
        if any(r.policy == p for r in rows)
    }


def analyse_closed_loop(
    outcomes: Sequence[Outcome],
    schedule_rows: Sequence[ScheduleRow],
    *,
    provider: ProviderInfo,
    seed: int,
    replicates: int = 10_000,
    margin_pp: float = -10.0,
    inputs: StoreInputs | None = None,
    simulator: Mapping[str, float] | None = None,
    simulator_source: str = "not given to the analysis",
    reason_codes: Sequence[StratumReasons] | None = None,
    provider_failures: FailureCounts | None = None,
    provider_accounting: ProviderAccounting | None = None,
    plan_vs_actual: PlanVsActual | None = None,
    verified: Sequence[VerifiedCompletion] | None = None,
) -> ClosedLoopResults:
    """Every closed-loop figure, typed and deterministic for fixed inputs and seed.

    ``simulator`` names the simulated provider's parameters the run used (dotted spec names,
    e.g. ``simulated.planner.p_premature_finish``) and ``simulator_source`` where they were read;
    with a simulated provider they are written under ``"simulator"`` and every gate's
    ``outcome`` says it holds under them. ``"choices"`` lists the project's own definitions.
    ``reason_codes`` (from :func:`runner.study.reason_codes_by_stratum`, which needs
    the cell records, not just outcomes) is carried into ``"reason_codes"`` (``null`` without),
    and ``provider_failures`` (:class:`runner.study.FailureCounts` of the cell records) into
    ``"provider_failures"`` (``null`` without); a report with failures says so first.
    ``verified`` (:func:`runner.analysis._audit.verified_completions` of the cell records) gives
    ``"verifier_audit"`` (``null`` without): per policy, the primary-scope completions the
    verifier accepts and how many of them are off gold. ``"structural"`` marks ECT's U and FC
    as guaranteed by the verifier, not measured.

    Raises InventoryIncomplete unless ``outcomes`` cover ``schedule_rows`` exactly once, and
    AnalysisError when an outcome is malformed or a comparison arm is absent.
    """
    for o in outcomes:
        _check_vocabulary(o)
    rows = sorted(outcomes, key=lambda o: o.row)
    check_inventory(schedule_rows, rows)
    faults = _task_faults(rows)
    excluded = sorted(t for t, f in faults.items() if f == TRUST_BOUNDARY_FAULT)
    primary = [r for r in rows if r.task_id not in set(excluded)]
    for arm in (TREATMENT, COMPARATOR):
        if not any(r.policy == arm for r in primary):
            raise AnalysisError(f"no primary-scope rows for policy {arm!r}")
    policies = [p for p in CLOSED_LOOP_POLICIES if any(r.policy == p for r in rows)]

    table4 = {p: _table4_row([r for r in primary if r.policy == p]) for p in policies}
    sim = provider.simulated
    h2 = _h2(primary, seed, replicates, sim)
    h3 = _h3(primary, seed, replicates, margin_pp, sim)
    h4 = _h4(primary, sim)
    strata = _strata(rows, faults)
    primary_tasks = sorted({r.task_id for r in primary})
    secondary = _secondary(primary, seed, replicates)
    unseen_pooled = _by_policy(
        [r for r in primary if faults.get(r.task_id) in UNSEEN_FAULTS], policies)
    return ClosedLoopResults(
        provider=provider,
        provider_line=provider.describe(),
        inputs=ClosedInputs(
            store_id=inputs.store_id if inputs else None,
            store_head_seq=inputs.store_head_seq if inputs else None,
            store_head_chain=inputs.store_head_chain if inputs else None,
            store_records=inputs.store_records if inputs else None,
            schedule_sha256=inputs.schedule_sha256 if inputs else None,
            schedule_rows=inputs.schedule_rows if inputs else None,
            rows=len(rows),
            seed=seed,
            replicates=replicates,
            confidence=0.95,
            interval="percentile",
            cluster="task_id",
        ),
        scope=Scope(
            excluded_trust_boundary_tasks=tuple(excluded),
            primary_clusters=len(primary_tasks),
            primary_rows=len(primary),
            seeds_per_cell_group=sorted(
                Counter((r.task_id, r.checkpoint, r.policy) for r in primary).values()
            )[0],
            policies=tuple(policies),
        ),
        table4=table4,
        structural=Structural(policy=TREATMENT, measures=("U", "FC"), note=STRUCTURAL_NOTE),
        verifier_audit=(_audit(verified, set(excluded), policies) if verified is not None
                        else None),
        h2=h2,
        h3=h3,
        h4=h4,
        gates_passed=bool(h2.passed and h3.passed and h4.passed),
        simulator=SimulatorBlock.of(simulator, simulator_source) if sim else None,
        choices=CHOICES,
        reason_codes=(tuple(ReasonCodeRow.of(e) for e in reason_codes)
                      if reason_codes is not None else None),
        provider_failures=(ProviderFailures.of(provider_failures)
                           if provider_failures is not None else None),
        provider_accounting=provider_accounting,
        plan_vs_actual=plan_vs_actual,
        secondary=secondary,
        intervals=_closed_intervals(primary, policies, seed, replicates),
        unseen=Unseen(
            pooled=unseen_pooled,
            by_fault={f: strata[f] for f in UNSEEN_FAULTS if f in strata},
        ),
        trust_boundary=Stratum(
            tasks=tuple(excluded),
            policies=_by_policy([r for r in rows if r.task_id in set(excluded)], policies),
        ),
        per_fault=strata,
        paper_vs_run=PaperVsRun(note=PAPER_NOTE, rows=closed_paper_vs_run(
            table4, h2, h3, h4, unseen_pooled, {k: v.diff_raw for k, v in secondary.items()})),
    )
