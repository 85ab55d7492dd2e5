"""Outputs: results.json, tables.md and a self-contained report.html (inline SVG, no network);
the tables and figures themselves are :mod:`runner.analysis._tables`.

Byte-identical for equal results: keys are sorted, numbers formatted at fixed precision, and no
output carries a timestamp, a path or a host name. Every output names the provider and says
SIMULATED plainly when the decisions came from the simulated provider.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path

from runner.analysis._closed_results import (
    CLOSED_FORMAT,
    ClosedLoopResults,
    ProviderFailures,
)
from runner.analysis._legend import legend_html
from runner.analysis._static import STATIC_FORMAT, StaticResults
from runner.analysis._tables import (
    Results,
    _closed_figures,
    _closed_tables,
    _counts,
    _html_table,
    _md_table,
    _static_figures,
    _static_tables,
    _Table,
)
from runner.canonical import JsonObject, atomic_write_all
from runner.errors import AnalysisError

__all__ = ["Results", "read_results", "render_outputs", "results_json_bytes", "write_outputs"]


def read_results(doc: JsonObject) -> Results:
    """A parsed results.json as its typed results (strict: see :class:`Record`)."""
    fmt = doc.get("format")
    if fmt == STATIC_FORMAT:
        return StaticResults.from_json(doc)
    if fmt == CLOSED_FORMAT:
        return ClosedLoopResults.from_json(doc)
    raise AnalysisError(f"unknown results format {fmt!r}")


def results_json_bytes(results: Results) -> bytes:
    """Pretty, key-sorted JSON (display only: digests use runner.canonical)."""
    text = json.dumps(results.to_json(), indent=2, sort_keys=True, ensure_ascii=False,  # noqa: TID251
                      allow_nan=False)
    return (text + "\n").encode("utf-8")


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


def _inputs_line(r: Results) -> str:
    return ", ".join(
        f"{k}={v}" for k, v in sorted(r.inputs.to_json().items())
        if not isinstance(v, dict | list)
    )


def _html(title: str, r: Results, figures: Sequence[str], tables: Sequence[_Table]) -> bytes:
    simulated = r.provider.simulated
    banner_cls = "sim" if simulated else "real"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style>",
        f"<script>{_SENTINEL_JS}</script>",
        "</head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<div class="banner {banner_cls}">{escape(r.provider_line)}</div>',
        *([f'<p class="banner sim">{escape(warning)}</p>']
          if (warning := failure_warning(r)) is not None else []),
        *([f'<p class="banner sim">{escape(r.simulator.note)}</p>']
          if r.simulator else []),
        '<div class="gates">'
        + "".join(
            f'<span class="gate {_gate_class(ok, simulated)}">'
            f'{escape(name)}: {escape(text)}</span>'
            for name, ok, text in r.gates()
        )
        + "</div>",
        f'<p class="note">Inputs: {escape(_inputs_line(r))}</p>',
        "<h2>Figures</h2>",
        '<div class="figs">' + "".join(figures) + "</div>",
    ]
    for t in tables:
        parts.append(f"<h2>{escape(t.name)}</h2>")
        parts.append(_html_table(t.head, t.rows))
        if t.note:
            parts.append(f'<p class="note">{escape(t.note)}</p>')
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


def _failures(r: Results) -> ProviderFailures | None:
    f = r.provider_failures if isinstance(r, ClosedLoopResults) else None
    return f if f is not None and f.total else None


def failure_warning(r: Results) -> str | None:
    """The line a report opens with when its store records provider failures (else None)."""
    f = _failures(r)
    if f is None:
        return None
    roles = _counts(f.by_role)
    return (f"This store records {f.total} provider failure(s) in {f.cells} cell(s): "
            f"{f.by_class.get('transport', 0)} transport (the API or the way to it failed), "
            f"{f.by_class.get('model_output', 0)} model output (by role: {roles}). They are in "
            "the denominator of every figure below; see \"Provider failures\".")


def failure_table(r: Results) -> _Table | None:
    """The "Provider failures" table (by class, kind, role and pipeline), or None if none."""
    f = _failures(r)
    if f is None:
        return None
    rows = [[what, str(k), str(n)] for what, counts in f.counted_by() for k, n in counts.items()]
    cells = f.cells_with_transport_failure
    note = (f"{f.cells} cell(s) carry a provider failure; with a transport failure: "
            + (", ".join(cells) if cells else "none") + ". A transport failure is kept here "
            "only under on_transport_failure = \"record\" (docs/providers.md).")
    return _Table("Provider failures", ["counted by", "value", "failed calls"], rows, note)


def accounting_table(r: Results) -> _Table | None:
    """The "Provider attempts and billed cost" table (every journaled attempt, failures by
    kind, halts and the billed cost beside the committed cells'), or None without one."""
    a = r.provider_accounting if isinstance(r, ClosedLoopResults) else None
    if a is None:
        return None
    sim = " (SIMULATED token counts)" if r.provider.simulated else ""
    rows = [["attempts", str(a.attempts)], ["retries", str(a.retries)],
            ["failed attempts", str(a.failed_attempts)],
            *[[f"failed: {k}", str(n)] for k, n in a.failures_by_kind.items()],
            ["attempts of cells not committed", str(a.orphan_attempts)],
            ["attempts not billed (HTTP error, no response)", str(a.unbilled_attempts)],
            ["billed attempts", str(a.billed_attempts)],
            ["billed cost, USD" + sim, f"{a.billed_usd:.4f}"],
            ["of which estimated (replies without usage), USD",
             f"{a.estimated_usd:.4f} ({a.estimated_attempts} attempts)"],
            ["committed cells' cost, USD" + sim, f"{a.committed_usd:.4f}"],
            ["halts", str(len(a.halts))],
            *[[f"halt {i}", f"{h.utc} at {h.cell_id} ({h.kind}): {h.reason}"]
              for i, h in enumerate(a.halts, 1)]]
    note = ("Every attempt of the store's journal, retried, failed and of cells that never "
            "committed included; an attempt is billed when the API answered it 2xx or its reply "
            "carried usage (docs/providers.md, \"Accounting\").")
    return _Table("Provider attempts and billed cost", ["what", "value"], rows, note)


def plan_table(r: Results) -> _Table | None:
    """The "Plan vs actual" table (``ect report --plan``), or None without a plan."""
    p = r.plan_vs_actual if isinstance(r, ClosedLoopResults) else None
    if p is None:
        return None

    def fmt(figure: str, v: float) -> str:
        return f"{v:.4f}" if figure == "cost_usd" else f"{v:.0f}"

    rows = [[row.figure, fmt(row.figure, row.min), fmt(row.figure, row.expected),
             fmt(row.figure, row.max), fmt(row.figure, row.actual),
             f"{row.actual / row.expected - 1:+.1%}" if row.expected else "n/a"]
            for row in p.rows]
    note = (f"The plan (ect plan --json, {p.cells} cells) is "
            + ("a SIMULATED pass with a live pilot's cells and usage" if p.pilot
               else "a SIMULATED pass (the simulated planner and critic)")
            + "; actual: every journaled attempt, the committed cells' tokens and the billed "
              "cost.")
    return _Table("Plan vs actual", ["figure", "plan min", "plan expected", "plan max",
                                     "actual", "actual vs expected"], rows, note)


def _markdown(title: str, r: Results, tables: Sequence[_Table]) -> bytes:
    out = [f"# {title}", "", f"**{r.provider_line}**", ""]
    warning = failure_warning(r)
    if warning is not None:
        out += [f"**{warning}**", ""]
    if r.simulator:
        out += [r.simulator.note, ""]
    out.append("Gates: " + "; ".join(f"{n}: {text}" for n, _, text in r.gates()))
    out.append("")
    for t in tables:
        out += [f"## {t.name}", "", _md_table(t.head, t.rows)]
        if t.note:
            out += [t.note, ""]
    return "\n".join(out).encode("utf-8")


def render_outputs(results: Results) -> dict[str, bytes]:
    """``{"results.json": ..., "tables.md": ..., "report.html": ...}`` for one analysis."""
    if isinstance(results, StaticResults):
        title = "ECT static study"
        tables, figures = _static_tables(results), _static_figures(results)
    elif isinstance(results, ClosedLoopResults):
        title = "ECT closed-loop study"
        tables, figures = _closed_tables(results), _closed_figures(results)
    else:
        raise AnalysisError(f"not an analysis result: {type(results).__name__}")
    if results.provider.simulated:
        title += " (simulated provider)"
    failures = failure_table(results)
    if failures is not None:
        tables = [*tables, failures]
    accounting = accounting_table(results)
    if accounting is not None:
        tables = [*tables, accounting]
    planned = plan_table(results)
    if planned is not None:
        tables = [*tables, planned]
    return {
        "results.json": results_json_bytes(results),
        "tables.md": _markdown(title, results, tables),
        "report.html": _html(title, results, figures, tables),
    }


def write_outputs(results: Results, out_dir: Path) -> dict[str, Path]:
    """Write the three outputs into ``out_dir`` (created if needed) as one: all or none of
    them replace what was there (:func:`runner.canonical.atomic_write_all`); returns their
    paths."""
    return write_files(out_dir, render_outputs(results))


def write_files(out_dir: Path, files: dict[str, bytes]) -> dict[str, Path]:
    """Write ``files`` (name -> bytes) into ``out_dir`` (created if needed), all or none."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / name for name in sorted(files)}
    atomic_write_all({paths[name]: files[name] for name in paths})
    return paths
