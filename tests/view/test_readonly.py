"""The viewer never writes to the store (database, WAL and shared-memory files compared byte for
byte, no file created) and keeps working while a writer appends to it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from runner.view import build_app, write_bundle
from tests.study.support import start_run, subprocess_env
from tests.view.conftest import file_digests


def _exercise(app: Any, n_cells: int) -> list[int]:
    async def go() -> list[int]:
        t = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=t, base_url="http://127.0.0.1") as c:
            paths = ["/", "/api/run", "/api/cells", *(f"/api/cell-{i}" for i in range(1, n_cells + 1))]
            codes = [(await c.get(p)).status_code for p in paths]
            codes.append((await c.post("/verify")).status_code)
            return codes

    return anyio.run(go)


def test_closed_store_is_never_written(store: Path, tmp_path: Path) -> None:
    before = file_digests(store)
    assert before["-wal"] is None and before["-shm"] is None  # a cleanly closed store
    codes = _exercise(build_app(store=store), 16)
    assert set(codes) == {200}
    write_bundle(tmp_path / "bundle", store=store)
    assert file_digests(store) == before


_HOLDER = """
import sys, time
from runner.store import Store
s = Store.open(sys.argv[1])
print(s.count, flush=True)
sys.stdin.readline()
s.close()
"""


def test_store_held_open_by_a_writer_is_never_written(store: Path) -> None:
    # A process holding the store open (as `ect run` does between cells): -wal and -shm exist.
    with subprocess.Popen([sys.executable, "-c", _HOLDER, str(store)], env=subprocess_env(),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert holder.stdout.readline().strip() == "17"
            before = file_digests(store)
            assert before["-wal"] is not None and before["-shm"] is not None
            assert set(_exercise(build_app(store=store), 16)) == {200}
            assert file_digests(store) == before
        finally:
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(timeout=30)


def test_viewer_follows_a_writer(study_spec: Path, tmp_path: Path) -> None:
    store = tmp_path / "live.db"
    proc = start_run("--study", str(study_spec), "--store", str(store), "--limit", "24",
                     "--concurrency", "1")
    app = None
    counts: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if app is None and store.exists() and Path(str(store) + ".checkpoint").exists():
                app = build_app(store=store)
            if app is not None:
                async def rows(a: Any = app) -> int:
                    t = httpx.ASGITransport(app=a)
                    async with httpx.AsyncClient(transport=t, base_url="http://127.0.0.1") as c:
                        r = await c.get("/api/cells")
                        assert r.status_code == 200
                        n = len(r.json()["rows"])
                        if n:
                            assert (await c.get(f"/api/cell-{n}")).status_code == 200
                            assert (await c.get("/api/run")).json()["integrity"]["ok"]
                        return n
                counts.append(anyio.run(rows))
            time.sleep(0.2)
        _out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert app is not None
    assert counts == sorted(counts)  # never goes backwards
    assert len(set(counts)) > 1  # new cells appeared while the page was being read
    cells, run = anyio.run(_final, app)
    assert cells == 24
    # the integrity shown follows the store too (it is cached only while the files are unchanged)
    assert run["integrity"]["ok"] and run["integrity"]["records"] == 25
    assert run["progress"] == {"committed": 24, "total": 48}


async def _final(app: Any) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1") as c:
        cells = len((await c.get("/api/cells")).json()["rows"])
        return cells, (await c.get("/api/run")).json()
