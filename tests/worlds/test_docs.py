"""docs/protocol.md states what the code does: reason families per fault, assignment, layout."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from runner.ect import verify
from runner.worlds import FAMILIES, closed_loop_tasks, fault_assignment, static_grid

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _table_after(header: str) -> list[list[str]]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_reason_family_table_matches_the_verifier() -> None:
    seen: dict[str, Counter[str]] = defaultdict(Counter)
    for s in static_grid():
        d = verify(s.task.contract, s.ledger, s.certificate)
        seen[s.condition]["+".join(sorted(d.families)) or "none"] += 1
    documented = {row[0]: row[1] for row in _table_after("| fault | families (snapshots) |")}
    assert set(documented) == set(seen)
    for condition, counts in seen.items():
        parsed = dict(re.findall(r"([a-z+]+): (\d+)", documented[condition]))
        assert {k: int(v) for k, v in parsed.items()} == dict(counts), condition


def test_fault_assignment_table_matches_the_code() -> None:
    rows = _table_after(
        "| world | lookup | aggregation | top_k | temporal_comparison | hierarchy_join | missing_data |"
    )
    documented: dict[str, list[str]] = defaultdict(list)
    for world, *faults in rows:
        for family, fault in zip(FAMILIES, faults, strict=True):
            documented[fault].append(f"{world}-{family}-0")
    order = {t.task_id: i for i, t in enumerate(closed_loop_tasks())}
    assert {f: sorted(ids, key=order.get) for f, ids in documented.items()} == fault_assignment()


def test_commands_named_in_the_doc_exist() -> None:
    text = DOC.read_text(encoding="utf-8")
    for needle in (
        "python tests/worlds/regenerate_golden.py",
        "ect tasks export",
        "ect tasks manifest --json",
    ):
        assert needle in text
    assert (DOC.parents[1] / "tests" / "worlds" / "regenerate_golden.py").is_file()
