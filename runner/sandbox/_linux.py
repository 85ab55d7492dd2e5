"""Linux host facts the bwrap backend needs: Landlock ABI, user-namespace policy, a pids cgroup."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import signal
import threading
import time
from pathlib import Path

__all__ = ["PidsCgroup", "landlock_abi", "userns_restrictions"]


def landlock_abi() -> int:
    """The running kernel's Landlock ABI version (0 when Landlock is missing or disabled)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(444, None, ctypes.c_size_t(0), 1)
    return max(int(abi), 0)


def userns_restrictions() -> list[str]:
    """Plain-language reasons this host forbids the unprivileged user namespaces bwrap needs."""
    found: list[str] = []
    checks = (
        ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
         "AppArmor restricts unprivileged user namespaces "
         "(kernel.apparmor_restrict_unprivileged_userns=1, as on Ubuntu 23.10+)"),
        ("/proc/sys/kernel/unprivileged_userns_clone", "0",
         "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)"),
        ("/proc/sys/user/max_user_namespaces", "0",
         "user namespaces are disabled (user.max_user_namespaces=0)"),
    )  # fmt: skip
    for path, bad, why in checks:
        try:
            value = Path(path).read_text().strip()
        except OSError:
            continue
        if value == bad and (os.geteuid() != 0 or path.endswith("max_user_namespaces")):
            found.append(why)
    return found


def _pids_mount() -> Path | None:
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "cgroup" and "pids" in parts[3].split(","):
            return Path(parts[1])
    return None


def _pids_current(path: Path) -> int:
    try:
        return int((path / "pids.current").read_text())
    except (OSError, ValueError):
        return -1


class PidsCgroup:
    """Per-call pids cgroups (v1 hierarchy) for a root parent, pooled across calls.

    Why: a root parent maps the sandbox's uid to host uid 0, and the kernel never applies
    RLIMIT_NPROC to uid 0 (``INIT_USER``), so the process-count limit needs a pids cgroup. The
    cgroup also lets the parent kill every process of the call after it ends. Creating and
    removing a cgroup per call costs several milliseconds, so emptied cgroups are reused (one per
    concurrent call) and removed at exit.
    """

    _PREFIX = "ect-sandbox-"

    def __init__(self, base: Path) -> None:
        self.base = base
        self._free: list[Path] = []
        self._draining: list[Path] = []
        self._all: set[Path] = set()
        self._lock = threading.Lock()
        atexit.register(self.close)

    @classmethod
    def detect(cls) -> PidsCgroup | None:
        """A usable pids hierarchy, or None (non-root parent, none mounted, or read-only)."""
        if os.geteuid() != 0:
            return None
        mount = _pids_mount()
        if mount is None:
            return None
        cls._remove_stale(mount)
        probe = cls(mount)
        try:
            path = probe.acquire(4)
        except OSError:
            return None
        probe.release(path)
        return probe

    @classmethod
    def _remove_stale(cls, base: Path) -> None:
        """Remove empty cgroups left by runner processes that no longer exist."""
        try:
            entries = list(base.glob(cls._PREFIX + "*"))
        except OSError:
            return
        for path in entries:
            try:
                owner = int(path.name[len(cls._PREFIX) :].split("-", 1)[0])
                os.kill(owner, 0)
                continue  # owner alive
            except (ValueError, PermissionError):
                continue
            except ProcessLookupError:
                pass
            with contextlib.suppress(OSError):
                path.rmdir()

    def acquire(self, max_pids: int) -> Path:
        with self._lock:
            # a drained cgroup is reusable once nothing is charged to it any more
            for path in list(self._draining):
                if _pids_current(path) == 0:
                    self._draining.remove(path)
                    self._free.append(path)
            reused = self._free.pop() if self._free else None
        if reused is not None:
            path = reused
        else:
            path = self.base / f"{self._PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
            path.mkdir()
            with self._lock:
                self._all.add(path)
        (path / "pids.max").write_text(str(max_pids))
        return path

    @staticmethod
    def adopt(path: Path, pid1: int, deadline: float) -> bool:
        """Move a starting bwrap sandbox (its pid 1 and that one's children) into ``path``.

        The move runs while the sandbox starts, because a cgroup-v1 migration can wait for an RCU
        grace period (tens of ms on a busy host); the worker does not run tool code until it sees
        itself in this cgroup (``cgroup_gate`` in its config), so nothing escapes the limit.
        Returns True once the command under pid 1 is in.
        """
        procs = path / "cgroup.procs"
        moved: set[int] = set()

        def move(pid: int) -> None:
            try:
                procs.write_text(str(pid))
                moved.add(pid)
            except ProcessLookupError:
                moved.add(pid)
            except OSError:
                pass

        move(pid1)
        children = Path(f"/proc/{pid1}/task/{pid1}/children")
        delay = 0.0002
        while time.monotonic() < deadline:
            try:
                kids = [int(k) for k in children.read_text().split()]
            except (OSError, ValueError):
                return False  # pid 1 is gone
            for k in kids:
                if k not in moved:
                    move(k)
            if kids:
                return True
            time.sleep(delay)
            delay = min(delay * 2, 0.005)
        return False

    def release(self, path: Path) -> None:
        """Kill whatever is still listed in the cgroup and put it back for reuse.

        Tasks that have exited but are not yet reaped are not listed in ``cgroup.procs`` yet still
        count against ``pids.max``: bwrap's launcher exits as soon as its pid 1 reports the exit
        status, so pid 1 is reaped by the host's init, which in a container may take a while. The
        cgroup therefore drains (no waiting here) and is reused only once its count is zero.
        """
        delay = 0.0002
        for _ in range(400):
            try:
                pids = (path / "cgroup.procs").read_text().split()
            except OSError:
                return
            if not pids:
                with self._lock:
                    self._draining.append(path)
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
        # still populated after ~4 s: never reused (close() tries to remove it at exit)

    def close(self) -> None:
        with self._lock:
            paths, self._all, self._free, self._draining = list(self._all), set(), [], []
        for path in paths:
            with contextlib.suppress(OSError):
                path.rmdir()
