"""The stale-cgroup sweep cannot crash (issue 37, item 2): names are parsed strictly (ASCII digits,
bounded length); any other name under a cgroup mount is left alone and logged, and the sweep never
raises out of ``CallCgroups.detect()``, so one odd directory cannot stop every backend."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from pathlib import Path

import pytest

from runner.sandbox._linux import CallCgroups, _mounts, _own_cgroups

from .conftest import linux_only

pytestmark = linux_only

P = CallCgroups._PREFIX
HOSTILE = [
    f"{P}²-{'0' * 12}",  # str.isdigit() is true, int() raises ValueError
    f"{P}٣٣-{'0' * 12}",  # Arabic-Indic digits
    f"{P}{'9' * 40}-{'0' * 12}",  # unbounded length
    f"{P}r{'0' * 12}",  # no call part
    f"{P}rZZZZZZZZZZZZ-{'0' * 12}",  # not hex
    f"{P}..-{'0' * 12}",  # would name a lock file outside the owner directory
    f"{P}",
    f"{P}r{'0' * 12}-{'0' * 12}-extra",
]


def test_hostile_names_are_left_alone_and_logged(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    for name in HOSTILE:
        (tmp_path / name).mkdir()
    stale = tmp_path / f"{P}r{secrets.token_hex(6)}-{secrets.token_hex(6)}"  # no live owner
    stale.mkdir()
    old_pid = tmp_path / f"{P}{2**22 + 7}-{secrets.token_hex(6)}"  # above any pid_max: gone
    old_pid.mkdir()
    with caplog.at_level(logging.WARNING, logger="runner.sandbox"):
        CallCgroups._remove_stale(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(HOSTILE)
    for name in HOSTILE:
        assert any(repr(str(tmp_path / name)) in r.getMessage() for r in caplog.records), name


def test_a_group_of_a_live_runner_is_kept(tmp_path: Path) -> None:
    live = CallCgroups({"": tmp_path}, 2, True)
    live._hold_owner_lock()
    try:
        mine = tmp_path / f"{P}{live.owner}-{secrets.token_hex(6)}"
        mine.mkdir()
        pid_named = tmp_path / f"{P}{os.getpid()}-{secrets.token_hex(6)}"
        pid_named.mkdir()
        CallCgroups._remove_stale(tmp_path)
        assert mine.is_dir() and pid_named.is_dir()
    finally:
        live._drop_owner_lock()
    CallCgroups._remove_stale(tmp_path)
    assert not mine.exists()


def test_detect_survives_hostile_names_on_the_real_cgroup_mount() -> None:
    if os.geteuid() != 0:
        pytest.skip("per-call cgroups are made by a root parent only")
    own = _own_cgroups()
    bases = [Path(point) / own[ctl].lstrip("/") for point, fs, opts in _mounts()
             for ctl in (("pids", "memory") if fs == "cgroup" else ("",))
             if (ctl in opts or fs == "cgroup2") and ctl in own]  # fmt: skip
    made: list[Path] = []
    try:
        for base in bases:
            for name in HOSTILE[:3]:
                with contextlib.suppress(OSError):
                    (base / name).mkdir()
                    made.append(base / name)
        if not made:
            pytest.skip("no writable cgroup mount here")
        cg = CallCgroups.detect()  # raised ValueError for every runner before the fix
        assert cg is not None
        cg.close()
        assert all(d.is_dir() for d in made)  # left alone
    finally:
        for d in made:
            with contextlib.suppress(OSError):
                d.rmdir()
