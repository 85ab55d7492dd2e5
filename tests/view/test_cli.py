"""`ect view` and `ect store show --pretty` from the command line: exit codes, one-line errors,
the loopback rule and the token, the bundle."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from click.testing import CliRunner

from runner.cli import cli
from runner.store import Store
from tests.study.support import REPO, subprocess_env


def _ect(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_non_loopback_refused_without_allow_remote(store: Path) -> None:
    code, _out, err = _ect("view", "--store", str(store), "--host", "0.0.0.0", "--port", "0")
    assert code == 3
    assert err.startswith("ect: refusing to listen on non-loopback host 0.0.0.0")
    assert len(err.strip().splitlines()) == 1


def test_usage_errors(store: Path, tmp_path: Path) -> None:
    assert _ect("view")[0] == 2
    assert _ect("view", "--store", str(store), "--static", str(tmp_path))[0] == 2
    code, _, err = _ect("view", "--store", str(tmp_path / "nope.db"))
    assert code == 2 and err == f"ect: no such store: {tmp_path / 'nope.db'}\n"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    code, _, err = _ect("view", "--store", str(store), "--bundle", str(tmp_path / "full"))
    assert code == 2 and "not an empty directory" in err
    code, _, err = _ect("view", "--static", str(tmp_path / "full"))
    assert code == 2 and "not an `ect static` output directory" in err
    not_a_store = tmp_path / "plain.db"
    not_a_store.write_bytes(b"")
    code, _, err = _ect("view", "--store", str(not_a_store), "--bundle", str(tmp_path / "b"))
    assert code == 2 and "not an ect run store" in err  # every command's words (issue 39)


def test_bundle_command(store: Path, tmp_path: Path) -> None:
    code, out, _ = _ect("view", "--store", str(store), "--bundle", str(tmp_path / "b"))
    assert code == 0 and "bundle written" in out
    files = {p.name for p in (tmp_path / "b" / "data").iterdir()}
    with Store.open(store) as s:
        n = s.count - 1
    assert files == {"run.js", "cells.js", *(f"cell-{i}.js" for i in range(1, n + 1))}


def test_store_show_pretty(store: Path) -> None:
    with Store.open(store) as s:
        body = next(r.body for r in s.records(1) if any(
            d["pipeline"] and d["pipeline"]["reasons"] and d["pipeline"]["reasons"][0]["slot"]
            for d in r.body["result"]["decisions"]))
    code, out, _ = _ect("store", "show", str(store), "--cell", body["cell_id"], "--pretty")
    assert code == 0
    assert out.splitlines()[0].startswith(f"cell {body['cell_id']} (record {body['row']}")
    for d in body["result"]["decisions"]:
        assert f"decision {d['index']}: {d['verdict']}" in out
        for r in (d["pipeline"] or {}).get("reasons", []):
            assert f"reason {r['code']}" in out
    for r in body["result"]["new_receipts"]:
        assert f"receipt {r['receipt_id']} " in out
    assert "SIMULATED provider" in out and "merkle: inclusion" in out and ": verified" in out
    assert "[user]" in out  # the prompt is resolved from its blob, not a digest
    code2, out2, _ = _ect("store", "show", str(store), "--seq", str(body["row"]), "--pretty")
    assert (code2, out2) == (code, out)
    raw_code, raw_out, _ = _ect("store", "show", str(store), "--cell", body["cell_id"], "--pretty",
                                "--raw")
    assert raw_code == 0 and 'raw canonical request body:' in raw_out


def test_store_show_pretty_errors(store: Path) -> None:
    assert _ect("store", "show", str(store), "--pretty")[0] == 2
    code, _, err = _ect("store", "show", str(store), "--cell", "nope:x", "--pretty")
    assert code == 2 and err.startswith("ect: no committed cell 'nope:x'")
    assert _ect("store", "show", str(store), "--seq", "1", "--cell", "x")[0] == 2
    assert _ect("store", "show", str(store), "--seq", "1", "--pretty", "--json")[0] == 2
    assert _ect("store", "show", str(store), "--seq", "0", "--pretty")[0] == 2


@contextmanager
def _serve(*args: str) -> Iterator[list[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "runner", "view", *args], cwd=REPO,
                            env=subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        lines = [first]
        if "?token=" in first:
            lines.append(proc.stdout.readline())
        yield lines
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_served_on_loopback(store: Path) -> None:
    with _serve("--store", str(store), "--port", "0") as lines:
        url = lines[0].split(" at ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:")
        r = httpx.get(url + "api/cells", timeout=30)
        assert r.status_code == 200 and len(r.json()["rows"]) == 16


def test_remote_needs_the_printed_token(store: Path) -> None:
    with _serve("--store", str(store), "--host", "0.0.0.0", "--port", "0",
                "--allow-remote") as lines:
        url = lines[0].split(" at ", 1)[1].strip()
        token = lines[1].rsplit(" ", 1)[1].strip()
        assert url.endswith(f"/?token={token}") and len(token) >= 24
        port = url.split(":")[2].split("/")[0]
        base = f"http://127.0.0.1:{port}/"
        assert httpx.get(base + "api/cells", timeout=30).status_code == 401
        ok = httpx.get(base + "api/cells", headers={"authorization": f"Bearer {token}"},
                       timeout=30)
        assert ok.status_code == 200


def test_demo_ends_with_the_view_command(study_spec: Path, tmp_path: Path) -> None:
    from tests.study.support import ect

    out = tmp_path / "demo"
    done = ect("demo", "--out", str(out), "--study", str(study_spec), "--limit", "4", "--quiet")
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last == f"look inside the run: ect view --store {out / 'v2.db'}"
