"""Linux host facts the bwrap backend needs: Landlock ABI, user-namespace policy, per-call cgroups."""

from __future__ import annotations

import atexit
import collections
import contextlib
import fcntl
import functools
import logging
import os
import re
import secrets
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from runner.sandbox._errors import SandboxUnavailable
from runner.sandbox._reaping import reaper_link

__all__ = ["CallCgroups", "CallGroup", "HostIds", "landlock_abi", "userns_restrictions"]


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


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of every cgroup mount."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            out.append((parts[1], parts[2], set(parts[3].split(","))))
    return out


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under ``""`` its v2 path."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctl in parts[1].split(",") if parts[1] else [""]:
            out[ctl] = parts[2]
    return out


def _count(path: Path, name: str) -> int:
    try:
        return int((path / name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1


_CPU_PERIOD_US = 100_000


def _in_group(pid: int, gate: dict[str, str]) -> bool:
    """True when ``pid`` is already in every cgroup of ``gate`` (``/proc/PID/cgroup``)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return False
    seen = set()
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for ctl in parts[1].split(",") if parts[1] else [""]:
                if ctl in gate and parts[2].endswith("/" + gate[ctl]):
                    seen.add(ctl)
    return seen == set(gate)


# The only per-call group names a runner writes: ``ect-sandbox-<owner>-<12 hex>`` where the owner
# is ``r`` + 12 hex digits (a random token of the runner), or up to 10 ASCII digits (the pid an
# older runner used). Parsed strictly: ``str.isdigit`` is also true for "²" or "٣".
_STALE_NAME = re.compile(
    r"ect-sandbox-(?:(?P<token>r[0-9a-f]{12})|(?P<pid>[0-9]{1,10}))-[0-9a-f]{12}", re.ASCII)
_log = logging.getLogger("runner.sandbox")


def _write(path: Path, value: str) -> None:
    path.write_text(value)



class HostIds:
    """The host uids/gids a root parent runs calls as: one per call, leased for its life.

    Why one per call: per-uid kernel quotas and namespaces (the key quota and ``/proc/keys``,
    inotify instances, ``RLIMIT_NPROC``, user-namespace counts) are keyed by uid, so calls that
    share a uid share them: one call could fill a quota every concurrent call needs, or pass data
    to another through what a uid can see. Ids are leased least recently used first, so an id
    comes back only after every other id of the range has been used since. Every id of the range
    must belong to no account (checked here); the range is ``BwrapBackend(host_ids=...)``.
    """

    def __init__(self, ids: range) -> None:
        if not isinstance(ids, range) or len(ids) == 0 or ids.step != 1:
            raise ValueError(f"host_ids must be a non-empty range of ids, got {ids!r}")
        if ids.start <= 0 or ids.stop > 2**32 - 1:
            raise ValueError(f"host_ids must be non-root ids below 2**32-1, got {ids!r}")
        import grp
        import pwd

        for i in ids:
            for db, what in ((pwd.getpwuid, "user"), (grp.getgrgid, "group")):
                try:
                    entry = db(i)
                except KeyError:
                    continue
                raise SandboxUnavailable(
                    f"host id {i} of the sandbox's range {ids.start}-{ids.stop - 1} belongs to "
                    f"{what} {entry[0]!r}: choose a range of ids no account uses (host_ids=)")
        self.ids = ids
        self._free: collections.deque[int] = collections.deque(ids)
        self._held: dict[int, int] = {}
        self._cond = threading.Condition()

    def lease(self, timeout_s: float) -> int:
        """The least recently used free id; waits up to ``timeout_s`` for one to be released.

        An id is held by an exclusive ``flock`` on its lock file (``/run/ect-sandbox-owners/
        uid-N.lock``) for the call's life, so other backends and other runner processes on the
        host never lease it at the same time either."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for uid in list(self._free):
                    fd = _try_lock(f"uid-{uid}.lock")
                    if fd is not None:
                        try:  # the reaper holds the lease too, until no process of it lives
                            reaper_link().hold(uid, fd)
                        except SandboxUnavailable:
                            os.close(fd)
                            raise
                        self._free.remove(uid)
                        self._held[uid] = fd
                        return uid
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SandboxUnavailable(
                        f"all {len(self.ids)} sandbox host ids are in use by concurrent calls: "
                        "give a larger host_ids range or run fewer calls at once")
                # another process's release does not notify us: look again now and then
                self._cond.wait(min(left, 0.05))

    def release(self, uid: int) -> None:
        with self._cond:
            fd = self._held.pop(uid, None)
            if fd is not None:
                reaper_link().drop(uid)
                os.close(fd)  # drops the flock (once the reaper has dropped its copy too)
            self._free.append(uid)
            self._cond.notify()

    def describe(self) -> list[int]:
        return [self.ids.start, self.ids.stop - 1]


def _try_lock(name: str) -> int | None:
    """An fd holding an exclusive flock on ``name`` in the owner directory, or None if taken."""
    fd = os.open(_owner_dir() / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@functools.cache
def _owner_dir() -> Path:
    """Where the lock files live: ``/run/ect-sandbox-owners`` for root; for another user a
    directory of its own (``$XDG_RUNTIME_DIR/ect-sandbox-owners``, else
    ``<tmp>/ect-sandbox-owners-<uid>``), used only if it is the user's and no one else's."""
    uid = os.geteuid()
    if uid == 0:
        places = [Path("/run/ect-sandbox-owners"),
                  Path(tempfile.gettempdir()) / "ect-sandbox-owners"]  # fmt: skip
    else:
        places = [Path(tempfile.gettempdir()) / f"ect-sandbox-owners-{uid}"]
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        if runtime and Path(runtime).is_absolute():
            places.insert(0, Path(runtime) / "ect-sandbox-owners")
    for d in places:
        try:
            d.mkdir(mode=0o700, exist_ok=True)
            st = d.lstat()
            if st.st_uid == uid and not st.st_mode & 0o077 and d.is_dir() and not d.is_symlink():
                return d
        except OSError:
            continue
    raise OSError("no directory for the cgroup owner locks")


@dataclass(frozen=True)
class CallGroup:
    """The cgroup directories of one call (one per v1 controller, or one v2 group).

    ``gate`` maps each ``/proc/self/cgroup`` controller field (``"pids"``, ``"memory"``, or ``""``
    for v2) to the directory name the worker must see itself in before running tool code.
    """

    dirs: tuple[Path, ...]
    gate: dict[str, str]
    cpu: Path | None = None  # the directory holding the cpu bandwidth and usage files
    cpuacct: Path | None = None  # v1: the cpuacct directory (v2: cpu.stat in ``cpu``)


class CallCgroups:
    """Per-call cgroups bounding the whole process tree of a call.

    Each call gets ``pids.max`` (processes) and a memory limit with no swap: on cgroup v2 one
    group with ``pids.max``, ``memory.max`` and ``memory.swap.max = 0``; on cgroup v1 a pids and a
    memory cgroup (``memory.limit_in_bytes``, and ``memory.memsw.limit_in_bytes`` equal to it when
    swap accounting exists). Groups are created beneath the parent's own cgroup (v1; on v2 beneath
    it or, as v2 requires, beside it), so the host's or container's limits above the parent still
    bound the calls; they are reused once drained and removed at exit.

    A root parent, or a user with a delegated cgroup v2 subtree: creating cgroups needs write
    access to the hierarchy, which an unprivileged user has only with delegation (systemd
    ``Delegate=yes``); without it the documented fallback applies (RLIMIT_AS per process,
    RLIMIT_NPROC for processes), and :meth:`BwrapBackend.describe` records which bounds were in
    force.
    """

    _PREFIX = "ect-sandbox-"

    def __init__(self, bases: dict[str, Path], version: int, swap_bounded: bool,
                 cpu: bool = False) -> None:  # fmt: skip
        # controller -> base directory: "pids", "memory" (and "cpu", "cpuacct" when the cpu
        # controller is usable) on v1, "" on v2
        self.bases = bases
        self.version = version
        self.swap_bounded = swap_bounded
        self.cpu = cpu  # the call's processes share one CPU-time budget (see cpu_usage)
        # the name carries a random token of this runner, never its pid; a lock file held for
        # the runner's life tells another runner's stale-group sweep that it is alive
        self.owner = "r" + secrets.token_hex(6)  # never all digits (an old runner's pid)
        self._owner_fd = -1
        self._free: list[CallGroup] = []
        self._draining: list[CallGroup] = []
        self._all: list[CallGroup] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    # -- discovery ------------------------------------------------------------------------------

    @classmethod
    def detect(cls) -> CallCgroups | None:
        """Usable per-call cgroups with both pids and memory control, or None.

        A root parent uses cgroup v1 or v2; another user only a cgroup v2 subtree delegated to it
        (systemd ``Delegate=yes``: a user service, ``systemd-run --user --scope``), which is the
        one place it may create groups and move its own processes."""
        root = os.geteuid() == 0
        own = _own_cgroups()
        mounts = _mounts()
        v1: dict[str, Path] = {}
        for point, fstype, opts in mounts:
            if fstype == "cgroup" and root:
                for ctl in ("pids", "memory", "cpu", "cpuacct"):
                    if ctl in opts and ctl in own:
                        v1[ctl] = Path(point) / own[ctl].lstrip("/")
        candidates: list[CallCgroups] = []
        link = reaper_link()
        if {"pids", "memory"} <= set(v1):
            swap = (v1["memory"] / "memory.memsw.limit_in_bytes").exists()
            cpu = {"cpu", "cpuacct"} <= set(v1) and (v1["cpu"] / "cpu.cfs_quota_us").exists() \
                and (v1["cpuacct"] / "cpuacct.usage").exists()
            keys = ("pids", "memory", "cpu", "cpuacct") if cpu else ("pids", "memory")
            candidates.append(cls({k: v1[k] for k in keys}, 1, swap, cpu))
            if cpu:  # without a usable cpu controller: recorded as absent, not refused
                candidates.append(cls({"pids": v1["pids"], "memory": v1["memory"]}, 1, swap))
        for point, fstype, _ in mounts:
            if fstype == "cgroup2":
                # v2 forbids processes in a group that hands controllers to children, and the
                # parent's own group holds the parent; so next to it (its parent group, e.g.
                # the systemd slice of a session scope) is the usual place that works
                own_v2 = Path(own.get("", "/"))
                for rel in (own_v2, own_v2.parent) if own_v2 != own_v2.parent else (own_v2,):
                    for cpu in (True, False):
                        candidates.append(cls({"": Path(point) / str(rel).lstrip("/")}, 2, True,
                                              cpu))  # fmt: skip
        for probe in candidates:
            for base in probe.bases.values():
                probe._remove_stale(base)
            try:
                probe._prepare()
                probe._hold_owner_lock()
                # the reaper knows the groups before the first exists: a runner killed from now
                # on leaves none behind
                for base in probe.bases.values():
                    link.watch_groups(base, probe.owner)
                group = probe.acquire(4, 64 << 20)
            except OSError:
                probe._drop_owner_lock()
                continue
            probe.release(group)
            return probe
        return None

    def _hold_owner_lock(self) -> None:
        if self._owner_fd >= 0:
            return
        fd = os.open(_owner_dir() / f"{self.owner}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                     0o600)  # fmt: skip
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._owner_fd = fd

    def _drop_owner_lock(self) -> None:
        if self._owner_fd >= 0:
            with contextlib.suppress(OSError):
                (_owner_dir() / f"{self.owner}.lock").unlink()
            os.close(self._owner_fd)
            self._owner_fd = -1

    def _prepare(self) -> None:
        if self.version != 2:
            return
        base = self.bases[""]
        want = {"pids", "memory", *(("cpu",) if self.cpu else ())}
        have = set((base / "cgroup.controllers").read_text().split())
        if not want <= have:
            raise OSError(f"cgroup v2 at {base} lacks one of the {sorted(want)} controllers")
        enabled = set((base / "cgroup.subtree_control").read_text().split())
        if not want <= enabled:
            # fails (EBUSY) when the parent's own group holds processes: no v2 then
            _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(want)))

    @classmethod
    def _remove_stale(cls, base: Path) -> None:
        """Remove empty cgroups left by runner processes that no longer exist.

        Never raises: a name this runner did not write (see ``_STALE_NAME``) is left alone and
        logged, and any other failure is logged, so one odd directory under a cgroup mount
        cannot stop a backend from starting (it runs from :meth:`detect`)."""
        try:  # names sorted as strings: sorting Path objects cost ~0.2 s with ~4,000 groups
            names = sorted(n for n in os.listdir(base) if n.startswith(cls._PREFIX))
        except OSError:
            return
        for path in (base / n for n in names):
            try:
                cls._remove_if_stale(path)
            except Exception as e:  # never out of detect(): logged, the directory left alone
                _log.warning("stale-cgroup sweep: left %r alone (%s: %s)", str(path),
                             type(e).__name__, e)  # fmt: skip

    @classmethod
    def _remove_if_stale(cls, path: Path) -> None:
        m = _STALE_NAME.fullmatch(path.name)
        if m is None:
            _log.warning("stale-cgroup sweep: left %r alone (not a name this runner writes)",
                         str(path))  # fmt: skip
            return
        token, pid = m.group("token"), m.group("pid")
        if pid is not None:  # an older runner named its groups by its pid
            try:
                os.kill(int(pid), 0)
                return  # owner alive
            except (PermissionError, OverflowError):
                return
            except ProcessLookupError:
                pass
        elif not cls._owner_gone(token):
            return
        with contextlib.suppress(OSError):
            path.rmdir()

    @staticmethod
    def _owner_gone(owner: str) -> bool:
        """True when no live runner holds ``owner``'s lock (its groups are stale)."""
        try:
            lock = _owner_dir() / f"{owner}.lock"
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # held: the owner is alive
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            lock.unlink()
        return True

    def bounds(self) -> dict[str, str]:
        """Which bound each resource gets from these cgroups (for records)."""
        v = f"cgroup-v{self.version}"
        cpu = (f"{v} cpu.max 1 CPU + cpu.stat usage, killed at cpu_s" if self.version == 2 else
               f"{v} cpu.cfs_quota_us 1 CPU + cpuacct.usage, killed at cpu_s")  # fmt: skip
        return {"processes": f"{v} pids.max", "memory": f"{v} per-call memory limit",
                "swap": f"{v} none allowed" if self.swap_bounded else
                "not bounded (no swap accounting on this host)",
                **({"cpu": cpu} if self.cpu else {})}  # fmt: skip

    # -- CPU time of a call ---------------------------------------------------------------------

    @staticmethod
    def cpu_usage(group: CallGroup) -> float:
        """CPU seconds charged to ``group`` so far (all its processes together; -1 unknown)."""
        try:
            if group.cpuacct is not None:
                return int((group.cpuacct / "cpuacct.usage").read_text()) / 1e9
            if group.cpu is not None:
                for line in (group.cpu / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
        except (OSError, ValueError):
            pass
        return -1.0

    def oom_kills(self, group: CallGroup) -> int:
        """How many processes of ``group`` the OOM killer has ended so far (-1 unknown):
        ``memory.events`` ``oom_kill`` on v2, ``memory.oom_control`` ``oom_kill`` on v1."""
        path = (group.dirs[0] / "memory.events" if self.version == 2
                else group.dirs[1] / "memory.oom_control")  # fmt: skip
        try:
            for line in path.read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return -1

    # -- per call -------------------------------------------------------------------------------

    def _limit(self, group: CallGroup, max_pids: int, memory_bytes: int) -> None:
        if self.version == 2:
            d = group.dirs[0]
            _write(d / "pids.max", str(max_pids))
            _write(d / "memory.max", str(memory_bytes))
            _write(d / "memory.swap.max", "0")
            if self.cpu:  # one CPU's worth per period: CPU seconds never outrun the wall clock
                _write(d / "cpu.max", f"{_CPU_PERIOD_US} {_CPU_PERIOD_US}")
            return
        pids_dir, mem_dir = group.dirs[:2]
        _write(pids_dir / "pids.max", str(max_pids))
        if group.cpu is not None:
            _write(group.cpu / "cpu.cfs_period_us", str(_CPU_PERIOD_US))
            _write(group.cpu / "cpu.cfs_quota_us", str(_CPU_PERIOD_US))
        order = ["memory.limit_in_bytes"]
        if self.swap_bounded:
            order.append("memory.memsw.limit_in_bytes")
        try:  # memsw must stay >= the limit: lower the limit first, or raise memsw first
            for name in order:
                _write(mem_dir / name, str(memory_bytes))
        except OSError:
            for name in reversed(order):
                _write(mem_dir / name, str(memory_bytes))

    def acquire(self, max_pids: int, memory_bytes: int) -> CallGroup:
        with self._lock:
            for group in list(self._draining):  # reusable once nothing is charged any more
                if _count(group.dirs[0], "pids.current") == 0:  # dirs[0] holds pids.max
                    self._draining.remove(group)
                    self._free.append(group)
            reused = self._free.pop() if self._free else None
        if reused is not None:
            group = reused
        else:
            name = f"{self._PREFIX}{self.owner}-{secrets.token_hex(6)}"
            dirs: list[Path] = []
            try:
                for base in dict.fromkeys(self.bases.values()):  # co-mounted: one directory
                    (base / name).mkdir()
                    dirs.append(base / name)
            except OSError:
                for d in dirs:
                    with contextlib.suppress(OSError):
                        d.rmdir()
                raise
            cpu = cpuacct = None
            if self.cpu:
                cpu = (self.bases["cpu"] if self.version == 1 else self.bases[""]) / name
                cpuacct = self.bases["cpuacct"] / name if self.version == 1 else None
            group = CallGroup(tuple(dirs), {ctl: name for ctl in self.bases}, cpu, cpuacct)
            with self._lock:
                self._all.append(group)
        self._limit(group, max_pids, memory_bytes)
        return group

    @staticmethod
    def adopt(group: CallGroup, pid1: int, deadline: float) -> bool:
        """Move a starting bwrap sandbox (its pid 1 and that one's children) into ``group``.

        The move runs while the sandbox starts, because a cgroup-v1 migration can wait for an RCU
        grace period (tens of ms on a busy host); the worker does not run tool code until it sees
        itself in every cgroup of the call (``cgroup_gate`` in its config), so nothing escapes
        the limits. Returns True once the command under pid 1 is in.
        """
        moved: set[int] = set()

        def move(pid: int) -> None:
            ok = True
            for d in group.dirs:
                try:
                    (d / "cgroup.procs").write_text(str(pid))
                except ProcessLookupError:
                    pass
                except OSError:
                    ok = False
            if ok:
                moved.add(pid)

        move(pid1)
        children = Path(f"/proc/{pid1}/task/{pid1}/children")
        delay = 0.0002
        while time.monotonic() < deadline:
            try:
                kids = [int(k) for k in children.read_text().split()]
            except (OSError, ValueError):
                return False  # pid 1 is gone
            for k in kids:
                if k not in moved and not _in_group(k, group.gate):
                    move(k)  # forked before pid 1 was in every group (each move costs a v1
                    # migration, which can wait for an RCU grace period)
            if kids:
                return True
            time.sleep(delay)
            delay = min(delay * 2, 0.005)
        return False

    def release(self, group: CallGroup) -> None:
        """Kill whatever is still listed in the call's cgroups and put them back for reuse.

        Tasks that have exited but are not yet reaped are not listed in ``cgroup.procs`` yet still
        count against ``pids.max``: bwrap's launcher exits as soon as its pid 1 reports the exit
        status, so pid 1 is reaped by the host's init, which in a container may take a while. The
        group therefore drains (no waiting here) and is reused only once its count is zero.
        """
        delay = 0.0002
        for _ in range(400):
            pids: list[str] = []
            try:
                for d in group.dirs:
                    pids += (d / "cgroup.procs").read_text().split()
            except OSError:
                return
            if not pids:
                with self._lock:
                    self._draining.append(group)
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
        # still populated after ~4 s: never reused (close() tries to remove it at exit)

    def close(self) -> None:
        with self._lock:
            groups, self._all, self._free, self._draining = list(self._all), [], [], []
        for group in groups:
            for d in group.dirs:
                with contextlib.suppress(OSError):
                    d.rmdir()
        self._drop_owner_lock()
