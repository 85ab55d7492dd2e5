"""End to end in a real browser: the viewer served by uvicorn on 127.0.0.1 (started by the test
through `ect view --port 0`), and the static bundle opened from file:// with no network."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from runner.store import Store
from runner.view import write_bundle
from tests.view._browser import browser, png_stats

pytestmark = pytest.mark.chromium

SHOTS = Path(os.environ.get("ECT_VIEW_SHOTS", ""))


def _bodies(store: Path) -> dict[int, dict[str, Any]]:
    with Store.open(store) as s:
        return {r.seq: r.body for r in s.records(1)}


def _shot(page: Any, path: Path, name: str) -> None:
    page.screenshot(path=str(path), full_page=True)
    width, height, distinct, inked = png_stats(path)
    assert width > 600 and height > 400
    assert distinct > 40 and inked > 0.01, (name, distinct, inked)
    if SHOTS.name:
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / name).write_bytes(path.read_bytes())


def test_filter_open_and_check_a_trajectory(served: str, store: Path, tmp_path: Path) -> None:
    bodies = _bodies(store)
    ect_incomplete = [s for s, b in bodies.items() if b["result"]["outcome"]["policy"] == "ect"
                      and b["result"]["outcome"]["checkpoint"] == "incomplete"
                      and any(d["pipeline"] and d["pipeline"]["reasons"]
                              for d in b["result"]["decisions"])]
    assert ect_incomplete, "the fixture needs an ECT trajectory the verifier sent back"
    seq = ect_incomplete[0]
    body = bodies[seq]
    with browser() as b:
        page = b.new_page(viewport={"width": 1300, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(served + "#/cells")
        page.wait_for_selector("body[data-ready='#/cells']")
        assert page.locator("#cellbody tr").count() == len(bodies)
        page.select_option("select[name=policy]", "ect")
        page.select_option("select[name=checkpoint]", "incomplete")
        expected = sorted(s for s, b in bodies.items()
                          if b["result"]["outcome"]["policy"] == "ect"
                          and b["result"]["outcome"]["checkpoint"] == "incomplete")
        shown = [int(x) for x in page.locator("#cellbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.seq)")]
        assert shown == expected
        assert "policy=ect" in page.url and "checkpoint=incomplete" in page.url
        _shot(page, tmp_path / "cells.png", "cells.png")
        # keyboard: focus the first row, move to the row of `seq`, open it with Enter
        page.locator("#cellbody tr").first.focus()
        for _ in range(expected.index(seq)):
            page.keyboard.press("ArrowDown")
        page.keyboard.press("Enter")
        page.wait_for_selector(f"body[data-ready='#/cell/{seq}']")
        page.wait_for_selector("#jsproof[data-ok]")
        assert page.locator("#cellid").inner_text() == body["cell_id"]
        assert page.locator("#jsproof").get_attribute("data-ok") == "yes"
        codes = page.locator("code.reason").all_inner_texts()
        assert codes == [r["code"] for d in body["result"]["decisions"] if d["pipeline"]
                         for r in d["pipeline"]["reasons"]]
        receipts = page.locator("tr.receipt td:first-child").all_inner_texts()
        assert receipts == [r["receipt_id"] for r in body["result"]["new_receipts"]]
        assert page.locator("#stopreason").inner_text().startswith(
            body["result"]["stop"]["reason"])
        page.locator("details.req summary").first.click()
        page.locator("details.raw summary").first.click()
        assert page.locator("pre.rawbody").first.inner_text().startswith('{"generation"')
        roles = page.locator("details.req").first.locator(".msg .role").all_inner_texts()
        assert roles == ["system", "user"]  # rendered in the page from the raw body
        assert body["cell_id"].split(":")[0] in page.locator(".msg pre").nth(1).inner_text()
        _shot(page, tmp_path / "trajectory.png", "ect-trajectory.png")
        page.keyboard.press("v")
        page.wait_for_selector(f"body[data-ready='#/compare/{seq}']")
        assert page.locator(".compare .col").count() == 4
        page.goto(served + "#/")
        page.wait_for_selector("body[data-ready='#/']")
        assert "SIMULATED" in page.locator("#banner").inner_text()
        page.click("#fullverify")
        page.wait_for_selector("#fullresult .badge")  # (the page's CSP forbids wait_for_function)
        assert "intact" in page.locator("#fullresult").inner_text()
        assert errors == []


def test_bundle_opens_from_file_without_network(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    write_bundle(out, store=store)
    bodies = _bodies(store)
    seq = max(bodies)
    with browser() as b:
        ctx = b.new_context()
        requests: list[str] = []

        def on_route(route: Any) -> None:
            requests.append(route.request.url)
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                route.abort()

        ctx.route("**/*", on_route)
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((out / "index.html").as_uri() + "#/cells")
        page.wait_for_selector("body[data-ready='#/cells']")
        assert page.locator("#cellbody tr").count() == len(bodies)
        page.goto((out / "index.html").as_uri() + f"#/cell/{seq}")
        page.wait_for_selector("#jsproof[data-ok]")
        assert page.locator("#jsproof").get_attribute("data-ok") == "yes"
        assert page.locator("#cellid").inner_text() == bodies[seq]["cell_id"]
        page.goto((out / "index.html").as_uri())
        page.wait_for_selector("body[data-ready='#/']")
        assert "intact" in page.locator("#integrity").inner_text()
        ctx.close()
    assert requests and all(u.startswith("file://") for u in requests), requests
    assert errors == []


def test_in_page_proof_without_subtlecrypto(store: Path, tmp_path: Path) -> None:
    """Where SubtleCrypto is missing (a remote plain-HTTP origin), the page's own SHA-256 checks
    the proof; a record body altered in the bundle is caught by either."""
    out = tmp_path / "bundle"
    write_bundle(out, store=store)
    seq = max(_bodies(store))
    data = out / "data" / f"cell-{seq}.js"
    good = data.read_text()
    with browser() as b:
        for subtle, text, expect in ((False, good, "yes"), (True, good, "yes"),
                                     (False, _tamper(good), "no"), (True, _tamper(good), "no")):
            data.write_text(text)
            ctx = b.new_context()
            if not subtle:
                ctx.add_init_script("delete Crypto.prototype.subtle;")
            page = ctx.new_page()
            page.goto((out / "index.html").as_uri() + f"#/cell/{seq}")
            page.wait_for_selector("#jsproof[data-ok]")
            assert page.locator("#jsproof").get_attribute("data-ok") == expect, (subtle, expect)
            label = "by SubtleCrypto" if subtle else "in plain JS"
            assert label in page.locator("#jsproof").inner_text()
            ctx.close()


def _tamper(script: str) -> str:
    """Change one byte of the record body (base64) inside a bundled cell file."""
    import base64
    import json

    prefix, rest = script.split(",", 1)
    obj = json.loads(rest.rstrip().removesuffix(");"))
    body = base64.b64decode(obj["chain"]["body_b64"]).replace(b'"turns":', b'"turns" :', 1)
    obj["chain"]["body_b64"] = base64.b64encode(body).decode()
    return prefix + "," + json.dumps(obj) + ");\n"  # noqa: TID251 — test data, not hashed
