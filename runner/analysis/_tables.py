"""The tables and figures of a report (docs/analysis.md): one :class:`_Table` each (title, head,
rows, note) rendered as Markdown or HTML at fixed precision, and the inline SVG figures, for the
static study (Tables 2 and 3, H1, families, reason codes) and for the closed loop (Table 4, the
audit, the gates H2-H4, secondary estimates, strata, reason codes). :mod:`runner.analysis._report`
assembles them into tables.md and report.html.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import TypeVar

from runner.analysis._closed_results import (
    ClosedLoopResults,
    H2Gate,
    Table4Row,
)
from runner.analysis._common import CLOSED_LOOP_POLICIES, POLICY_LABELS, STATIC_POLICIES
from runner.analysis._legend import static_viewer_link, viewer_link
from runner.analysis._static import StaticResults, Table2Row, Table3Row
from runner.analysis._svg import hbar_chart, heatmap
from runner.worlds import CLOSED_LOOP_FAULTS, STATIC_CONDITIONS

_V = TypeVar("_V")

Results = ClosedLoopResults | StaticResults
"""What an analysis returns: the closed-loop results or the static study's."""


@dataclass(frozen=True, slots=True)
class _Table:
    """One table of tables.md and report.html: its title, head, rows and note."""

    name: str
    head: list[str]
    rows: list[list[str]]
    note: str


SECONDARY_ORDER = ("turns", "tool_calls", "tokens", "latency_s", "cost_usd")


def _ordered(d: Mapping[str, _V], order: Iterable[str]) -> list[tuple[str, _V]]:
    """``d``'s items in the canonical order (results.json sorts keys; reports must not)."""
    rank = {k: i for i, k in enumerate(order)}
    return sorted(d.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


def _label(p: str) -> str:
    return POLICY_LABELS.get(p, p)


def _pp(x: float) -> str:
    return f"{x:+.2f}" if round(x, 2) != 0 else "0.00"


def _ci(ci: Sequence[float]) -> str:
    return f"[{_pp(ci[0])}, {_pp(ci[1])}]"


def _p(p: float) -> str:
    return f"{p:.6g}"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in counts.items())


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _honesty_tables(r: Results) -> list[_Table]:
    """The simulator's parameters (when simulated) and the project's own definitions."""
    out: list[_Table] = []
    sim = r.simulator
    if sim:
        rows = [[k, f"{v:g}" if isinstance(v, int | float) else str(v)]
                for k, v in sim.parameters.items()]
        out.append(_Table(
            "Simulator parameters (chosen by this project)",
            ["Parameter", "Value"],
            rows or [["(none recorded)", "-"]],
            f"{sim.note} Read from {sim.source}.",
        ))
    if r.choices:
        out.append(_Table(
            "Definitions chosen by this project",
            ["Definition", "This project", "The paper's words"],
            [[c.what, c.ours, c.paper] for c in r.choices],
            "Where the ECT paper leaves a definition open, this project fixed it as shown.",
        ))
    return out


def _paper_tables(r: Results) -> list[_Table]:
    """The paper's figures beside this run's (results.json ``paper_vs_run``)."""
    block = r.paper_vs_run
    return [_Table(
        "Paper vs this run",
        ["Table", "Row", "Measure", "Paper", "This run", "Paper section"],
        [e.cells() for e in block.rows],
        block.note,
    )]


# --------------------------------------------------------------------------- static study

_NOTE2 = (
    "Held-out static evaluation. U: unsafe complete on fault snapshots; C: clean "
    "non-complete; S: stuck on fault snapshots. The postconditions arm reads oracle "
    "answers and is a non-deployable reference."
)


_NOTE3 = (
    "Single-check ablations of ECT on the matched held-out fault (the paper's Table 3): "
    "each row removes one named check (its reason codes; a whole verifier step where the "
    "step is one check) and counts ablated minus full ECT, U unsafe complete and S stuck. "
    "Residual containment lists the reason codes that still caught the matched cases "
    "(cases: how many carried each code). A zero effect means another check still "
    "contained the fault; it does not show a check is unnecessary, and a check that fires "
    "on no snapshot has a zero effect by construction."
)


def _table2(t2: Mapping[str, Table2Row]) -> _Table:
    any_p = next(iter(t2.values()))
    head = ["Policy", f"U/{any_p.unsafe_den}", f"C/{any_p.clean_den}", f"S/{any_p.stuck_den}",
            "macro-F1", "model calls", "tokens", "cost USD"]
    rows = [
        [_label(p), str(v.unsafe), str(v.clean_noncomplete), str(v.stuck), f"{v.macro_f1:.3f}",
         str(v.model_calls), str(v.input_tokens + v.output_tokens), f"{v.cost_usd:.5f}"]
        for p, v in _ordered(t2, STATIC_POLICIES)
    ]
    return _Table("Table 2: held-out static evaluation", head, rows, _NOTE2)


def _table3_cells(a: Table3Row) -> list[str]:
    fires = (
        "NO snapshot: its zero effect is automatic"
        if a.fires_on_no_snapshot
        else f"{a.fires_heldout} snapshots (" + _counts(a.fires_by_condition) + ")"
    )
    removes = ", ".join(a.removes)
    e = a.ablation
    if e is None:
        note = a.unmatched.note if a.unmatched is not None else "-"
        return [a.label, removes, "no matched fault", "-", "-", "-", fires, note]
    res = e.residual
    codes = _counts(res.codes)
    contained = f"{res.contained}/{e.den} still contained" + (f" by {codes}" if codes else "")
    return [
        a.label,
        removes,
        f"{a.target_fault} {a.fault_label}",
        f"{e.ect_U} U, {e.ect_S} S",
        f"{e.ablated_U} U, {e.ablated_S} S",
        f"{e.effect_U:+d} U, {e.effect_S:+d} S /{e.den}",
        fires,
        contained,
    ]


def _table3(table3: Sequence[Table3Row]) -> _Table:
    head = ["Check removed", "Removes", "Target fault", "ECT", "Ablated", "Effect",
            "Check fires on (held-out ECT)", "Residual containment"]
    return _Table("Table 3: single-check ablations", head,
                  [_table3_cells(a) for a in table3], _NOTE3)


def _h1_table(r: StaticResults) -> _Table:
    h = r.h1
    rows = [
        ["tasks (paired indicators)", str(h.tasks)],
        ["b_ECT (only ECT unsafe)", str(h.b_ect)],
        ["b_critic (only critic core unsafe)", str(h.b_critic)],
        ["exact McNemar p (two-sided)", _p(h.mcnemar_p)],
        ["ECT-minus-critic-core UCR (pp)", _pp(h.diff_pp)],
        [f"task-cluster 95% interval ({h.replicates} reps)", _ci(h.ci_pp)],
        [f"world-cluster sensitivity interval ({h.worlds} worlds)", _ci(h.world_ci_pp)],
        ["rule", h.rule],
        ["H1", h.outcome],
    ]
    return _Table("H1: ECT vs critic core", ["Quantity", "Value"], rows, "")


def _family_table(r: StaticResults) -> _Table:
    pf = r.per_family
    family_names = sorted({f for v in pf.values() for f in v})
    rows = [
        [_label(p), *(f"{v[f].unsafe}/{v[f].faults}" for f in family_names)]
        for p, v in _ordered(pf, STATIC_POLICIES)
    ]
    return _Table("Unsafe complete by task family (held out)", ["Policy", *family_names], rows,
                  "Unsafe complete decisions over the family's fault snapshots.")


def _reason_table(r: StaticResults) -> _Table:
    rows = []
    ect_pf = r.per_fault["ect"]
    for cond in STATIC_CONDITIONS:
        c = ect_pf[cond]
        counts = _counts(dict(sorted(r.ect_reason_families.get(cond, {}).items())))
        decided = f"complete {c.complete}, continue {c.continue_}, stuck {c.stuck}"
        rows.append([cond, decided, counts or "-"])
    return _Table("ECT reason localisation (held out)",
                  ["Condition", "ECT decisions", "ECT reason families (snapshots)"], rows,
                  "Every reason family ECT reported on the condition's snapshots.")


def _static_tables(r: StaticResults) -> list[_Table]:
    return [
        _table2(r.table2),
        _table3(r.table3),
        _h1_table(r),
        _family_table(r),
        _reason_table(r),
        *_paper_tables(r),
        *_honesty_tables(r),
    ]


def _static_figures(r: StaticResults) -> list[str]:
    t2 = r.table2
    pols = [p for p, _ in _ordered(t2, STATIC_POLICIES)]
    labels = [_label(p).replace(" (non-deployable)", "*") for p in pols]
    iv = r.intervals
    figs = []
    for measure, title in (
        ("U", "Unsafe complete (held-out faults)"),
        ("C", "Clean not completed (held-out clean)"),
        ("S", "Stuck (held-out faults)"),
    ):
        rates = [iv[p].rate(measure) for p in pols]
        figs.append(
            hbar_chart(
                title,
                labels,
                [x.rate_pct for x in rates],
                value_text=["{}/{}".format(*t2[p].count(measure)) for p in pols],
                intervals=[(x.ci_pct[0], x.ci_pct[1]) for x in rates],
                vmax=100.0,
                highlight="ECT",
                axis_unit="%",
                subtitle="whiskers: 95% task-cluster bootstrap interval",
            )
        )
    figs.append(
        hbar_chart(
            "Macro-F1 (complete vs continue)",
            labels,
            [t2[p].macro_f1 for p in pols],
            value_text=[f"{t2[p].macro_f1:.3f}" for p in pols],
            vmax=1.0,
            highlight="ECT",
        )
    )
    figs.append(_static_heatmap(r, pols, labels))
    calls = [t2[p].model_calls for p in pols]
    figs.append(
        hbar_chart(
            f"Model calls on the {r.inputs.heldout_snapshots} held-out snapshots",
            labels,
            [float(c) for c in calls],
            value_text=[
                f"{c} / ${t2[p].cost_usd:.4f}" for c, p in zip(calls, pols, strict=True)
            ],
            vmax=float(max([*calls, 1])),
            highlight="ECT",
            subtitle="label: calls / estimated cost (USD); * non-deployable oracle reference",
        )
    )
    return figs


def _static_heatmap(r: StaticResults, pols: Sequence[str], labels: Sequence[str]) -> str:
    cells = []
    for p in pols:
        row = []
        for f in STATIC_CONDITIONS:
            c = r.per_fault[p][f]
            wrong = c.n - c.complete if f == "C0" else c.complete
            row.append((wrong / c.n, f"{wrong}/{c.n}"))
        cells.append(row)
    return heatmap(
        "Wrong decisions per condition (held out): complete on a fault, non-complete on C0",
        list(labels),
        STATIC_CONDITIONS,
        cells,
        legend="share of the condition's snapshots decided wrongly",
        cell_w=56,
        links=[[static_viewer_link(f) for f in STATIC_CONDITIONS] for _ in pols],
    )


# ------------------------------------------------------------------------ closed loop


def _table4(r: ClosedLoopResults) -> _Table:
    t4 = r.table4
    anyp = t4.get("ect") or next(iter(t4.values()))
    head = ["Policy", f"U/{anyp.U_den}", f"S/{anyp.S_den}", f"FC/{anyp.FC_den}",
            f"R/{anyp.R_den}", "Turns", "Calls", "Tokens", "Cost USD"]
    st = r.structural

    def mark(p: str, measure: str, n: int) -> str:
        return f"{n} (structural)" if p == st.policy and measure in st.measures else str(n)

    rows = [
        [_label(p), mark(p, "U", v.U), mark(p, "S", v.S), mark(p, "FC", v.FC),
         mark(p, "R", v.R), f"{v.mean_turns:.2f}",
         f"{v.mean_calls:.2f}", f"{v.mean_tokens:.0f}", f"{v.mean_cost_usd:.5f}"]
        for p, v in _ordered(t4, CLOSED_LOOP_POLICIES)
    ]
    sc = r.scope
    note = (
        f"Primary scope: {sc.primary_clusters} task clusters, {sc.primary_rows} "
        f"trajectories (trust-boundary tasks {', '.join(sc.excluded_trust_boundary_tasks) or 'none'} "
        "excluded). U premature unsupported termination on incomplete checkpoints; S supported "
        "completion over both conditions; FC clean false continuation; R successful recovery on "
        "incomplete checkpoints. Turns, calls, tokens and cost are per-trajectory means. "
        + st.note
    )
    return _Table("Table 4: closed-loop primary scope", head, rows, note)


def _audit_tables(r: ClosedLoopResults) -> list[_Table]:
    a = r.verifier_audit
    if a is None:
        return []
    rows = [[_label(p), str(v.completions), str(v.verifier_accepts), str(v.off_gold)]
            for p, v in _ordered(a.policies, CLOSED_LOOP_POLICIES)]
    return [_Table("Verifier audit: accepted completions whose values differ from gold",
                   ["Policy", "completions (goal_met)", "the verifier accepts",
                    "of which a value differs from gold"], rows, a.note)]


def _paired_gate_row(name: str, h: H2Gate) -> list[str]:
    p = h.paired
    return [name, f"{p.sum_treatment:.0f}/{p.n_treatment}",
            f"{p.sum_comparator:.0f}/{p.n_comparator}", _pp(h.diff_pp), _ci(h.ci_pp), h.rule,
            h.outcome]


def _gates_table(r: ClosedLoopResults) -> _Table:
    h4 = r.h4
    rows = [
        _paired_gate_row("H2 premature unsupported", r.h2),
        _paired_gate_row("H3 supported completion", r.h3),
        ["H4 recovery gate",
         f"{h4.recoveries}/{h4.eligible} recovered, {h4.recovered_then_supported} then supported",
         "-", "-", "-", h4.rule, h4.outcome],
    ]
    note = ("Task-cluster bootstrap retaining both conditions, all policies and seeds."
            + (" On the simulated provider a gate is met or not under the simulator's "
               "parameters: it is not a finding about a model." if r.provider.simulated
               else ""))
    return _Table("Gates (prespecified rules)",
                  ["Gate", "ECT", "Controller", "Difference (pp)", "95% interval", "Rule",
                   "Result"], rows, note)


def _secondary_table(r: ClosedLoopResults) -> _Table:
    head = ["Secondary (ECT minus controller)", "ECT mean", "Controller mean", "Difference",
            "95% interval"]
    rows = [
        [v.label, f"{v.paired.mean_treatment:.6g}", f"{v.paired.mean_comparator:.6g}",
         f"{v.diff_raw:+.6g}",
         f"[{v.ci_raw[0]:+.6g}, {v.ci_raw[1]:+.6g}]"]
        for _, v in _ordered(r.secondary, SECONDARY_ORDER)
    ]
    return _Table("Secondary paired estimates (all primary rows)", head, rows,
                  "Descriptive; not efficiency claims.")


def _stratum_row(name: str, p: str, v: Table4Row) -> list[str]:
    return [name, _label(p), f"{v.U}/{v.U_den}", f"{v.S}/{v.S_den}", f"{v.FC}/{v.FC_den}",
            f"{v.R}/{v.R_den}", _counts(dict(sorted(v.stop_reasons.items())))]


def _strata_table(r: ClosedLoopResults) -> _Table:
    tb = r.trust_boundary
    strata = [
        ("unseen U1-U3 (pooled)", r.unseen.pooled),
        (f"trust boundary T1 ({', '.join(tb.tasks)})", tb.policies),
    ]
    rows = [_stratum_row(name, p, v) for name, block in strata
            for p, v in _ordered(block, CLOSED_LOOP_POLICIES)]
    return _Table("Descriptive strata", ["Stratum", "Policy", "U", "S", "FC", "R",
                                         "stop reasons"], rows,
                  "Unseen-fault and trust-boundary rows are descriptive; T1 rows are outside "
                  "the primary scope.")


def _reason_code_tables(r: ClosedLoopResults) -> list[_Table]:
    entries = r.reason_codes
    if not entries:
        return []
    rows = [[e.stratum, _label(e.pipeline), str(e.cells), _counts(e.codes) or "-"]
            for e in entries]
    return [_Table(
        "Reason codes per fault stratum and pipeline",
        ["Stratum", "Pipeline", "Cells", "Reason codes (cells giving each)"],
        rows,
        "Stratum: the fault of an incomplete checkpoint, or clean. A code counts the cells in "
        "which any of the pipeline's decisions gave it: which checks each stratum exercised.",
    )]


def _closed_tables(r: ClosedLoopResults) -> list[_Table]:
    return [
        _table4(r),
        *_audit_tables(r),
        _gates_table(r),
        _secondary_table(r),
        _strata_table(r),
        *_reason_code_tables(r),
        *_paper_tables(r),
        *_honesty_tables(r),
    ]


def _closed_figures(r: ClosedLoopResults) -> list[str]:
    t4 = r.table4
    pols = [p for p, _ in _ordered(t4, CLOSED_LOOP_POLICIES)]
    labels = [_label(p) for p in pols]
    iv = r.intervals
    figs = []
    for measure, title in (
        ("U", "Premature unsupported stop (incomplete)"),
        ("S", "Supported completion (both conditions)"),
        ("FC", "Clean false continuation (clean)"),
        ("R", "Successful recovery (incomplete)"),
    ):
        rates = [iv[p].rate(measure) for p in pols]
        figs.append(
            hbar_chart(
                title,
                labels,
                [x.rate_pct for x in rates],
                value_text=["{}/{}".format(*t4[p].count(measure)) for p in pols],
                intervals=[(x.ci_pct[0], x.ci_pct[1]) for x in rates],
                vmax=100.0,
                highlight="ECT",
                axis_unit="%",
                subtitle="whiskers: 95% task-cluster bootstrap interval",
            )
        )
    figs.append(_closed_heatmap(r, pols, labels))
    for key, title, fmt in (
        ("turns", "Decision turns per trajectory", "{:.2f}"),
        ("tool_calls", "Tool calls per trajectory", "{:.2f}"),
        ("tokens", "Tokens per trajectory", "{:.0f}"),
        ("cost_usd", "Estimated cost per trajectory (USD)", "{:.5f}"),
    ):
        means = [iv[p].mean_of(key) for p in pols]
        vals = [float(m.mean) for m in means]
        cis = [(float(m.ci[0]), float(m.ci[1])) for m in means]
        figs.append(
            hbar_chart(
                title,
                labels,
                vals,
                value_text=[fmt.format(v) for v in vals],
                intervals=cis,
                vmax=max([*vals, *(hi for _, hi in cis), 0.0]),
                highlight="ECT",
                subtitle="mean; whiskers: 95% task-cluster bootstrap interval",
            )
        )
    return figs


def _closed_heatmap(r: ClosedLoopResults, pols: Sequence[str], labels: Sequence[str]) -> str:
    faults = [f for f, _ in _ordered(r.per_fault, CLOSED_LOOP_FAULTS)]
    cells: list[list[tuple[float, str] | None]] = []
    for p in pols:
        row: list[tuple[float, str] | None] = []
        for f in faults:
            v = r.per_fault[f].policies.get(p)
            row.append(
                None
                if v is None or not v.U_den
                else (v.U / v.U_den, f"{v.U}/{v.U_den}")
            )
        cells.append(row)
    return heatmap(
        "Premature unsupported stop by assigned fault (incomplete checkpoints)",
        list(labels),
        faults,
        cells,
        legend="share premature (T1 is outside the primary scope)",
        cell_w=48,
        links=[[viewer_link(checkpoint="incomplete", fault=f, policy=p) for f in faults]
               for p in pols],
    )
