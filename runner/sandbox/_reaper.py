"""The reaper: every process and cgroup a runner's sandboxes hold ends when the runner ends,
however it ends (SIGKILL at any instant included), without waiting for the next runner.

Why a separate process: bwrap's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) is the only guard a
sandbox has of its own, and it has gaps no timing closes: a launcher forked just before the
runner dies sets it too late, and the sandbox's pid 1, cloned by the launcher, can be left
blocked in its set-up (``eventfd_read``) with capabilities in its namespaces, re-parented to
init, for good. So each runner process starts one reaper (``python -I -S`` on this file, stdlib
only, in a session of its own so a terminal's signals do not reach it) and keeps the only other
end of a ``SOCK_SEQPACKET`` socket pair. The kernel closes that socket when the runner ends, in
any way; the reaper reads end-of-file and then, until nothing is left:

* SIGKILLs every process whose ``argv[0]`` is one of the runner's live launch tags (each bwrap
  launcher is started with a fresh random tag as its ``argv[0]``, which the sandbox's pid 1,
  a clone of it, carries too); killing a sandbox's pid 1 ends every process in its pid
  namespace (the kernel's rule for a namespace's init). A tag registered but never reported
  started (the runner ended during that launcher's ``Popen``) is waited for until a process
  carries it: the fork may have happened, with the exec still to come;
* SIGKILLs every process still running as one of the host ids the runner had leased;
* kills what is left in the runner's per-call cgroups (``cgroup.kill`` on cgroup v2) and
  removes them;
* then closes its copies of the host-id lease locks: the runner passes each lease's lock to the
  reaper (``SCM_RIGHTS``), so a lease stays held until no process of that id is left, and no
  other call is given the id while one lives.

It gives up after ``HARD_CAP_S`` (a group whose exited tasks the host's init has not reaped yet
is removed by the next runner's sweep). A runner that ends normally closes everything itself
first; the reaper then finds nothing and exits.

The reaper is not a child of its runner: it forks once as it starts, and the copy the runner
started exits, so the reaper is re-parented to init (or the nearest subreaper). Some hosts kill a
process's direct children as it ends -- Ray's workers do, by default
(``RAY_kill_child_processes_on_worker_exit``) -- and a reaper killed with the launchers it guards
would leave the sandbox being set up at that moment behind for good.

Whatever ends a reaper, a sandbox's pid 1 left in its set-up cannot outlive the next look:
:func:`orphaned_pid1s` finds every such process on the host (a launch tag as ``argv[0]``, the
init of a pid namespace of its own, and a parent that is not a launcher), and each reaper's
sweep and each backend's start kill them (``runner/sandbox/_reaping.py``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

__all__ = ["HARD_CAP_S", "MIN_WATCH_S", "main", "orphaned_pid1s", "reap"]

# After the runner's end the reaper keeps looking for this long at least. It is a margin, not
# the guard: a launcher forked before the end whose exec (which sets its tag) comes after it is
# waited for by its tag (registered, never reported started, not yet seen), up to HARD_CAP_S.
MIN_WATCH_S = 0.5
HARD_CAP_S = 30.0
_PREFIX = "ect-sandbox-"


def _procs() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isascii() and n.isdigit()]


def _argv0(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(256).split(b"\0", 1)[0].decode("ascii", "replace")
    except OSError:
        return ""


def _uids(pid: int) -> tuple[set[int], bool]:
    """The real, effective, saved and fs uids of ``pid``, and whether it is a zombie."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return set(), True
    ids: set[int] = set()
    zombie = False
    for line in text.splitlines():
        if line.startswith("Uid:"):
            ids = {int(v) for v in line.split()[1:] if v.isascii() and v.isdigit()}
        elif line.startswith("State:"):
            zombie = line.split()[1:2] == ["Z"]
    return ids, zombie


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return {}
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def _orphaned_pid1(pid: int) -> bool:
    """Whether ``pid`` (whose ``argv[0]`` is a launch tag) is a sandbox's pid 1 whose launcher is
    gone. bwrap's pid 1 is a clone of its launcher, so it carries the tag; it sets its own
    parent-death signal only once the launcher lets it past its set-up (bubblewrap issue 633),
    so one whose launcher died before that waits in ``eventfd_read`` for good, as uid 0 with
    every capability in its namespaces. A live sandbox's pid 1 has its launcher (tagged) as its
    parent, or dies with it; a launcher is not the init of a pid namespace."""
    status = _status(pid)
    nspid = status.get("NSpid", "").split()
    if len(nspid) < 2 or nspid[-1] != "1" or status.get("State", "Z")[:1] in ("Z", "X"):
        return False
    ppid = status.get("PPid", "")
    if not (ppid.isascii() and ppid.isdigit()):
        return False
    return not _argv0(int(ppid)).startswith(_PREFIX)


def orphaned_pid1s() -> list[int]:
    """Every sandbox pid 1 on this host whose launcher is gone (see :func:`_orphaned_pid1`),
    whichever runner started it."""
    return [pid for pid in _procs() if _argv0(pid).startswith(_PREFIX) and _orphaned_pid1(pid)]


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return False
    return True


def reap(tags: set[str], leases: dict[int, int], groups: list[tuple[str, str]],
         min_watch_s: float = MIN_WATCH_S, pending: set[str] | None = None) -> bool:  # fmt: skip
    """Kill every tagged process and every process of a leased id, empty and remove the groups;
    True when nothing was left (False: gave up at ``HARD_CAP_S``).

    ``pending``: tags whose launcher the runner never reported started (its ``Popen`` was under
    way when it ended): the fork may have happened and the exec may still come, so each is
    waited for until a process with it has been seen (and killed)."""
    pending = set(pending or ())
    start = time.monotonic()
    me = os.getpid()
    held = set(leases)
    while True:
        busy = False
        for pid in _procs():
            if pid == me:
                continue
            argv0 = _argv0(pid)
            if argv0 in tags:
                _kill(pid)
                busy = True
                pending.discard(argv0)
            elif argv0.startswith(_PREFIX) and _orphaned_pid1(pid):
                busy |= _kill(pid)  # another user's is not ours to end: not waited for
            elif held:
                ids, zombie = _uids(pid)
                if ids & held and not zombie:
                    _kill(pid)
                    busy = True
        for base, owner in groups:
            try:
                found = sorted(Path(base).glob(f"{_PREFIX}{owner}-*"))
            except OSError:
                continue
            for d in found:
                try:
                    (d / "cgroup.kill").write_text("1")  # cgroup v2: the whole group at once
                except OSError:
                    pass
                try:
                    for pid_text in (d / "cgroup.procs").read_text().split():
                        _kill(int(pid_text))
                except (OSError, ValueError):
                    pass
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    busy = True
        elapsed = time.monotonic() - start
        if not busy and not pending and elapsed >= min_watch_s:
            break
        if elapsed > HARD_CAP_S:
            return False
        time.sleep(0.01)
    for fd in leases.values():
        try:
            os.close(fd)
        except OSError:
            pass
    leases.clear()
    return True


def main() -> None:
    """The reaper process: its stdin is its end of the runner's socket pair."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    sock = socket.socket(fileno=0)
    # not a child of the runner (see the module's docstring): the copy the runner started exits
    # now, and the runner waits for it before it reads this process's pid
    if os.fork() != 0:
        os._exit(0)
    sock.send(b"P%d" % os.getpid())
    tags: set[str] = set()
    pending: set[str] = set()  # registered, launcher not reported started
    leases: dict[int, int] = {}
    groups: list[tuple[str, str]] = []
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 65536, 4)
        except InterruptedError:
            continue
        except OSError:
            break
        if not msg:  # the runner ended: its end of the pair was closed by the kernel
            for fd in fds:
                os.close(fd)
            break
        kind, arg = msg[:1], msg[1:].decode("utf-8")
        if kind == b"T":
            tags.add(arg)
            pending.add(arg)
        elif kind == b"S":  # "<tag> <pid>": its launcher's Popen returned (exec'd, tag set)
            pending.discard(arg.split(" ", 1)[0])
        elif kind == b"t":
            tags.discard(arg)
            pending.discard(arg)
        elif kind == b"L" and fds:
            if int(arg) in leases:
                os.close(leases[int(arg)])
            leases[int(arg)] = fds.pop(0)
        elif kind == b"U" and int(arg) in leases:
            os.close(leases.pop(int(arg)))
        elif kind == b"C":
            base, owner = json.loads(arg)
            groups.append((str(base), str(owner)))
        for fd in fds:
            os.close(fd)
    reap(tags, leases, groups, pending=pending)


if __name__ == "__main__":
    main()
    sys.exit(0)
