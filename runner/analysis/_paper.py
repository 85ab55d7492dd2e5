"""The ECT paper's own figures beside the run's: the "paper vs this run" tables.

The paper's figures are data, not code: ``runner/analysis/paper.toml`` holds Table 2, Table 3,
H1 (with its six-world interval), Table 4, H2-H4, the unseen-fault strata and the per-trajectory
cost deltas as the paper prints them, each with the section it comes from. Every
results.json carries ``"paper_vs_run"`` (rows of table, row, measure, the paper's figure, this
run's, the section), and tables.md and report.html render it, so a reader sees where this run
(on the simulated provider: the simulator's parameters) departs from the paper.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from runner.analysis._common import POLICY_LABELS
from runner.analysis._record import Record
from runner.canonical import JsonObject
from runner.errors import AnalysisError

if TYPE_CHECKING:
    from runner.analysis._closed_results import H2Gate, H3Gate, H4Gate, Table4Row
    from runner.analysis._static import H1Gate, Table2Row, Table3Row

__all__ = [
    "PAPER_NOTE",
    "PaperRow",
    "PaperVsRun",
    "closed_paper_vs_run",
    "paper_figures",
    "static_paper_vs_run",
]

PAPER_NOTE = (
    "The paper's figures come from its own runs (Gemini 2.5 Flash); this run's come from the "
    "provider named above. On the simulated provider the side by side shows where the "
    "simulator, with its parameters, departs from the paper; it does not test the paper."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PaperRow(Record):
    """One measure: the paper's figure beside this run's, and the section it comes from."""

    table: str
    row: str
    measure: str
    paper: int | float | str
    run: int | float | str
    section: str

    def cells(self) -> list[str]:
        """The row as table cells (Table, Row, Measure, Paper, This run, Paper section)."""
        return [self.table, self.row, self.measure, _cell(self.paper), _cell(self.run),
                self.section]


def _cell(v: int | float | str) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


@dataclass(frozen=True, slots=True, kw_only=True)
class PaperVsRun(Record):
    """results.json's ``"paper_vs_run"``: the note and the rows."""

    note: str
    rows: tuple[PaperRow, ...]


@functools.cache
def paper_figures() -> JsonObject:
    """The paper's figures (``runner/analysis/paper.toml``), parsed once."""
    text = resources.files("runner.analysis").joinpath("paper.toml").read_text(encoding="utf-8")
    doc = tomllib.loads(text)
    if doc.get("format") != "ect.paper-figures/1":
        raise AnalysisError("runner/analysis/paper.toml: unexpected format")
    return doc


def _row(table: str, section: str, row: str, measure: str, paper: int | float | str,
         run: int | float | str) -> PaperRow:
    return PaperRow(table=table, row=row, measure=measure, paper=paper, run=run,
                    section=section)


def _gate(passed: bool) -> str:
    return "passed" if passed else "not passed"


def static_paper_vs_run(table2: Mapping[str, Table2Row], table3: Sequence[Table3Row],
                        h1: H1Gate) -> tuple[PaperRow, ...]:
    """Table 2, Table 3 and H1: the paper's figures beside this run's."""
    paper = paper_figures()
    out: list[PaperRow] = []
    t2, sec = paper["table2"], paper["table2"]["section"]
    for policy, p in t2["policies"].items():
        v = table2.get(policy)
        if v is None:
            continue
        label = POLICY_LABELS.get(policy, policy)
        out += [
            _row("Table 2", sec, label, f"U/{v.unsafe_den}", p["U"], v.unsafe),
            _row("Table 2", sec, label, f"C/{v.clean_den}", p["C"], v.clean_noncomplete),
            _row("Table 2", sec, label, f"S/{v.stuck_den}", p["S"], v.stuck),
            _row("Table 2", sec, label, "macro-F1", f"{p['macro_f1']:.3f}",
                 f"{v.macro_f1:.3f}"),
        ]
    t3, sec = paper["table3"], paper["table3"]["section"]
    by_check = {e.check: e for e in table3}
    for check, p in t3["checks"].items():
        e = by_check.get(check)
        if e is None or e.ablation is None:
            continue
        out.append(_row("Table 3", sec, f"{e.label} ({p['fault']})",
                        f"effect {p['measure']}/{e.ablation.den}", p["effect"],
                        e.ablation.effect))
    p1, sec = paper["h1"], paper["h1"]["section"]
    out += [
        _row("H1", sec, "ECT vs critic core", "unsafe complete (ECT, critic core)",
             f"{p1['ect_unsafe']}, {p1['critic_unsafe']}",
             f"{h1.ect_unsafe}, {h1.critic_unsafe}"),
        _row("H1", sec, "ECT vs critic core", "McNemar b (ECT, critic core)",
             f"{p1['b_ect']}, {p1['b_critic']}", f"{h1.b_ect}, {h1.b_critic}"),
        _row("H1", sec, "ECT vs critic core", "exact McNemar p", p1["mcnemar_p"],
             h1.mcnemar_p),
        _row("H1", sec, "ECT vs critic core", "UCR difference, pp [95% task-cluster]",
             _est(p1["diff_pp"], p1["ci_pp"]), _est(h1.diff_pp, h1.ci_pp)),
        _row("H1", sec, "ECT vs critic core", "world-cluster sensitivity interval (6 worlds), pp",
             _ci(p1["world_ci_pp"]), _ci(h1.world_ci_pp)),
        _row("H1", sec, "ECT vs critic core", "gate", _gate(bool(p1["passed"])), h1.outcome),
    ]
    return tuple(out)


def _est(x: float, ci: Sequence[float]) -> str:
    return f"{x:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _ci(ci: Sequence[float]) -> str:
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


# The secondary estimates the paper gives per trajectory (ECT minus controller), in its order,
# with how each is printed.
_SECONDARY: tuple[tuple[str, str, str], ...] = (
    ("turns", "decision turns", "{:+.2f}"),
    ("tool_calls", "tool calls", "{:+.3f}"),
    ("tokens", "tokens (input + output)", "{:+,.0f}"),
    ("latency_s", "provider seconds", "{:+.2f}"),
    ("cost_usd", "estimated cost (USD)", "{:+.5f}"),
)


def closed_paper_vs_run(table4: Mapping[str, Table4Row], h2: H2Gate, h3: H3Gate, h4: H4Gate,
                        unseen: Mapping[str, Table4Row] | None = None,
                        secondary: Mapping[str, float] | None = None,
                        ) -> tuple[PaperRow, ...]:
    """Table 4, H2-H4, the unseen-fault strata (``unseen``: the pooled U1-U3 rows per policy)
    and the per-trajectory cost deltas (``secondary``: ECT minus controller per measure): the
    paper's figures beside this run's."""
    paper = paper_figures()
    out: list[PaperRow] = []
    t4, sec = paper["table4"], paper["table4"]["section"]
    for policy, p in t4["policies"].items():
        v = table4.get(policy)
        if v is None:
            continue
        label = POLICY_LABELS.get(policy, policy)
        for key in ("U", "S", "FC", "R"):
            n, den = v.count(key)
            out.append(_row("Table 4", sec, label, f"{key}/{den}",
                            f"{p[key]}/{p[key + '_den']}", f"{n}/{den}"))
        out += [
            _row("Table 4", sec, label, "turns (mean)", f"{p['mean_turns']:.2f}",
                 f"{v.mean_turns:.2f}"),
            _row("Table 4", sec, label, "calls (mean)", f"{p['mean_calls']:.2f}",
                 f"{v.mean_calls:.2f}"),
        ]
    for name, h, measure in (("H2", h2, "premature unsupported"),
                             ("H3", h3, "supported completion")):
        p = paper[name.lower()]
        sec = p["section"]
        out += [
            _row(name, sec, "ECT vs controller", f"{measure} (ECT, controller)",
                 f"{p['ect']}/{p['den']}, {p['controller']}/{p['den']}",
                 f"{h.paired.sum_treatment:g}/{h.paired.n_treatment}, "
                 f"{h.paired.sum_comparator:g}/{h.paired.n_comparator}"),
            _row(name, sec, "ECT vs controller", "difference, pp [95% task-cluster]",
                 _est(p["diff_pp"], p["ci_pp"]), _est(h.diff_pp, h.ci_pp)),
            _row(name, sec, "ECT vs controller", "gate", _gate(bool(p["passed"])), h.outcome),
        ]
    p4, sec = paper["h4"], paper["h4"]["section"]
    out += [
        _row("H4", sec, "ECT", "recoveries / eligible incomplete",
             f"{p4['recoveries']}/{p4['eligible']}", f"{h4.recoveries}/{h4.eligible}"),
        _row("H4", sec, "ECT", "recovered, then supported", p4["recovered_then_supported"],
             h4.recovered_then_supported),
        _row("H4", sec, "ECT", "gate", _gate(bool(p4["passed"])), h4.outcome),
    ]
    pu, sec = paper["unseen"], paper["unseen"]["section"]
    for policy, p in pu["policies"].items():
        v = (unseen or {}).get(policy)
        if v is None:
            continue
        label = POLICY_LABELS.get(policy, policy)
        for key in ("U", "S"):
            n, den = v.count(key)
            out.append(_row("Unseen U1-U3", sec, label, f"{key}/{den}",
                            f"{p[key]}/{p[key + '_den']}", f"{n}/{den}"))
    ps, sec = paper["secondary"], paper["secondary"]["section"]
    for key, label, fmt in _SECONDARY:
        if secondary is None or key not in secondary:
            continue
        out.append(_row("Cost per trajectory", sec, "ECT minus controller", label,
                        fmt.format(ps[key]), fmt.format(secondary[key])))
    return tuple(out)
