"""ToolSandbox: one fresh sandboxed worker per call; a round trip for every synthetic tool."""

from __future__ import annotations

import errno
import importlib.util
import socket
from pathlib import Path
from typing import Any

import pytest

import runner.sandbox._layout as layout
from runner.canonical import canonical_bytes
from runner.errors import SandboxError
from runner.sandbox import BwrapBackend, Limits, SandboxUnavailable, ToolSandbox, WorkerFailed

from .conftest import linux_only

pytestmark = linux_only


def test_round_trip_tiny_tools(bwrap: BwrapBackend, tiny_world: tuple[Path, Path]) -> None:
    tools, snaps = tiny_world
    sb = ToolSandbox(bwrap, snaps, tools_path=tools)
    assert sb.call("w99", "echo", {"x": [1, "é", None]}) == {
        "ok": True, "result": {"args": {"x": [1, "é", None]}, "world": "w99"}}  # fmt: skip
    assert sb.call("w99", "count", {}) == {"ok": True, "result": {"n": 3}}
    assert sb.call("w99", "nope", {})["ok"] is False


def test_tool_cannot_reach_the_network_or_write(
    bwrap: BwrapBackend, tiny_world: tuple[Path, Path]
) -> None:
    tools, snaps = tiny_world
    sb = ToolSandbox(bwrap, snaps, tools_path=tools)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        assert sb.call("w99", "net", {"port": port})["result"]["net"] == errno.EAFNOSUPPORT
    snapshot_inside = "/ect/world/w99.json"
    assert sb.call("w99", "write", {"path": snapshot_inside})["result"]["write"] == errno.EROFS
    assert sb.call("w99", "write", {"path": "/tmp/ok"})["result"]["write"] == "ok"
    assert sb.call("w99", "env", {})["result"]["env"] == ["HOME", "LANG", "PATH", "PWD", "TMPDIR"]


def test_worker_failures_become_worker_failed(
    bwrap: BwrapBackend, tiny_world: tuple[Path, Path]
) -> None:
    tools, snaps = tiny_world
    sb = ToolSandbox(bwrap, snaps, tools_path=tools)
    with pytest.raises(
        WorkerFailed, match=r"exited with status 70: ect-worker: tool raised RuntimeError"
    ):
        sb.call("w99", "boom", {})
    with pytest.raises(WorkerFailed, match="malformed JSON"):
        sb.call("w99", "junk", {})


def test_bad_inputs_are_clear_errors(
    bwrap: BwrapBackend, tiny_world: tuple[Path, Path], tmp_path: Path
) -> None:
    tools, snaps = tiny_world
    sb = ToolSandbox(bwrap, snaps, tools_path=tools)
    with pytest.raises(SandboxError, match="invalid world id"):
        sb.call("../etc", "echo", {})
    with pytest.raises(SandboxError, match="no snapshot for world w42"):
        sb.call("w42", "echo", {})
    with pytest.raises(SandboxError, match="tools file not found"):
        ToolSandbox(bwrap, snaps, tools_path=tmp_path / "missing.py").call("w99", "echo", {})


def test_timeout_in_a_tool_is_worker_failed(bwrap: BwrapBackend, tmp_path: Path) -> None:
    tools = tmp_path / "slow.py"
    tools.write_text("import time\ndef call_tool(s, t, a):\n    time.sleep(30)\n")
    (tmp_path / "w1.json").write_text("{}")
    sb = ToolSandbox(bwrap, tmp_path, Limits(wall_s=1.0), tools_path=tools)
    with pytest.raises(WorkerFailed, match=r"killed \(timeout\)"):
        sb.call("w1", "x", {})


def test_landlock_refusal_maps_to_sandbox_unavailable(bwrap: BwrapBackend, tiny_world: tuple[Path, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The worker itself refuses (exit 78) when the kernel's ABI is below the required one."""
    tools, snaps = tiny_world
    monkeypatch.setattr(layout, "MIN_LANDLOCK_ABI", bwrap.landlock_abi + 1)
    sb = ToolSandbox(bwrap, snaps, tools_path=tools)
    with pytest.raises(
        SandboxUnavailable, match=r"landlock-refused: kernel Landlock ABI \d+ < required"
    ):
        sb.call("w99", "echo", {})
    weak = BwrapBackend(allow_weaker_landlock_unsafe=True)
    r = weak.run_worker({"mode": "check"}, stdin=b"", limits=Limits())
    assert b'"weaker": true' in r.stdout


# -- the real synthetic tools of runner.worlds ---------------------------------------------------


def _load_tools(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("ect_tools_under_test", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _args_for(tool_id: str, snap: dict[str, Any]) -> dict[str, Any]:
    store = snap["entities"]["store"][0]["id"]
    attr = snap["attributes"][0]
    return {
        "list_entities": {"level": "store"},
        "get_parent": {"entity": store},
        "get_metric": {"entity": store, "attribute": attr, "date": snap["start"]},
        "get_series": {
            "entity": store,
            "attribute": attr,
            "start": snap["start"],
            "end": snap["end"],
        },
        "record_note": {"key": "k", "value": "v", "idempotency_key": "idem-1"},
    }[tool_id]


def test_worker_round_trip_for_every_world_tool(bwrap: BwrapBackend, tmp_path: Path) -> None:
    from runner.sandbox._tool import DEFAULT_TOOLS_PATH
    from runner.worlds import write_snapshot

    tools = _load_tools(DEFAULT_TOOLS_PATH)
    path = write_snapshot("w00", tmp_path)
    import json

    snap = json.loads(path.read_bytes())
    sb = ToolSandbox(bwrap, tmp_path)
    assert set(tools.TOOL_SCHEMAS) == {
        "list_entities",
        "get_parent",
        "get_metric",
        "get_series",
        "record_note",
    }
    for tool_id in sorted(tools.TOOL_SCHEMAS):
        args = _args_for(tool_id, snap)
        got = sb.call("w00", tool_id, args)
        want = tools.call_tool(snap, tool_id, args)
        assert canonical_bytes(got) == canonical_bytes(want), tool_id
        assert got["ok"] is True, tool_id
    # bad arguments come back as the tool's own refusal, through the sandbox
    bad = sb.call("w00", "get_metric", {"entity": 5})
    assert bad["ok"] is False and bad == tools.call_tool(snap, "get_metric", {"entity": 5})
