"""Linux host facts the bwrap backend needs: Landlock ABI, user-namespace policy, a pids cgroup."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
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


class PidsCgroup:
    """A per-call pids cgroup (v1 hierarchy) for a root parent.

    Why: a root parent maps the sandbox's uid to host uid 0, and the kernel never applies
    RLIMIT_NPROC to uid 0 (``INIT_USER``), so the process-count limit needs a pids cgroup. The
    cgroup also lets the parent kill every process of the call after it ends.
    """

    def __init__(self, base: Path) -> None:
        self.base = base

    @classmethod
    def detect(cls) -> PidsCgroup | None:
        """A usable pids hierarchy, or None (non-root parent, none mounted, or read-only)."""
        if os.geteuid() != 0:
            return None
        mount = _pids_mount()
        if mount is None:
            return None
        probe = cls(mount)
        try:
            path = probe.create(4)
        except OSError:
            return None
        probe.remove(path)
        return probe

    def create(self, max_pids: int) -> Path:
        path = self.base / f"ect-sandbox-{os.getpid()}-{secrets.token_hex(6)}"
        path.mkdir()
        try:
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            path.rmdir()
            raise
        return path

    @staticmethod
    def join_fn(path: Path) -> tuple[int, object]:
        """An fd on ``cgroup.procs`` and a preexec function that moves the child into it."""
        fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)

        def join() -> None:
            os.write(fd, b"0")

        return fd, join

    @staticmethod
    def remove(path: Path) -> None:
        """Kill whatever is left in the cgroup, then remove it."""
        for _ in range(200):
            try:
                pids = (path / "cgroup.procs").read_text().split()
            except OSError:
                pids = []
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.005)
