"""`ect view --static DIR` over `ect static` output: every snapshot, its contract, ledger and
certificate, and each policy's decision with its reason codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx

from runner.view import build_app, write_bundle
from runner.worlds import static_grid
from tests.view._browser import browser


def _get(app: Any, path: str) -> Any:
    async def go() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1") as c:
            r = await c.get(path)
            assert r.status_code == 200, r.text
            return r.json()

    return anyio.run(go)


def _decisions(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]


def test_static_summary_and_snapshots(static_out: Path) -> None:
    app = build_app(static_dir=static_out)
    summary = _get(app, "/api/static")
    rows = _decisions(static_out)
    ids = list(dict.fromkeys(r["snapshot_id"] for r in rows))
    assert [s["snapshot_id"] for s in summary["snapshots"]] == ids
    assert summary["simulated"] is True and "SIMULATED" in summary["provider_line"].upper()
    grid = {s.snapshot_id: s for s in static_grid()}
    for i, sid in enumerate(ids):
        snap = _get(app, f"/api/snapshot-{i}")
        assert snap["snapshot_id"] == sid and snap["rebuilt"]
        assert snap["snapshot"]["certificate"] == grid[sid].certificate.to_json()
        assert snap["contract"] == grid[sid].task.contract.to_json()
        assert snap["decisions"] == [r for r in rows if r["snapshot_id"] == sid]
        base = {r["arm"]: r["decision"] for r in rows if r["snapshot_id"] == sid and not r["ablate"]}
        assert summary["snapshots"][i]["decisions"] == base


def test_static_bundle_in_the_browser(static_out: Path, tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", static_dir=static_out)
    rows = _decisions(static_out)
    first = rows[0]["snapshot_id"]
    with browser() as b:
        page = b.new_page()
        page.goto((tmp_path / "b" / "index.html").as_uri())
        page.wait_for_selector("body[data-ready='#/']")
        assert page.locator("#cellbody tr").count() == len({r["snapshot_id"] for r in rows})
        page.locator("#cellbody tr").first.focus()
        page.keyboard.press("Enter")
        page.wait_for_selector("body[data-ready='#/snapshot/0']")
        assert first in page.locator("h1").inner_text()
        codes = set(page.locator("code.reason").all_inner_texts())
        assert codes == {c for r in rows if r["snapshot_id"] == first for c in r["reasons"]}
