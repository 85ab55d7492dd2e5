"""The viewer's pages in a real browser at a 1024 px wide window (issue 29): the cell table shows
every column (none cut off at the right edge), and a bundle's Merkle section does not claim a
server check it never had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.control import StopReason
from runner.view import write_bundle
from tests.view._browser import browser

REPO = Path(__file__).resolve().parents[2]


def _widest_rows(bundle: Path) -> None:
    """Give every row of the bundle's cell table the widest value each column takes in the
    frozen 576-row study (the fixture's one world has short ids): the table must still fit."""
    path = bundle / "data" / "cells.js"
    prefix, rest = path.read_text("utf-8").split(",", 1)
    data = json.loads(rest.removesuffix(");\n"))
    sched = [json.loads(line) for line in
             (REPO / "schedules" / "v2.schedule.jsonl").read_text("utf-8").splitlines()]
    widest = {k: max((str(r[k]) for r in sched if r[k] is not None), key=len)
              for k in ("cell_id", "task_id", "family", "world_id", "checkpoint", "policy", "fault")}
    widest |= {"row": 576, "seed_index": 2, "outcome": "false_continuation", "turns": 4,
               "stop_reason": max((s.value for s in StopReason), key=len), "tool_calls": 3,
               "cost_usd": 0.0123456, "provider_failures": "12 (12 T)"}
    cols = data["columns"]
    data["rows"] = [[r[0], *(widest.get(c, v) for c, v in zip(cols[1:], r[1:], strict=True))]
                    for r in data["rows"]]
    path.write_text(prefix + "," + json.dumps(data) + ");\n", "utf-8")  # noqa: TID251

pytestmark = pytest.mark.chromium


def test_the_cell_table_fits_a_1024px_window_and_the_bundle_names_its_check(
        store: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    write_bundle(out, store=store)
    _widest_rows(out)
    with browser() as b:
        page = b.new_page(viewport={"width": 1024, "height": 768})
        page.goto((out / "index.html").as_uri() + "#/cells")
        page.wait_for_selector("body[data-ready='#/cells']")
        width = page.evaluate("document.documentElement.clientWidth")
        rights = page.locator("#celltable thead th").evaluate_all(
            "ths => ths.map(th => th.getBoundingClientRect().right)")
        assert len(rights) == 15  # CELL_COLUMNS, provider_failures included
        assert max(rights) <= width, (rights, width)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.goto((out / "index.html").as_uri() + "#/cell/3")
        page.wait_for_selector("#jsproof[data-ok]")
        labels = page.locator("#proof dt").all_inner_texts()
        assert "checked when the bundle was written" in labels and "server check" not in labels
