"""The viewer's HTTP API and pages over a real fixture store, through httpx's ASGI transport."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from runner.store import Store, merkle
from runner.view import build_app

BASE = "http://127.0.0.1"


def _get(app: Any, *paths: str, method: str = "GET",
         headers: dict[str, str] | None = None) -> list[httpx.Response]:
    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
            return [await c.request(method, p, headers=headers) for p in paths]

    return anyio.run(go)


def _bodies(store: Path) -> dict[int, dict[str, Any]]:
    with Store.open(store) as s:
        return {r.seq: r.body for r in s.records(1)}


def test_cells_list_every_committed_record(store: Path) -> None:
    (r,) = _get(build_app(store=store), "/api/cells")
    assert r.status_code == 200
    data = r.json()
    bodies = _bodies(store)
    assert [row[0] for row in data["rows"]] == sorted(bodies)
    cols = data["columns"]
    for row in data["rows"]:
        cell = dict(zip(cols, row, strict=True))
        outcome = bodies[cell["seq"]]["result"]["outcome"]
        assert cell["cell_id"] == bodies[cell["seq"]]["cell_id"]
        for key in ("policy", "stop_reason", "turns", "tool_calls", "fault", "family"):
            assert cell[key] == outcome[key], key


def test_trajectory_matches_the_store(store: Path) -> None:
    bodies = _bodies(store)
    app = build_app(store=store)
    seen_reasons = seen_receipts = 0
    for seq, body in bodies.items():
        (r,) = _get(app, f"/api/cell-{seq}")
        view = r.json()
        decisions = body["result"]["decisions"]
        assert [s["verdict"] for s in view["steps"]] == [d["verdict"] for d in decisions]
        for step, d in zip(view["steps"], decisions, strict=True):
            if d["pipeline"]:
                assert step["pipeline"]["reasons"] == d["pipeline"]["reasons"]
                seen_reasons += len(d["pipeline"]["reasons"])
            # the rendered request is the recorded one: its bytes hash to the audited digest
            req = step["request"]
            assert "sha256:" + hashlib.sha256(req["raw_request"].encode()).hexdigest() == \
                req["request_digest"]
        shown = [rc for s in view["steps"] if s["tool"] for rc in s["tool"]["receipts"]]
        assert shown == body["result"]["new_receipts"]
        seen_receipts += len(shown)
        ch = view["chain"]
        raw = base64.b64decode(ch["body_b64"])
        assert merkle.leaf_hash(raw).hex() == ch["leaf"]
        merkle.verify_inclusion(bytes.fromhex(ch["leaf"]), seq, ch["tree_size"],
                                [bytes.fromhex(p) for p in ch["proof"]], bytes.fromhex(ch["root"]))
        assert ch["signed"] and ch["checkpoint_root"] == ch["root"]
    assert seen_reasons and seen_receipts  # the fixture exercises both


def test_run_page_states_the_provider_and_integrity(store: Path) -> None:
    (r,) = _get(build_app(store=store), "/api/run")
    run = r.json()
    with Store.open(store) as s:
        header = s.header
    assert run["simulated"] is True and "SIMULATED" in run["provider_line"]
    assert run["lock_digest"] == header["lock_digest"]
    assert run["integrity"]["ok"] is True
    assert run["progress"]["committed"] == len(_bodies(store))
    assert run["preflight"]["passed"] is True and run["preflight"]["checks"]
    (v,) = _get(build_app(store=store), "/verify", method="POST")
    assert v.json()["ok"] is True and v.json()["full"] is True


def test_damage_is_shown(store: Path) -> None:
    import sqlite3

    conn = sqlite3.connect(store)
    conn.execute("DROP TRIGGER records_no_update")
    conn.execute("UPDATE records SET leaf = zeroblob(32) WHERE seq = 3")
    conn.commit()
    conn.close()
    (r,) = _get(build_app(store=store), "/api/run")
    integrity = r.json()["integrity"]
    assert integrity["ok"] is False and integrity["damage"] == "tamper"


def test_pages_load_nothing_from_elsewhere(store: Path) -> None:
    page, js, css = _get(build_app(store=store), "/", "/assets/app.js", "/assets/app.css")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    for r in (page, js, css):
        assert r.status_code == 200
        assert not re.search(r"(src|href)=\"(https?:)?//", r.text)
        assert "@import" not in r.text and "url(http" not in r.text
        assert "fonts.googleapis" not in r.text and "cdn" not in r.text.lower()


def test_unknown_things_are_404(store: Path) -> None:
    app = build_app(store=store)
    a, b, c = _get(app, "/api/cell-999", "/api/nothing", "/assets/../../etc/passwd")
    assert (a.status_code, b.status_code) == (404, 404)
    assert c.status_code == 404


def test_token_gate(store: Path) -> None:
    app = build_app(store=store, token="s3cret", allowed_hosts=("*",))
    bare, wrong = _get(app, "/api/run", "/api/run?token=nope")
    assert (bare.status_code, wrong.status_code) == (401, 401)
    good, = _get(app, "/?token=s3cret")
    assert good.status_code == 200
    assert "ect_view_token=s3cret" in good.headers["set-cookie"]
    assert "HttpOnly" in good.headers["set-cookie"]
    bearer, = _get(app, "/api/cells", headers={"authorization": "Bearer s3cret"})
    cookie, = _get(app, "/api/cells", headers={"cookie": "ect_view_token=s3cret"})
    assert bearer.status_code == cookie.status_code == 200


def test_foreign_host_header_refused(store: Path) -> None:
    app = build_app(store=store)
    r, = _get(app, "/api/run", headers={"host": "evil.example"})
    assert r.status_code == 400


@pytest.mark.parametrize("kwargs", [{}, {"store": "x", "static_dir": "y"}])
def test_build_app_needs_one_source(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        build_app(**kwargs)


def test_sandbox_layers_are_shown_when_recorded(tmp_path: Path) -> None:
    from runner.store import generate_key, load_signing_key

    key = tmp_path / "k"
    generate_key(key)
    layers = {"bwrap": True, "seccomp": "allow-list", "landlock_abi": 4}
    path = tmp_path / "s.db"
    Store.create(path, header={"lock_digest": "sha256:" + "0" * 64,
                               "preflight_digest": "sha256:" + "1" * 64,
                               "sandbox_layers": layers},
                 signing_key=load_signing_key(key)).close()
    (r,) = _get(build_app(store=path), "/api/run")
    run = r.json()
    assert run["sandbox_layers"] == layers
    assert run["progress"]["committed"] == 0 and run["integrity"]["ok"] is True
    assert run["simulated"] is False and "SIMULATED" not in run["provider_line"]


def test_a_forged_record_shows_as_unreadable_not_as_its_claim(store: Path) -> None:
    # The viewer reads every record as the study's CellRecord (digests checked), so a body
    # whose outcome was edited in place, its digests left as they were, is not shown as a
    # cell with the forged outcome: its row says "unreadable" and its page names why.
    import sqlite3

    from runner.canonical import canonical_bytes
    from runner.view import NotFound, StoreSource, ViewError, cell_rows, cell_view, run_summary

    clean = {row[0]: row for row in cell_rows(StoreSource(store))}
    seq = next(s for s, row in clean.items() if row[10] != "supported")
    body = _bodies(store)[seq]
    body["result"]["outcome"].update(supported_completion=True, premature_unsupported=False)
    conn = sqlite3.connect(store)
    conn.execute("DROP TRIGGER records_no_update")
    conn.execute("UPDATE records SET body = ? WHERE seq = ?", (canonical_bytes(body), seq))
    conn.commit()
    conn.close()
    src = StoreSource(store)
    rows = {row[0]: row for row in cell_rows(src)}
    # its damage named in the row as every command names it (issue 39)
    assert rows[seq][:-1] == [seq, *([None] * 9), "unreadable", *([None] * 5)]
    assert str(rows[seq][-1]).startswith(f"DAMAGED (tamper) at seq {seq}: record {seq} is not a "
                                         "cell record (its body does not match its leaf hash)")
    assert all(rows[s] == clean[s] for s in clean if s != seq)
    with pytest.raises(ViewError, match=rf"record {seq} is not a cell record .*result_digest"):
        cell_view(src, seq)
    with pytest.raises(NotFound):
        cell_view(src, len(clean) + 1)
    assert run_summary(src, integrity=None)["outcomes"]["unreadable"] == 1
    (r,) = _get(build_app(store=store), f"/api/cell-{seq}")
    assert r.status_code == 500 and "is not a cell record" in r.json()["error"]
    from click.testing import CliRunner

    from runner.cli._app import cli

    shown = CliRunner().invoke(cli, ["store", "show", str(store), "--seq", str(seq), "--pretty"])
    assert shown.exit_code == 3
    assert shown.stderr.startswith(f"ect: DAMAGED (tamper) at seq {seq}: record {seq} is not a "
                                   "cell record ")
    assert len(shown.stderr.strip().splitlines()) == 1
