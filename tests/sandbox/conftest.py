"""Fixtures for the sandbox tests: the real bwrap backend (no mocks), tiny tools files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.sandbox import BwrapBackend, Limits

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="bwrap backend is Linux-only"
)

TINY_TOOLS = """
import json, os, socket

TOOL_SCHEMAS = {"echo": {}, "count": {}, "boom": {}, "net": {}, "env": {}, "junk": {}, "write": {}}


def call_tool(snapshot, tool_id, args):
    if tool_id == "echo":
        return {"ok": True, "result": {"args": args, "world": snapshot["world_id"]}}
    if tool_id == "count":
        return {"ok": True, "result": {"n": len(snapshot["items"])}}
    if tool_id == "boom":
        raise RuntimeError("tool blew up")
    if tool_id == "net":
        try:
            socket.create_connection(("127.0.0.1", int(args["port"])), timeout=1)
            return {"ok": True, "result": {"net": "connected"}}
        except OSError as e:
            return {"ok": True, "result": {"net": e.errno}}
    if tool_id == "env":
        return {"ok": True, "result": {"env": sorted(os.environ)}}
    if tool_id == "junk":
        import sys
        sys.stdout.write("not json")
        sys.stdout.flush()
        os._exit(0)
    if tool_id == "write":
        try:
            open(args["path"], "w").write("x")
            return {"ok": True, "result": {"write": "ok"}}
        except OSError as e:
            return {"ok": True, "result": {"write": e.errno}}
    return {"ok": False, "error": {"code": "unknown_tool", "message": tool_id}}
"""


@pytest.fixture(scope="session")
def bwrap() -> BwrapBackend:
    if not sys.platform.startswith("linux"):
        pytest.skip("bwrap backend is Linux-only")
    return BwrapBackend()


@pytest.fixture()
def fast_limits() -> Limits:
    return Limits(wall_s=10.0, cpu_s=2)


@pytest.fixture()
def tiny_world(tmp_path: Path) -> tuple[Path, Path]:
    tools = tmp_path / "tools.py"
    tools.write_text(TINY_TOOLS, "utf-8")
    snaps = tmp_path / "snapshots"
    snaps.mkdir()
    (snaps / "w99.json").write_text('{"world_id":"w99","items":[1,2,3]}', "utf-8")
    return tools, snaps
