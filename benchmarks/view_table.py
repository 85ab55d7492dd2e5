"""How fast the viewer's cell table renders 576 cells in headless Chromium, beside a baseline.

Ours: the viewer page (its own JS building the sortable, filterable table from the cell list),
opened as a bundle from file://, timed from navigation start to the laid-out table
(``data-ms``), and the table build + layout alone (``data-table-ms``). Baseline: the same 576
rows as a plain pre-rendered HTML table with no script, timed from navigation start to the end
of its load event. Synthetic rows shaped like the V2 study's (24 tasks x 2 checkpoints x 3 seeds x
4 pipelines). Needs /usr/bin/chromium and playwright (the test extra).

    python benchmarks/view_table.py [--rounds N]
"""

from __future__ import annotations

import argparse
import html
import json
import shutil
import statistics
import tempfile
from pathlib import Path

from runner.view._assets import ASSETS, index_html
from runner.view._model import CELL_COLUMNS

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
FAMILIES = ("lookup", "aggregation", "top_k", "temporal_comparison", "hierarchy_join",
            "missing_data")
FAULTS = ("F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "U1", "U2", "U3", "T1")
POLICIES = ("critic_core", "controller", "full_trace", "ect")


def rows() -> list[list[object]]:
    out: list[list[object]] = []
    for t in range(24):
        task = f"w1{t // 6}-{FAMILIES[t % 6]}-0"
        for cp in ("clean", "incomplete"):
            for seed in range(3):
                for p in POLICIES:
                    n = len(out) + 1
                    out.append([n, n, f"{task}:{cp}:s{seed}:{p}", task, FAMILIES[t % 6],
                                f"w1{t // 6}", cp, p, seed, FAULTS[t // 2] if cp == "incomplete"
                                else None, "supported" if n % 5 else "premature",
                                "goal_met" if n % 7 else "no_progress", 1 + n % 4, n % 3,
                                round(0.001 + (n % 11) * 0.0007, 7)])
    return out


def write_pages(d: Path, data: list[list[object]]) -> tuple[Path, Path]:
    (d / "view" / "data").mkdir(parents=True)
    (d / "view" / "assets").mkdir()
    (d / "view" / "index.html").write_text(index_html("bundle-store"), "utf-8")
    for name, (path, _) in ASSETS.items():
        shutil.copyfile(path, d / "view" / "assets" / name)
    cells = {"columns": list(CELL_COLUMNS), "rows": data}
    run = {"simulated": True, "provider_line": "SIMULATED (benchmark data)"}
    for name, obj in (("cells", cells), ("run", run)):
        text = json.dumps(obj)  # noqa: TID251 — display data, not hashed
        (d / "view" / "data" / f"{name}.js").write_text(f'window.ectData("{name}",{text});')
    head = "".join(f"<th>{html.escape(c)}</th>" for c in CELL_COLUMNS[1:])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r[1:]) + "</tr>"
                   for r in data)
    base = d / "baseline.html"
    base.write_text(f"<!DOCTYPE html><html><body><table><thead><tr>{head}</tr></thead>"
                    f"<tbody>{body}</tbody></table></body></html>", "utf-8")
    return d / "view" / "index.html", base


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--smoke", action="store_true",
                    help="one round: checks that the benchmark runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.rounds = 1
    from playwright.sync_api import sync_playwright

    data = rows()
    assert len(data) == 576
    ours_nav, ours_table, base_nav = [], [], []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        page_path, base_path = write_pages(Path(tmp), data)
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for i in range(args.rounds):
            ctx = browser.new_context()
            page = ctx.new_page()
            page.goto(page_path.as_uri() + "#/cells")
            page.wait_for_selector("body[data-ready='#/cells']")
            assert page.locator("#cellbody tr").count() == 576
            ours_nav.append(float(page.locator("body").get_attribute("data-ms") or "nan"))
            ours_table.append(float(page.locator("body").get_attribute("data-table-ms") or "nan"))
            page.goto(base_path.as_uri())
            page.wait_for_load_state("load")
            base_nav.append(float(page.evaluate(
                "document.body.offsetHeight, "
                "performance.getEntriesByType('navigation')[0].loadEventEnd")))
            print(f"round {i + 1}: viewer {ours_nav[-1]:.0f} ms to a laid-out table "
                  f"(table build+layout {ours_table[-1]:.0f} ms); plain HTML table "
                  f"{base_nav[-1]:.0f} ms")
            ctx.close()
        browser.close()
    o, t, b = (statistics.median(x) for x in (ours_nav, ours_table, base_nav))
    print(f"medians: viewer {o:.0f} ms (table build+layout {t:.0f} ms), plain HTML {b:.0f} ms")
    print(f"view_table: {o:.0f} ms from navigation to a laid-out 576-cell table "
          f"(baseline {b:.0f} ms static HTML table, target < 1000 ms)")


if __name__ == "__main__":
    main()
