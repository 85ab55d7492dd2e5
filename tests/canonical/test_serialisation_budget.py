"""A ratchet on hand-written serialisation: records declare their fields once on
``runner.canonical.Record`` and derive ``to_json``/``from_json``, so the lines of hand-written
``to_json``/``from_json`` bodies and ``*_FIELDS`` lists in runner/ must not grow back.

Counted: every non-blank, non-comment line of a function named ``to_json``, ``from_json`` or ``_read_json``
(decorators and signature included) and of an assignment to a name ending in ``_FIELDS``, in
runner/ minus the mechanism itself (runner/canonical/_record.py, runner/analysis/_record.py).
Before the mechanism: 1,627 lines (157 methods, 18 ``_FIELDS`` lists).
"""

from __future__ import annotations

import ast
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[2] / "runner"
MECHANISM = {RUNNER / "canonical" / "_record.py", RUNNER / "analysis" / "_record.py"}
BUDGET = 29  # 641 when the ratchet was set, 469 at the start of the last round (issue 40: < 300)


def _lines(path: Path) -> int:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    counted: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        span: tuple[int, int] | None = None
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in (
                "to_json", "from_json", "_read_json"):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            span = (start, node.end_lineno or node.lineno)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in targets]
            if any(n.endswith("_FIELDS") for n in names):
                span = (node.lineno, node.end_lineno or node.lineno)
        if span is not None:
            counted.update(i for i in range(span[0], span[1] + 1)
                           if lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))
    return len(counted)


def test_hand_written_serialisation_stays_within_its_budget() -> None:
    per_file = {p: _lines(p) for p in sorted(RUNNER.rglob("*.py")) if p not in MECHANISM}
    total = sum(per_file.values())
    worst = sorted(per_file.items(), key=lambda kv: -kv[1])[:5]
    assert total <= BUDGET, (f"{total} hand-written to_json/from_json/_FIELDS lines (budget "
                             f"{BUDGET}); declare the fields on runner.canonical.Record instead; "
                             f"largest: {[(str(p.relative_to(RUNNER)), n) for p, n in worst]}")
