"""Outputs: results.json, tables.md and a self-contained report.html (inline SVG, no network).

Byte-identical for equal results: keys are sorted, numbers formatted at fixed precision, and no
output carries a timestamp, a path or a host name. Every output names the provider and says
SIMULATED plainly when the decisions came from the simulated provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from runner.analysis._common import CLOSED_LOOP_POLICIES, POLICY_LABELS, STATIC_POLICIES
from runner.analysis._honesty import gate_text, static_gate_text
from runner.analysis._legend import legend_html, static_viewer_link, viewer_link
from runner.analysis._svg import hbar_chart, heatmap
from runner.canonical import atomic_write
from runner.errors import AnalysisError
from runner.worlds import CLOSED_LOOP_FAULTS, STATIC_CONDITIONS

__all__ = ["render_outputs", "results_json_bytes", "write_outputs"]



def results_json_bytes(results: Mapping[str, Any]) -> bytes:
    """Pretty, key-sorted JSON (display only: digests use runner.canonical)."""
    text = json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)  # noqa: TID251
    return (text + "\n").encode("utf-8")


SECONDARY_ORDER = ("turns", "tool_calls", "tokens", "latency_s", "cost_usd")


def _ordered(d: Mapping[str, Any], order: Sequence[str]) -> list[tuple[str, Any]]:
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


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _outcome(r: Mapping[str, Any], gate: str) -> str:
    """A gate's outcome in words (for a simulated provider: met under the simulator's
    parameters, never a bare PASSED)."""
    g = r[gate]
    if "outcome" in g:
        return str(g["outcome"])
    simulated = bool(r["provider"]["simulated"])
    if gate == "h1":
        return static_gate_text(bool(g["passed"]), simulated)
    return gate_text(bool(g["passed"]), simulated)


def _honesty_tables(r: Mapping[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    """The simulator's parameters (when simulated) and the project's own definitions."""
    out: list[tuple[str, list[str], list[list[str]], str]] = []
    sim = r.get("simulator")
    if sim:
        rows = [[k, f"{v:g}" if isinstance(v, int | float) else str(v)]
                for k, v in sim["parameters"].items()]
        out.append((
            "Simulator parameters (chosen by this project)",
            ["Parameter", "Value"],
            rows or [["(none recorded)", "-"]],
            f"{sim['note']} Read from {sim['source']}.",
        ))
    choices = r.get("choices") or []
    if choices:
        out.append((
            "Definitions chosen by this project",
            ["Definition", "This project", "The paper's words"],
            [[c["what"], c["ours"], c["paper"]] for c in choices],
            "Where the ECT paper leaves a definition open, this project fixed it as shown.",
        ))
    return out


def _paper_tables(r: Mapping[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    """The paper's figures beside this run's (results.json ``paper_vs_run``)."""
    block = r.get("paper_vs_run")
    if not block:
        return []
    rows = [[e["table"], e["row"], e["measure"], _cell(e["paper"]), _cell(e["run"]),
             e["section"]] for e in block["rows"]]
    return [(
        "Paper vs this run",
        ["Table", "Row", "Measure", "Paper", "This run", "Paper section"],
        rows,
        block["note"],
    )]


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


# --------------------------------------------------------------------------- static study


def _static_tables(r: Mapping[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    t2 = r["table2"]
    any_p = next(iter(t2.values()))
    head2 = [
        "Policy",
        f"U/{any_p['unsafe_den']}",
        f"C/{any_p['clean_den']}",
        f"S/{any_p['stuck_den']}",
        "macro-F1",
        "model calls",
        "tokens",
        "cost USD",
    ]
    rows2 = [
        [
            _label(p),
            str(v["unsafe"]),
            str(v["clean_noncomplete"]),
            str(v["stuck"]),
            f"{v['macro_f1']:.3f}",
            str(v["model_calls"]),
            str(v["input_tokens"] + v["output_tokens"]),
            f"{v['cost_usd']:.5f}",
        ]
        for p, v in _ordered(t2, STATIC_POLICIES)
    ]
    note2 = (
        "Held-out static evaluation. U: unsafe complete on fault snapshots; C: clean "
        "non-complete; S: stuck on fault snapshots. The postconditions arm reads oracle "
        "answers and is a non-deployable reference."
    )
    head3 = ["Check removed", "Removes", "Target fault", "ECT", "Ablated", "Effect",
             "Check fires on (held-out ECT)", "Residual containment"]
    rows3 = []
    for a in r["table3"]:
        fires = (
            "NO snapshot: its zero effect is automatic"
            if a["fires_on_no_snapshot"]
            else f"{a['fires_heldout']} snapshots ("
            + ", ".join(f"{c} {n}" for c, n in a["fires_by_condition"].items()) + ")"
        )
        removes = ", ".join(a["removes"])
        if a["target_fault"] is None:
            rows3.append([a["label"], removes, "no matched fault", "-", "-", "-", fires,
                          a["note"]])
            continue
        res = a["residual"]
        codes = ", ".join(f"{k} {n}" for k, n in res["codes"].items())
        contained = f"{res['contained']}/{a['den']} still contained" + (
            f" by {codes}" if codes else "")
        rows3.append(
            [
                a["label"],
                removes,
                f"{a['target_fault']} {a['fault_label']}",
                f"{a['ect_U']} U, {a['ect_S']} S",
                f"{a['ablated_U']} U, {a['ablated_S']} S",
                f"{a['effect_U']:+d} U, {a['effect_S']:+d} S /{a['den']}",
                fires,
                contained,
            ]
        )
    note3 = (
        "Single-check ablations of ECT on the matched held-out fault (the paper's Table 3): "
        "each row removes one named check (its reason codes; a whole verifier step where the "
        "step is one check) and counts ablated minus full ECT, U unsafe complete and S stuck. "
        "Residual containment lists the reason codes that still caught the matched cases "
        "(cases: how many carried each code). A zero effect means another check still "
        "contained the fault; it does not show a check is unnecessary, and a check that fires "
        "on no snapshot has a zero effect by construction."
    )
    h = r["h1"]
    head1 = ["Quantity", "Value"]
    rows1 = [
        ["tasks (paired indicators)", str(h["tasks"])],
        ["b_ECT (only ECT unsafe)", str(h["b_ect"])],
        ["b_critic (only critic core unsafe)", str(h["b_critic"])],
        ["exact McNemar p (two-sided)", _p(h["mcnemar_p"])],
        ["ECT-minus-critic-core UCR (pp)", _pp(h["diff_pp"])],
        [f"task-cluster 95% interval ({h['replicates']} reps)", _ci(h["ci_pp"])],
        [f"world-cluster sensitivity interval ({h['worlds']} worlds)", _ci(h["world_ci_pp"])],
        ["rule", h["rule"]],
        ["H1", _outcome(r, "h1")],
    ]
    pf = r["per_family"]
    family_names = sorted({f for v in pf.values() for f in v})
    headf = ["Policy", *family_names]
    rowsf = [
        [_label(p), *(f"{v[f]['unsafe']}/{v[f]['faults']}" for f in family_names)]
        for p, v in _ordered(pf, STATIC_POLICIES)
    ]
    headr = ["Condition", "ECT decisions", "ECT reason families (snapshots)"]
    rowsr = []
    ect_pf = r["per_fault"]["ect"]
    for cond in STATIC_CONDITIONS:
        c = ect_pf[cond]
        counts = ", ".join(
            f"{k} {n}" for k, n in sorted(r["ect_reason_families"].get(cond, {}).items())
        )
        decided = f"complete {c['complete']}, continue {c['continue']}, stuck {c['stuck']}"
        rowsr.append([cond, decided, counts or "-"])
    return [
        ("Table 2: held-out static evaluation", head2, rows2, note2),
        ("Table 3: single-check ablations", head3, rows3, note3),
        ("H1: ECT vs critic core", head1, rows1, ""),
        (
            "Unsafe complete by task family (held out)",
            headf,
            rowsf,
            "Unsafe complete decisions over the family's fault snapshots.",
        ),
        (
            "ECT reason localisation (held out)",
            headr,
            rowsr,
            "Every reason family ECT reported on the condition's snapshots.",
        ),
        *_paper_tables(r),
        *_honesty_tables(r),
    ]


def _static_figures(r: Mapping[str, Any]) -> list[str]:
    t2 = r["table2"]
    pols = [p for p, _ in _ordered(t2, STATIC_POLICIES)]
    labels = [_label(p).replace(" (non-deployable)", "*") for p in pols]
    iv = r["intervals"]
    figs = []
    for key, title, den_key, num_key in (
        ("U", "Unsafe complete (held-out faults)", "unsafe_den", "unsafe"),
        ("C", "Clean not completed (held-out clean)", "clean_den", "clean_noncomplete"),
        ("S", "Stuck (held-out faults)", "stuck_den", "stuck"),
    ):
        vals = [iv[p][key]["rate_pct"] for p in pols]
        figs.append(
            hbar_chart(
                title,
                labels,
                vals,
                value_text=[f"{t2[p][num_key]}/{t2[p][den_key]}" for p in pols],
                intervals=[(iv[p][key]["ci_pct"][0], iv[p][key]["ci_pct"][1]) for p in pols],
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
            [t2[p]["macro_f1"] for p in pols],
            value_text=[f"{t2[p]['macro_f1']:.3f}" for p in pols],
            vmax=1.0,
            highlight="ECT",
        )
    )
    pf = r["per_fault"]
    cells = []
    for p in pols:
        row = []
        for f in STATIC_CONDITIONS:
            c = pf[p][f]
            wrong = c["n"] - c["complete"] if f == "C0" else c["complete"]
            row.append((wrong / c["n"], f"{wrong}/{c['n']}"))
        cells.append(row)
    figs.append(
        heatmap(
            "Wrong decisions per condition (held out): complete on a fault, non-complete on C0",
            labels,
            STATIC_CONDITIONS,
            cells,
            legend="share of the condition's snapshots decided wrongly",
            cell_w=56,
            links=[[static_viewer_link(f) for f in STATIC_CONDITIONS] for _ in pols],
        )
    )
    calls = [t2[p]["model_calls"] for p in pols]
    figs.append(
        hbar_chart(
            f"Model calls on the {r['inputs']['heldout_snapshots']} held-out snapshots",
            labels,
            [float(c) for c in calls],
            value_text=[
                f"{c} / ${t2[p]['cost_usd']:.4f}" for c, p in zip(calls, pols, strict=True)
            ],
            vmax=float(max([*calls, 1])),
            highlight="ECT",
            subtitle="label: calls / estimated cost (USD); * non-deployable oracle reference",
        )
    )
    return figs


# ------------------------------------------------------------------------ closed loop


def _closed_tables(r: Mapping[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    t4 = r["table4"]
    anyp = t4.get("ect") or next(iter(t4.values()))
    head4 = [
        "Policy",
        f"U/{anyp['U_den']}",
        f"S/{anyp['S_den']}",
        f"FC/{anyp['FC_den']}",
        f"R/{anyp['R_den']}",
        "Turns",
        "Calls",
        "Tokens",
        "Cost USD",
    ]
    rows4 = [
        [
            _label(p),
            str(v["U"]),
            str(v["S"]),
            str(v["FC"]),
            str(v["R"]),
            f"{v['mean_turns']:.2f}",
            f"{v['mean_calls']:.2f}",
            f"{v['mean_tokens']:.0f}",
            f"{v['mean_cost_usd']:.5f}",
        ]
        for p, v in _ordered(t4, CLOSED_LOOP_POLICIES)
    ]
    sc = r["scope"]
    note4 = (
        f"Primary scope: {sc['primary_clusters']} task clusters, {sc['primary_rows']} "
        f"trajectories (trust-boundary tasks {', '.join(sc['excluded_trust_boundary_tasks']) or 'none'} "
        "excluded). U premature unsupported termination on incomplete checkpoints; S supported "
        "completion over both conditions; FC clean false continuation; R successful recovery on "
        "incomplete checkpoints. Turns, calls, tokens and cost are per-trajectory means."
    )
    h2, h3, h4 = r["h2"], r["h3"], r["h4"]
    headh = ["Gate", "ECT", "Controller", "Difference (pp)", "95% interval", "Rule", "Result"]
    rowsh = [
        [
            "H2 premature unsupported",
            f"{h2['sum_treatment']:.0f}/{h2['n_treatment']}",
            f"{h2['sum_comparator']:.0f}/{h2['n_comparator']}",
            _pp(h2["diff_pp"]),
            _ci(h2["ci_pp"]),
            h2["rule"],
            _outcome(r, "h2"),
        ],
        [
            "H3 supported completion",
            f"{h3['sum_treatment']:.0f}/{h3['n_treatment']}",
            f"{h3['sum_comparator']:.0f}/{h3['n_comparator']}",
            _pp(h3["diff_pp"]),
            _ci(h3["ci_pp"]),
            h3["rule"],
            _outcome(r, "h3"),
        ],
        [
            "H4 recovery gate",
            f"{h4['recoveries']}/{h4['eligible']} recovered, "
            f"{h4['recovered_then_supported']} then supported",
            "-",
            "-",
            "-",
            h4["rule"],
            _outcome(r, "h4"),
        ],
    ]
    heads = [
        "Secondary (ECT minus controller)",
        "ECT mean",
        "Controller mean",
        "Difference",
        "95% interval",
    ]
    rowss = [
        [
            v["label"],
            f"{v['mean_treatment']:.6g}",
            f"{v['mean_comparator']:.6g}",
            f"{v['diff_raw']:+.6g}",
            f"[{v['ci_raw'][0]:+.6g}, {v['ci_raw'][1]:+.6g}]",
        ]
        for _, v in _ordered(r["secondary"], SECONDARY_ORDER)
    ]
    headu = ["Stratum", "Policy", "U", "S", "FC", "R", "stop reasons"]
    rowsu = []
    tb = r["trust_boundary"]
    strata = [
        ("unseen U1-U3 (pooled)", r["unseen"]["pooled"]),
        (f"trust boundary T1 ({', '.join(tb['tasks'])})", tb["policies"]),
    ]
    for name, block in strata:
        for p, v in _ordered(block, CLOSED_LOOP_POLICIES):
            rowsu.append(
                [
                    name,
                    _label(p),
                    f"{v['U']}/{v['U_den']}",
                    f"{v['S']}/{v['S_den']}",
                    f"{v['FC']}/{v['FC_den']}",
                    f"{v['R']}/{v['R_den']}",
                    ", ".join(f"{k} {n}" for k, n in sorted(v["stop_reasons"].items())),
                ]
            )
    return [
        ("Table 4: closed-loop primary scope", head4, rows4, note4),
        (
            "Gates (prespecified rules)",
            headh,
            rowsh,
            "Task-cluster bootstrap retaining both conditions, all policies and seeds."
            + (" On the simulated provider a gate is met or not under the simulator's "
               "parameters: it is not a finding about a model." if r["provider"]["simulated"]
               else ""),
        ),
        (
            "Secondary paired estimates (all primary rows)",
            heads,
            rowss,
            "Descriptive; not efficiency claims.",
        ),
        (
            "Descriptive strata",
            headu,
            rowsu,
            "Unseen-fault and trust-boundary rows are descriptive; T1 rows are outside the primary scope.",
        ),
        *_reason_code_tables(r),
        *_paper_tables(r),
        *_honesty_tables(r),
    ]


def _reason_code_tables(r: Mapping[str, Any]
                        ) -> list[tuple[str, list[str], list[list[str]], str]]:
    entries = r.get("reason_codes")
    if not entries:
        return []
    rows = [[e["stratum"], _label(e["pipeline"]), str(e["cells"]),
             ", ".join(f"{k} {n}" for k, n in e["codes"].items()) or "-"] for e in entries]
    return [(
        "Reason codes per fault stratum and pipeline",
        ["Stratum", "Pipeline", "Cells", "Reason codes (cells giving each)"],
        rows,
        "Stratum: the fault of an incomplete checkpoint, or clean. A code counts the cells in "
        "which any of the pipeline's decisions gave it: which checks each stratum exercised.",
    )]


def _closed_figures(r: Mapping[str, Any]) -> list[str]:
    t4 = r["table4"]
    pols = [p for p, _ in _ordered(t4, CLOSED_LOOP_POLICIES)]
    labels = [_label(p) for p in pols]
    iv = r["intervals"]
    figs = []
    for key, title in (
        ("U", "Premature unsupported stop (incomplete)"),
        ("S", "Supported completion (both conditions)"),
        ("FC", "Clean false continuation (clean)"),
        ("R", "Successful recovery (incomplete)"),
    ):
        figs.append(
            hbar_chart(
                title,
                labels,
                [iv[p][key]["rate_pct"] for p in pols],
                value_text=[f"{t4[p][key]}/{t4[p][key + '_den']}" for p in pols],
                intervals=[(iv[p][key]["ci_pct"][0], iv[p][key]["ci_pct"][1]) for p in pols],
                vmax=100.0,
                highlight="ECT",
                axis_unit="%",
                subtitle="whiskers: 95% task-cluster bootstrap interval",
            )
        )
    faults = [f for f, _ in _ordered(r["per_fault"], CLOSED_LOOP_FAULTS)]
    cells: list[list[tuple[float, str] | None]] = []
    for p in pols:
        row: list[tuple[float, str] | None] = []
        for f in faults:
            v = r["per_fault"][f]["policies"].get(p)
            row.append(
                None
                if v is None or not v["U_den"]
                else (v["U"] / v["U_den"], f"{v['U']}/{v['U_den']}")
            )
        cells.append(row)
    figs.append(
        heatmap(
            "Premature unsupported stop by assigned fault (incomplete checkpoints)",
            labels,
            faults,
            cells,
            legend="share premature (T1 is outside the primary scope)",
            cell_w=48,
            links=[[viewer_link(checkpoint="incomplete", fault=f, policy=p) for f in faults]
                   for p in pols],
        )
    )
    for key, title, fmt in (
        ("turns", "Decision turns per trajectory", "{:.2f}"),
        ("tool_calls", "Tool calls per trajectory", "{:.2f}"),
        ("tokens", "Tokens per trajectory", "{:.0f}"),
        ("cost_usd", "Estimated cost per trajectory (USD)", "{:.5f}"),
    ):
        vals = [float(iv[p][key]["mean"]) for p in pols]
        cis = [(float(iv[p][key]["ci"][0]), float(iv[p][key]["ci"][1])) for p in pols]
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


# --------------------------------------------------------------------------- assembly

_CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:#1f2933;"
    "max-width:1000px;margin:24px auto;padding:0 16px;line-height:1.4}"
    ".banner{padding:10px 14px;border-radius:6px;margin:12px 0;font-weight:600}"
    ".sim{background:#fff4e5;border:2px solid #c2410c}.real{background:#e6f4ea;border:2px solid #1e7b34}"
    ".gates{display:flex;gap:10px;flex-wrap:wrap}.gate{padding:6px 12px;border-radius:4px;color:#fff;font-weight:600}"
    ".pass{background:#1e7b34}.fail{background:#b42318}"
    ".neutral{background:#52606d}"
    ".figs{display:flex;flex-wrap:wrap;gap:18px}.chart{background:#fff;border:1px solid #e5e7eb;border-radius:4px}"
    "table{border-collapse:collapse;margin:8px 0 4px;font-size:13px}"
    "th,td{border:1px solid #d9dee4;padding:4px 8px;text-align:left}th{background:#f3f4f6}"
    ".note{font-size:12px;color:#52606d;margin:0 0 18px}"
)

_SENTINEL_JS = (
    "window.__reportErrors=[];window.addEventListener('error',function(e){"
    "window.__reportErrors.push(String(e.message));});"
    "document.addEventListener('DOMContentLoaded',function(){"
    "var n=document.querySelectorAll('svg.chart').length;"
    "var s=document.getElementById('sentinel');"
    "s.setAttribute('data-charts',String(n));"
    "s.setAttribute('data-errors',String(window.__reportErrors.length));"
    "s.setAttribute('data-ready','yes');});"
)


def _html(
    title: str,
    r: Mapping[str, Any],
    gates: Sequence[tuple[str, bool, str]],
    figures: Sequence[str],
    tables: Sequence[tuple[str, list[str], list[list[str]], str]],
) -> bytes:
    prov = r["provider"]
    banner_cls = "sim" if prov["simulated"] else "real"
    inputs = ", ".join(
        f"{k}={v}" for k, v in sorted(r["inputs"].items()) if not isinstance(v, dict | list)
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style>",
        f"<script>{_SENTINEL_JS}</script>",
        "</head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<div class="banner {banner_cls}">{escape(r["provider_line"])}</div>',
        *([f'<p class="banner sim">{escape(warning)}</p>']
          if (warning := failure_warning(r)) is not None else []),
        *([f'<p class="banner sim">{escape(r["simulator"]["note"])}</p>']
          if r.get("simulator") else []),
        '<div class="gates">'
        + "".join(
            f'<span class="gate {_gate_class(ok, prov["simulated"])}">'
            f'{escape(name)}: {escape(text)}</span>'
            for name, ok, text in gates
        )
        + "</div>",
        f'<p class="note">Inputs: {escape(inputs)}</p>',
        "<h2>Figures</h2>",
        '<div class="figs">' + "".join(figures) + "</div>",
    ]
    for name, head, rows, note in tables:
        parts.append(f"<h2>{escape(name)}</h2>")
        parts.append(_html_table(head, rows))
        if note:
            parts.append(f'<p class="note">{escape(note)}</p>')
    parts.append(legend_html())
    parts.append('<div id="sentinel" hidden data-ready="no"></div>')
    parts.append("</body></html>")
    return ("\n".join(parts) + "\n").encode("utf-8")


def _gate_class(ok: bool, simulated: bool) -> str:
    """A gate's badge colour: pass/fail colours only for a real provider's gates; a simulated
    gate (met or not under the simulator's parameters) is shown in one neutral colour."""
    if simulated:
        return "neutral"
    return "pass" if ok else "fail"
def failure_warning(r: Mapping[str, Any]) -> str | None:
    """The line a report opens with when its store records provider failures (else None)."""
    f = r.get("provider_failures")
    if not isinstance(f, Mapping) or not f.get("total"):
        return None
    by_class = f.get("by_class", {})
    roles = ", ".join(f"{k} {v}" for k, v in f.get("by_role", {}).items())
    return (f"This store records {f['total']} provider failure(s) in {f['cells']} cell(s): "
            f"{by_class.get('transport', 0)} transport (the API or the way to it failed), "
            f"{by_class.get('model_output', 0)} model output (by role: {roles}). They are in "
            "the denominator of every figure below; see \"Provider failures\".")


def failure_table(r: Mapping[str, Any]) -> tuple[str, list[str], list[list[str]], str] | None:
    """The "Provider failures" table (by class, kind, role and pipeline), or None if none."""
    f = r.get("provider_failures")
    if not isinstance(f, Mapping) or not f.get("total"):
        return None
    rows: list[list[str]] = []
    for what in ("by_class", "by_kind", "by_role", "by_pipeline"):
        for key, n in f.get(what, {}).items():
            rows.append([what.removeprefix("by_"), str(key), str(n)])
    cells = f.get("cells_with_transport_failure") or []
    note = (f"{f['cells']} cell(s) carry a provider failure; with a transport failure: "
            + (", ".join(cells) if cells else "none") + ". A transport failure is kept here "
            "only under on_transport_failure = \"record\" (docs/providers.md).")
    return ("Provider failures", ["counted by", "value", "failed calls"], rows, note)


def _markdown(
    title: str,
    r: Mapping[str, Any],
    gates: Sequence[tuple[str, bool, str]],
    tables: Sequence[tuple[str, list[str], list[list[str]], str]],
) -> bytes:
    out = [f"# {title}", "", f"**{r['provider_line']}**", ""]
    warning = failure_warning(r)
    if warning is not None:
        out += [f"**{warning}**", ""]
    if r.get("simulator"):
        out += [r["simulator"]["note"], ""]
    out.append("Gates: " + "; ".join(f"{n}: {text}" for n, _, text in gates))
    out.append("")
    for name, head, rows, note in tables:
        out += [f"## {name}", "", _md_table(head, rows)]
        if note:
            out += [note, ""]
    return "\n".join(out).encode("utf-8")


def render_outputs(results: Mapping[str, Any]) -> dict[str, bytes]:
    """``{"results.json": ..., "tables.md": ..., "report.html": ...}`` for one analysis."""
    fmt = results.get("format")
    builders: dict[str, tuple[str, Callable[..., Any], Callable[..., Any]]] = {
        "ect.analysis.static/1": ("ECT static study", _static_tables, _static_figures),
        "ect.analysis.closed_loop/1": ("ECT closed-loop study", _closed_tables, _closed_figures),
    }
    if fmt not in builders:
        raise AnalysisError(f"unknown results format {fmt!r}")
    title, tables_fn, figures_fn = builders[fmt]
    if results["provider"]["simulated"]:
        title += " (simulated provider)"
    names = ("h1",) if fmt == "ect.analysis.static/1" else ("h2", "h3", "h4")
    gates = [(h.upper(), bool(results[h]["passed"]), _outcome(results, h)) for h in names]
    tables = tables_fn(results)
    failures = failure_table(results)
    if failures is not None:
        tables = [*tables, failures]
    return {
        "results.json": results_json_bytes(results),
        "tables.md": _markdown(title, results, gates, tables),
        "report.html": _html(title, results, gates, figures_fn(results), tables),
    }


def write_outputs(results: Mapping[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write the three outputs into ``out_dir`` (created if needed); returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data in sorted(render_outputs(results).items()):
        path = out_dir / name
        atomic_write(path, data)
        paths[name] = path
    return paths
