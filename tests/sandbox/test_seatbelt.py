"""macOS backend: argv construction and profile are checked here; live runs need macOS."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.sandbox import Limits, SandboxUnavailable, ToolSandbox, select_backend
from runner.sandbox._seatbelt import SANDBOX_EXEC, SandboxExecBackend, seatbelt_argv

REPO = Path(__file__).resolve().parents[2]
PROFILE = (REPO / "sandbox_profiles" / "worker.sb").read_bytes()


def _strip_comments(text: str) -> str:
    return "\n".join(line.split(";", 1)[0] for line in text.splitlines())


def test_profile_is_deny_default_with_network_denied_last() -> None:
    body = _strip_comments(PROFILE.decode())
    forms = [f.strip() for f in body.split("\n(") if f.strip()]
    assert body.count("(") == body.count(")")
    assert forms[0] == "(version 1)"
    assert forms[1].startswith("deny default")
    assert forms[-1].startswith("deny network*")
    assert "allow network" not in body
    assert "(allow default" not in body
    for param in ("PYTHON_PREFIX", "WORKER", "TOOLS", "SNAPSHOT", "SCRATCH", "RO_0", "RO_3"):
        assert f'(param "{param}")' in body
    assert "(allow process-fork" not in body
    # no process listing or other processes' argv/environment through sysctl
    assert "(allow sysctl-read)" not in body and "kern.proc" not in body
    # writes only into the scratch directory (and /dev/null)
    assert body.count("file-write") == 2


def test_argv_passes_profile_bytes_and_parameters(tmp_path: Path) -> None:
    be = SandboxExecBackend(check_platform=False)
    snap = tmp_path / "w00.json"
    snap.write_text("{}")
    argv = be.build_argv(
        {"mode": "tool", "world_id": "w00", "tools": "/t/tools.py", "snapshot": str(snap)},
        limits=Limits(),
        ro_binds=[(snap, "/ect/world/w00.json"), (tmp_path, "/ect/extra")],
        scratch=Path("/private/var/folders/xy/T/ect-sbx-1"),
    )
    assert argv[:3] == [SANDBOX_EXEC, "-p", PROFILE.decode()]
    params = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-D")
    assert params["SNAPSHOT"] == str(snap)
    assert params["TOOLS"] == "/t/tools.py"
    assert params["SCRATCH"] == "/private/var/folders/xy/T/ect-sbx-1"
    assert params["RO_0"] == str(tmp_path.resolve())
    assert params["RO_1"] == "/var/empty/ect-unused"
    assert params["PYTHON_PREFIX"] == str(be.prefix)
    cmd = argv[argv.index(str(be.python)) :]
    assert cmd[1:4] == ["-I", "-S", "-c"]
    assert cmd[4] == be.worker_source  # verified bytes, not a path
    assert '"landlock":null' in cmd[5] and '"mode":"tool"' in cmd[5]


def test_argv_rejects_relative_or_too_many_paths() -> None:
    kw = dict(prefix=Path("/p"), worker=Path("/w"), tools="/t", snapshot="/s", scratch=Path("/x"),
              command=["/p/bin/python3"])  # fmt: skip
    with pytest.raises(ValueError, match="absolute"):
        seatbelt_argv(PROFILE, extra_ro=["relative/path"], **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most"):
        seatbelt_argv(PROFILE, extra_ro=["/a", "/b", "/c", "/d", "/e"], **kw)  # type: ignore[arg-type]


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the refusal off macOS")
def test_sandbox_exec_is_unavailable_off_macos() -> None:
    with pytest.raises(SandboxUnavailable, match="needs macOS"):
        select_backend("sandbox-exec")


@pytest.mark.skipif(sys.platform != "darwin", reason="sandbox-exec exists only on macOS")
def test_live_tool_call_on_macos(tiny_world: tuple[Path, Path]) -> None:  # pragma: no cover
    tools, snaps = tiny_world
    sb = ToolSandbox(select_backend("sandbox-exec"), snaps, tools_path=tools)
    assert sb.call("w99", "echo", {"a": 1}) == {
        "ok": True,
        "result": {"args": {"a": 1}, "world": "w99"},
    }
    assert sb.call("w99", "net", {"port": 9})["result"]["net"] != "connected"
