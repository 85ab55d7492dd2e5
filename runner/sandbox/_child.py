"""A started sandbox child of the bwrap backend (docs/sandbox.md): what it holds (:class:`_Child`:
its launcher process, a pidfd on its pid 1, its cgroups, host id and reaper tag), the memfds
passed to it, its pid 1 read from bwrap's ``--info-fd``, and its identity as the host sees it.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.sandbox._linux import CallGroup


def _host_view(pid: int, deadline: float) -> dict[str, Any] | None:
    """The sandbox's identity as the host sees it, read from the host's ``/proc`` while the
    sandbox's pid 1 runs: its uid and gid there, and its user namespace's maps relative to the
    host's (``None`` if it is already gone). The worker reads its ``uid_map`` from inside, which
    under newer bwrap (``--disable-userns`` makes a nested user namespace) names only bwrap's own
    namespace (``65534 65534 1``), not the host's uid."""
    try:
        # the maps are written by bwrap's launcher just after it reports pid 1
        while True:
            maps = {k: [int(x) for x in Path(f"/proc/{pid}/{k}").read_text().split()[:3]]
                    for k in ("uid_map", "gid_map")}  # fmt: skip
            if all(maps.values()) or time.monotonic() >= deadline:
                break
            time.sleep(0.001)
        # the uid the kernel charges the process with (its kuid), in the host's terms
        status = Path(f"/proc/{pid}/status").read_text()
    except (OSError, ValueError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    try:
        uid, gid = int(fields["Uid"].split()[0]), int(fields["Gid"].split()[0])
    except (KeyError, ValueError, IndexError):
        return None
    return {"uid": uid, "gid": gid, **maps}


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_child_pid(fd: int, deadline: float) -> int | None:
    """The host pid of the sandbox's pid 1, from bwrap's ``--info-fd`` JSON (None if bwrap failed)."""
    import json
    import select

    buf = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
        try:
            info = json.loads(buf)
        except ValueError:
            continue
        pid = info.get("child-pid") if isinstance(info, dict) else None
        return pid if isinstance(pid, int) and not isinstance(pid, bool) else None
    return None


@dataclass
class _Child:
    """A started sandbox (bwrap launcher ``proc``, a pidfd on its pid 1) and what it holds."""

    proc: subprocess.Popen[bytes]
    pidfd: int
    group: CallGroup | None
    uid: int | None
    born: float
    key: bytes
    tag: str | None = None  # its launcher's argv[0], registered with the reaper
    host_view: dict[str, Any] | None = None  # its identity as the host sees it (non-root)
    waiting_since: float = 0.0  # when it joined the pool
