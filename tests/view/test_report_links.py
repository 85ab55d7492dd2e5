"""The HTML reports explain their codes in a legend and link heat-map cells to the viewer; the
links' filters are ones the viewer applies."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from urllib.parse import parse_qsl

import pytest

from runner.analysis import ProviderInfo, analyse_closed_loop, render_outputs
from runner.cli._view import DEFAULT_PORT
from runner.ect import CHECK_FAMILIES
from runner.worlds import CLOSED_LOOP_FAULTS, STATIC_CONDITIONS
from tests.analysis import _fixtures as fx
from tests.view._browser import browser

SIM = ProviderInfo(name="simulated", model="simulated-1", simulated=True)


def _html() -> str:
    results = analyse_closed_loop(fx.outcomes(), fx.schedule(), provider=SIM, seed=2705,
                                  replicates=200)
    return render_outputs(results)["report.html"].decode("utf-8")


def test_legend_explains_every_code() -> None:
    html = _html()
    legend = html[html.index("<h2>Legend</h2>"):]
    for code in (*STATIC_CONDITIONS, *CLOSED_LOOP_FAULTS, *CHECK_FAMILIES):
        assert f"<th>{code}</th>" in legend, code


def test_heatmap_cells_link_to_their_trajectories() -> None:
    html = _html()
    links = [unescape(u) for u in re.findall(r'<a href="([^"]+)">', html)]
    prefix = f"http://127.0.0.1:{DEFAULT_PORT}/#/cells?"
    assert links and all(u.startswith(prefix) for u in links)
    filters = [dict(parse_qsl(u[len(prefix):])) for u in links]
    assert {f["policy"] for f in filters} == {"critic_core", "controller", "full_trace", "ect"}
    assert {f["checkpoint"] for f in filters} == {"incomplete"}
    assert {f["fault"] for f in filters} == set(CLOSED_LOOP_FAULTS)


@pytest.mark.chromium
def test_a_report_link_filters_the_viewer(served: str, store: Path) -> None:
    from runner.store import Store

    with Store.open(store) as s:
        bodies = [r.body["result"]["outcome"] for r in s.records(1)]
    target = next(o for o in bodies if o["fault"])
    html = _html()
    link = next(unescape(u) for u in re.findall(r'<a href="([^"]+)">', html)
                if f"fault={target['fault']}&" in unescape(u) and "policy=ect" in u)
    fragment = link[link.index("#"):]
    expected = [o["row"] for o in bodies if o["fault"] == target["fault"]
                and o["policy"] == "ect" and o["checkpoint"] == "incomplete"]
    with browser() as b:
        page = b.new_page()
        page.goto(served + fragment)
        page.wait_for_selector("body[data-ready]")
        rows = page.locator("#cellbody tr td:first-child").all_inner_texts()
        assert [int(r) for r in rows] == expected and expected
