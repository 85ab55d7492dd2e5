"""No host path of the interpreter is visible inside a call (issue 37, item 4): an interpreter
installed outside /usr (here a copy laid out as a version manager's under a home directory) is
staged once at a neutral path and bound at the fixed ``/ect/python``; before, it was bound at its
host path, so a call learnt it (``sys.prefix``, ``sys.executable``, mountinfo,
``/proc/1/cmdline``)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from runner.sandbox import BwrapBackend, Limits
from runner.sandbox import _bwrap as bwrap_mod
from runner.sandbox._stage import remove_staged

from .conftest import linux_only

pytestmark = linux_only

SHOW = """
import os, sys
print("exe", sys.executable)
print("prefix", sys.prefix)
for p in ("/proc/self/mountinfo", "/proc/self/maps", "/proc/1/cmdline", "/proc/self/cmdline",
          "/proc/self/environ"):
    try:
        print(p, open(p, "rb").read().replace(b"\\0", b" ").decode("utf-8", "replace"))
    except OSError as e:
        print(p, "unreadable", e.errno)
print("env", sorted(os.environ.items()))
"""


def _home_interpreter(tmp_path: Path) -> tuple[Path, Path]:
    """A second installation of this interpreter laid out as a version manager's under a home
    directory: (its binary, its prefix)."""
    host_exe, host_prefix = bwrap_mod.interpreter()
    stdlib = host_prefix / "lib" / host_exe.name
    if not stdlib.is_dir():
        pytest.skip(f"no stdlib at {stdlib} to lay out a second installation around")
    prefix = tmp_path / "home" / "alice" / ".pyenv" / "versions" / "3.x"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib").mkdir()
    exe = prefix / "bin" / host_exe.name
    shutil.copy2(host_exe, exe)
    (prefix / "lib" / host_exe.name).symlink_to(stdlib)  # the stdlib itself lies under /usr
    for d in [*prefix.parents][: len(prefix.relative_to(tmp_path).parts)]:
        d.chmod(0o755)
    return exe, prefix


def test_an_interpreter_outside_usr_is_bound_at_a_fixed_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    exe, prefix = _home_interpreter(tmp_path)
    monkeypatch.setattr(bwrap_mod, "interpreter", lambda: (exe, prefix))
    be = BwrapBackend(pool_size=0)
    try:
        assert be.host_prefix == prefix and be.prefix == Path("/ect/python")
        assert be.python == Path("/ect/python/bin") / exe.name
        r = be.run([str(be.python), "-I", "-S", "-c", SHOW], stdin=b"",
                   limits=Limits(wall_s=20.0))  # fmt: skip
        out = r.stdout.decode()
        assert r.exit_status == 0, r.stderr
        assert f"prefix {bwrap_mod.PYTHON_PREFIX}\n" in out
        assert f"exe {be.python}\n" in out
        for leak in (str(tmp_path), "alice", ".pyenv"):
            assert leak not in out, leak
        assert "alice" not in str(be.describe())  # the record names the path calls see
        # the staged copy, made once per interpreter and reused
        assert be.staged_prefix is not None and (be.staged_prefix / ".complete").is_file()
        again = BwrapBackend(pool_size=0)
        assert again.staged_prefix == be.staged_prefix
        again.close()
    finally:
        be.close()
        if be.staged_prefix is not None:  # this test's throwaway interpreter: no cache to keep
            remove_staged(be.staged_prefix)


INSIDE = """
import json, sys
print(json.dumps({"executable": sys.executable, "path": sys.path, "prefix": sys.prefix,
                  "mountinfo": open("/proc/self/mountinfo").read().splitlines()}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="an unprivileged parent cannot mount a filesystem "
                    "on the host: its staged copy is a directory, which mountinfo names "
                    "(docs/sandbox.md)")  # fmt: skip
def test_no_host_path_of_the_interpreter_inside_a_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # Before, the staged copy was a directory (/var/cache/ect-sandbox/python-<key>) bound at
    # /ect/python, and mountinfo showed that host path as the mount's root.
    exe, prefix = _home_interpreter(tmp_path)
    monkeypatch.setattr(bwrap_mod, "interpreter", lambda: (exe, prefix))
    be = BwrapBackend(pool_size=0)
    try:
        assert be.staged_prefix is not None
        r = be.run([str(be.python), "-I", "-S", "-c", INSIDE], stdin=b"",
                   limits=Limits(wall_s=120.0))  # fmt: skip
        assert r.exit_status == 0, r.stderr
        seen = json.loads(r.stdout)
        assert seen["executable"] == f"{bwrap_mod.PYTHON_PREFIX}/bin/{exe.name}"
        assert seen["prefix"] == bwrap_mod.PYTHON_PREFIX
        assert seen["path"] and all(p.startswith(bwrap_mod.PYTHON_PREFIX + "/")
                                    for p in seen["path"]), seen["path"]  # fmt: skip
        [line] = [m for m in seen["mountinfo"] if m.split()[4] == bwrap_mod.PYTHON_PREFIX]
        assert line.split()[3] == "/", line  # the root of a filesystem of its own
        assert line.split(" - ")[1].split()[:2] == ["tmpfs", "ect-python"], line
        for host in (str(be.staged_prefix), str(tmp_path), "/var/cache", "/var/tmp",
                     "/run/ect-sandbox", "alice", ".pyenv"):
            assert host not in r.stdout.decode(), host
    finally:
        be.close()
        if be.staged_prefix is not None:  # this test's throwaway interpreter: no cache to keep
            remove_staged(be.staged_prefix)
            assert not be.staged_prefix.exists()
