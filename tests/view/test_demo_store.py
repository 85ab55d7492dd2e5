"""`ect view` on a whole demo store shows every trajectory (slow: runs all 576 cells)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

from runner.view import build_app
from tests.sizes import STUDY_CELLS
from tests.study.support import bodies, ect, make_study


@pytest.mark.slow
def test_every_demo_trajectory_is_shown(tmp_path: Path) -> None:
    spec = make_study(tmp_path / "study", worlds=("w10", "w11", "w12", "w13"), seeds=3)
    out = tmp_path / "demo"
    done = ect("demo", "--out", str(out), "--study", str(spec), "--quiet", timeout=1800)
    assert done.returncode == 0, done.stderr
    store = out / "v2.db"
    assert done.stdout.strip().splitlines()[-1].endswith(f"ect view --store {store}")
    recorded = bodies(store)
    assert len(recorded) == STUDY_CELLS
    app = build_app(store=store)

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1") as c:
            cells = (await c.get("/api/cells")).json()["rows"]
            assert len(cells) == STUDY_CELLS
            for seq, body in enumerate(recorded, 1):
                view = (await c.get(f"/api/cell-{seq}")).json()
                assert view["cell_id"] == body["cell_id"]
                assert len(view["steps"]) == len(body["result"]["decisions"])
                assert view["unmatched_calls"] == 0 and view["chain"]["server_verified"]
                assert all(s["request"] and s["request"]["raw_request"] for s in view["steps"])

    anyio.run(go)
