"""Damage shown as damage (issue 29): stores with an overwritten page or an edited record body.

The viewer's run page never says "intact" while a record it shows is unreadable; a damaged cell's
page names the record and why; ``store verify``, ``store show``, ``replay`` and ``view --bundle``
print one ``ect:`` line (or their report line) naming the seq, never a traceback or "seq None".
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx
from click.testing import CliRunner, Result

from runner.cli._app import cli
from runner.view import build_app

BASE = "http://127.0.0.1"


def _get(app: Any, *paths: str) -> list[httpx.Response]:
    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
            return [await c.get(p) for p in paths]

    return anyio.run(go)


def _ect(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _bodies(store: Path) -> dict[int, bytes]:
    conn = sqlite3.connect(f"file:{store}?mode=ro&immutable=1", uri=True)
    try:
        return {int(s): bytes(b) for s, b in conn.execute("SELECT seq, body FROM records")}
    finally:
        conn.close()


def _overwrite_page_of(store: Path, seq: int) -> set[int]:
    """Overwrite (with 'X') the whole page holding the start of record ``seq``'s body; return
    every record whose body starts on that page (the records SQLite can no longer read)."""
    bodies = _bodies(store)
    data = store.read_bytes()
    page = 4096
    starts = {s: data.find(b[:200]) for s, b in bodies.items()}
    assert data.count(bodies[seq][:200]) == 1
    target = starts[seq] // page
    with store.open("r+b") as f:
        f.seek(target * page)
        f.write(b"X" * page)
    return {s for s, off in starts.items() if off >= 0 and off // page == target}


def _edit_body(store: Path, seq: int) -> None:
    """Change bytes inside record ``seq``'s body in place: SQLite reads it, JSON does not.

    The edit stays in the body's first bytes: a body longer than a page continues on overflow
    pages elsewhere in the file, so only its start is where ``find`` says it is."""
    body = _bodies(store)[seq]
    data = bytearray(store.read_bytes())
    at = data.find(body[:200])
    key = body.index(b'"schedule_row":{')
    i = at + (key if key + 6 <= 200 else 1)
    data[i:i + 6] = b"XXXXXX"
    store.write_bytes(bytes(data))


def test_the_run_page_is_never_intact_beside_an_unreadable_record(store: Path) -> None:
    _edit_body(store, 5)
    (r,) = _get(build_app(store=store), "/api/run")
    run = r.json()
    assert run["outcomes"]["unreadable"] == 1
    integ = run["integrity"]
    # named as `store verify --full` names it (issue 39): the body no longer hashes to its leaf
    assert integ["ok"] is False and integ["first_bad_seq"] == 5 and integ["damage"] == "tamper"
    assert integ["label"] == "DAMAGED (tamper) at seq 5"
    assert integ["detail"].startswith("1 record(s) unreadable, first record 5 is not a cell record "
                                      "(its body does not match its leaf hash): ")
    assert "(the quick verification, which does not read every body, found: intact: " in integ["detail"]


def test_an_overwritten_page_is_named_by_its_record(store: Path, tmp_path: Path) -> None:
    bad = _overwrite_page_of(store, 6)
    first = min(bad)
    other = max(set(_bodies_safe(tmp_path, store)) - bad - {0})

    verify = _ect("store", "verify", str(store))
    assert verify.exit_code == 1
    assert verify.output == (f"{store}: DAMAGED (corrupt) at seq {first}: {store}: SQLite reports "
                             "a damaged file: database disk image is malformed\n")
    full = _ect("store", "verify", "--full", str(store))
    assert full.exit_code == 1 and f"DAMAGED (corrupt) at seq {first}: " in full.output

    show = _ect("store", "show", str(store), "--seq", str(other))
    assert show.exit_code == 3 and "Traceback" not in show.output
    assert show.output.splitlines() == [
        f"ect: {store}: DAMAGED (corrupt) at seq {first}: {store}: SQLite reports a damaged file: "
        "database disk image is malformed"]

    pretty = _ect("store", "show", str(store), "--seq", str(first), "--pretty")
    assert pretty.exit_code == 3
    assert pretty.output.splitlines() == [
        f"ect: DAMAGED (corrupt) at seq {first}: record {first} is unreadable: {store}: read failed "
        "(database disk image is malformed)"]
    readable = _ect("store", "show", str(store), "--seq", str(other), "--pretty")
    assert readable.exit_code == 0, readable.output
    assert readable.output.splitlines()[-1] == (
        f"chain: record {other}: DAMAGED store, no inclusion proof: {store}: read failed "
        "(database disk image is malformed)")

    replay = _ect("replay", "--store", str(store))
    assert replay.exit_code != 0 and "Traceback" not in replay.output
    assert (f"ect: {store} does not verify: DAMAGED (corrupt) at seq {first}: {store}: SQLite "
            "reports a damaged file: database disk image is malformed; nothing was replayed"
            ) in replay.output

    app = build_app(store=store)
    cell, good, run = _get(app, f"/api/cell-{first}", f"/api/cell-{other}", "/api/run")
    assert cell.json() == {"error": f"DAMAGED (corrupt) at seq {first}: record {first} is "
                                    f"unreadable: {store}: read failed (database disk image is "
                                    "malformed)"}
    assert good.status_code == 200 and good.json()["chain"]["error"].endswith(
        "read failed (database disk image is malformed)")
    assert run.status_code == 200 and run.json()["integrity"]["ok"] is False

    bundle = _ect("view", "--store", str(store), "--bundle", str(tmp_path / "bundle"))
    assert bundle.exit_code == 0, bundle.output
    assert "Traceback" not in bundle.output
    # progress (issue 29): what it does first, then the cell pages as they are written
    assert f"bundle: verifying {store} in full, then writing every page" in bundle.output
    assert re.search(r"^bundle: (\d+)/\1 cell pages", bundle.output, re.M), bundle.output
    data = (tmp_path / "bundle" / "data" / f"cell-{first}.js").read_text("utf-8")
    assert f'"error":"DAMAGED (corrupt) at seq {first}: record {first} is unreadable: ' in data
    listed = sorted(p.name for p in store.parent.iterdir())
    assert not [n for n in listed if n.endswith(("-wal", "-shm"))], listed


def _bodies_safe(tmp_path: Path, store: Path) -> dict[int, bytes]:
    """Record seqs as the checkpoint names them (the damaged file cannot list them all)."""
    import json

    cp = json.loads(Path(str(store) + ".checkpoint").read_text("utf-8"))
    size = int(cp["checkpoint"]["size"]) if "checkpoint" in cp else int(cp["size"])
    return dict.fromkeys(range(size), b"")


def test_a_read_only_verification_leaves_no_wal_or_shm(store: Path) -> None:
    before = sorted(p.name for p in store.parent.iterdir())
    digest = store.read_bytes()
    for args in (["store", "verify", str(store)], ["store", "verify", "--full", str(store)],
                 ["store", "show", str(store)], ["store", "show", str(store), "--seq", "2"]):
        r = _ect(*args)
        assert r.exit_code == 0, r.output
        assert sorted(p.name for p in store.parent.iterdir()) == before, args
    assert store.read_bytes() == digest


def test_verify_labels(store: Path, tmp_path: Path) -> None:
    ok = _ect("store", "verify", str(store))
    assert re.fullmatch(rf"{re.escape(str(store))}: intact: 17 records, \d+ attempt-journal "
                        r"entries \(quick verification\); head [0-9a-f]{64}\n", ok.output)
    r = _ect("store", "verify", str(store.parent))
    assert r.exit_code == 2
    assert r.output == (f"ect: {store.parent} is a directory, not a store: give the store's file "
                        f"(e.g. {store.parent}/v2.db)\n")
    text = tmp_path / "notes.txt"
    text.write_text("not a store\n", "utf-8")
    r = _ect("store", "verify", str(text))
    assert r.exit_code == 2
    assert r.output == (f"ect: {text}: not an ect run store (not an SQLite file, and no store "
                        "checkpoint beside it)\n")
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (a)")
    conn.commit()
    conn.close()
    r = _ect("store", "verify", str(other))
    assert r.exit_code == 2
    assert r.output == f"ect: {other}: not an ect run store (application_id 0)\n"


def test_a_bundle_does_not_claim_a_server_check() -> None:
    js = (Path(__file__).resolve().parents[2] / "runner" / "view" / "static" / "app.js").read_text("utf-8")
    # the one place the Merkle section names who checked the proof
    assert js.count('"server check"') == 1
    assert '(BUNDLE ? "checked when the bundle was written" : "server check")' in js
