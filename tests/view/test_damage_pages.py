"""Every viewer page names a damaged record the way every command does (issue 39, findings 4
and 7), in a real browser over a bundle of a damaged store:

* the four-pipeline page of a task whose controller record was edited showed three pipelines
  and no note; the filtered table said "5 of 576" with no hint a record could not be read;
* after a lost ``-wal`` the run page showed "records 0" beside "the store holds 1" and
  "signed checkpoint: size , Merkle root , (signature checked by the verification above)".

``ECT_VIEW_SHOTS=DIR`` keeps the screenshots.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner.view import write_bundle
from tests.view._browser import browser, png_stats
from tests.view.test_damage import _bodies, _edit_body

pytestmark = pytest.mark.chromium

SHOTS = Path(os.environ.get("ECT_VIEW_SHOTS", ""))


def _shot(page: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    width, height, distinct, inked = png_stats(path)
    assert width > 600 and height > 200 and distinct > 20 and inked > 0.005, name
    if SHOTS.name:
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / name).write_bytes(path.read_bytes())


def _open(page: Any, bundle: Path, route: str) -> str:
    page.goto((bundle / "index.html").as_uri() + route)
    page.wait_for_selector("body[data-ready]")
    return str(page.inner_text("main"))


def _damaged_seq(store: Path) -> tuple[int, str, list[int]]:
    """The controller record of the first incomplete checkpoint, its cell id, and the seqs of
    the four pipelines of that task, checkpoint and seed."""
    import json

    bodies = {s: json.loads(b) for s, b in _bodies(store).items() if s}
    seq = next(s for s, b in bodies.items() if b["cell_id"].endswith(":incomplete:s0:controller"))
    task = bodies[seq]["cell_id"].rsplit(":", 1)[0]
    group = sorted(s for s, b in bodies.items() if b["cell_id"].rsplit(":", 1)[0] == task)
    return seq, bodies[seq]["cell_id"], group


def test_every_page_names_an_edited_record(store: Path, tmp_path: Path) -> None:
    seq, _, group = _damaged_seq(store)
    assert len(group) == 4
    _edit_body(store, seq)
    label = f"DAMAGED (tamper) at seq {seq}"
    bundle = tmp_path / "bundle"
    write_bundle(bundle, store=store)
    other = next(s for s in group if s != seq)
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        run = _open(page, bundle, "#/")
        assert label in page.inner_text("#integrityline"), run
        _shot(page, tmp_path, "damaged-run.png")
        cells = _open(page, bundle, "#/cells")
        assert label in page.inner_text(f"#cellbody tr[data-seq='{seq}']"), cells
        assert "1 could not be read (" + label + ")" in page.inner_text("#count")
        _shot(page, tmp_path, "damaged-cells.png")
        # a filter the damaged record cannot match still says it exists and is not shown
        _open(page, bundle, "#/cells?policy=controller")
        count = page.inner_text("#count")
        assert label in count and "1 of them not shown by this filter" in count, count
        _shot(page, tmp_path, "damaged-cells-filtered.png")
        cell = _open(page, bundle, f"#/cell/{seq}")
        assert label in cell, cell
        _shot(page, tmp_path, "damaged-trajectory.png")
        _open(page, bundle, f"#/compare/{other}")
        assert page.locator(".compare .col").count() == 3
        assert label in page.inner_text("#comparedamage")
        _shot(page, tmp_path, "damaged-compare.png")
        compare_own = _open(page, bundle, f"#/compare/{seq}")
        assert label in compare_own, compare_own
        _shot(page, tmp_path, "damaged-compare-own.png")


def test_a_lost_wal_run_page_shows_no_empty_fields(store: Path, tmp_path: Path) -> None:
    """What a lost ``-wal`` leaves: the header and the external checkpoint, no cell records and
    no stored checkpoint (they were in the ``-wal``)."""
    conn = sqlite3.connect(store)
    triggers = conn.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'").fetchall()
    for name, _ in triggers:
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("DELETE FROM records WHERE seq > 0")
    conn.execute("DELETE FROM checkpoints")
    for _, sql in triggers:
        conn.execute(sql)
    conn.commit()
    conn.execute("VACUUM")
    conn.close()
    bundle = tmp_path / "bundle"
    write_bundle(bundle, store=store)
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        _open(page, bundle, "#/")
        integrity = page.inner_text("#integrity")
        assert "DAMAGED (truncation) at seq 1" in integrity, integrity
        assert "1 in the store (not all verified: DAMAGED (truncation) at seq 1)" in integrity
        assert "records\n0" not in integrity and "size ," not in integrity
        assert "Merkle root ," not in integrity
        assert "signature checked by the verification above" not in integrity
        assert "not established" in integrity and "none in the store" in integrity
        # no empty field shown as a fact anywhere on the page: every <dd> says something
        empty = page.locator("main dd").evaluate_all(
            "dds => dds.filter(d => !d.textContent.trim()).map(d => d.previousElementSibling.textContent)")
        assert empty == [], empty
        _shot(page, tmp_path, "lost-wal-run.png")
