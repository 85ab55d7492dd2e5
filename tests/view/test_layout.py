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


# Every text node of the table, cut into the parts a line may break between (whitespace and
# after _ : / -); a part whose glyphs lie on more than one line was broken mid-word.
_BROKEN = """() => {
  const out = [];
  const walker = document.createTreeWalker(document.querySelector('#cellbody'), NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const re = /[^\\s_:\\/-]+/g; let m;
    while ((m = re.exec(n.data))) {
      const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
      const tops = new Set(Array.from(r.getClientRects()).map(x => Math.round(x.top)));
      if (tops.size > 1) out.push(m[0] + ' in ' + n.data);
    }
  }
  return out;
}"""


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_cell_table_breaks_no_word_or_number(store: Path, tmp_path: Path, width: int) -> None:
    """Issue 39: at 1280 px the table broke words mid-word ("controlle r", "0.0011 2")."""
    out = tmp_path / "bundle"
    write_bundle(out, store=store)
    _widest_rows(out)
    with browser() as b:
        page = b.new_page(viewport={"width": width, "height": 800})
        page.goto((out / "index.html").as_uri() + "#/cells")
        page.wait_for_selector("body[data-ready='#/cells']")
        assert page.locator("#cellbody tr").count() == 16
        assert page.evaluate(_BROKEN) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_every_outcome_has_a_colour_and_a_legend(store: Path, tmp_path: Path) -> None:
    """Issue 39: "unsupported" had no colour while "premature" was red."""
    from runner.view._model import UNREADABLE

    labels = {"supported", "premature", "unsupported", "false_continuation", "stuck",
              "not_completed", UNREADABLE}
    # the labels outcome_label can give (its source names each), and the damaged record's
    src = (REPO / "runner" / "view" / "_model.py").read_text("utf-8")
    body = src.split("def outcome_label", 1)[1].split("\n\n\n", 1)[0]
    assert set(__import__("re").findall(r'"([a-z_]+)"', body)) - {"complete"} == labels - {UNREADABLE}
    out = tmp_path / "bundle"
    write_bundle(out, store=store)
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 800})
        page.goto((out / "index.html").as_uri() + "#/cells")
        page.wait_for_selector("body[data-ready='#/cells']")
        legend = page.locator("#legend .oc").evaluate_all(
            "els => els.map(e => [e.textContent, getComputedStyle(e).backgroundColor])")
        assert {name for name, _ in legend} == labels
        colours = [colour for _, colour in legend]
        assert all(c not in ("rgba(0, 0, 0, 0)", "transparent") for c in colours), legend
        assert len(set(colours)) == len(colours), legend
