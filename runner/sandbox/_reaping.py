"""This runner process's link to its reaper (``runner/sandbox/_reaper.py``), and the sweep that
ends sandboxes a killed reaper left behind: see docs/sandbox.md, "When the runner ends"."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import signal
import socket
import sys
import threading
from pathlib import Path

from runner.sandbox._errors import SandboxUnavailable

__all__ = ["ReaperLink", "reaper_link", "sweep_orphaned_sandboxes"]

_log = logging.getLogger("runner.sandbox")

# how long a starting reaper may take to say its pid (an interpreter start; a loaded host is slow)
_REAPER_HELLO_S = 60.0


class ReaperLink:
    """This runner process's end of its reaper (``runner/sandbox/_reaper.py``): the socket whose
    closing, by the kernel when the runner ends in any way, tells the reaper to end every
    sandbox process, host-id lease and cgroup the runner registered with it.

    Raises:
        SandboxUnavailable: the reaper cannot be started, or has gone (no call is started
            without one: a runner killed then would leave its sandboxes behind).
    """

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        script = str(Path(__file__).with_name("_reaper.py"))
        try:
            first = os.posix_spawn(
                sys.executable, [sys.executable, "-I", "-S", script], {},
                file_actions=[(os.POSIX_SPAWN_DUP2, theirs.fileno(), 0),
                              # nor does it keep the runner's output open after the runner ends
                              (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                              (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)],
                setsid=True)  # fmt: skip
            # the process started forks the reaper and exits, so the reaper is no child of this
            # runner (a host that kills a process's children as it ends cannot take it along)
            os.waitpid(first, 0)
            ours.settimeout(_REAPER_HELLO_S)
            hello = ours.recv(64)
            ours.settimeout(None)
            if not (hello[:1] == b"P" and hello[1:].isdigit()):
                raise OSError(f"it said {hello[:32]!r} instead of its pid")
            self.pid = int(hello[1:])
        except OSError as e:
            ours.close()
            raise SandboxUnavailable(f"cannot start the sandbox's reaper process: {e}") from e
        finally:
            theirs.close()
        self.sock = ours
        self.owner_pid = os.getpid()
        self._lock = threading.Lock()
        # at exit (after the backends destroyed their children) the reaper sweeps and ends
        atexit.register(self.close)

    def send(self, msg: bytes, fds: list[int] | None = None) -> None:
        try:
            with self._lock:
                if fds:
                    socket.send_fds(self.sock, [msg], fds)
                else:
                    self.sock.send(msg)
        except OSError as e:
            raise SandboxUnavailable(
                f"the sandbox's reaper process (pid {self.pid}) is gone ({e.strerror or e}): "
                "sandboxes started now could outlive this runner, so none is started") from e

    def tag(self) -> str:
        """A fresh launch tag, registered: a bwrap launcher started with it as ``argv[0]`` (and
        its clone, the sandbox's pid 1) is killed by the reaper if the runner ends."""
        tag = "ect-sandbox-" + secrets.token_hex(8)
        self.send(b"T" + tag.encode())
        return tag

    def started(self, tag: str, pid: int) -> None:
        """``tag``'s launcher has exec'd (its ``Popen`` returned): the reaper need not wait for
        it to appear (it kills it by its tag if the runner ends)."""
        self.send(b"S%s %d" % (tag.encode(), pid))

    def untag(self, tag: str) -> None:
        with contextlib.suppress(SandboxUnavailable):
            self.send(b"t" + tag.encode())

    def hold(self, uid: int, fd: int) -> None:
        """Give the reaper a copy of ``uid``'s lease lock: held until no process of it lives."""
        self.send(b"L%d" % uid, [fd])

    def drop(self, uid: int) -> None:
        with contextlib.suppress(SandboxUnavailable):
            self.send(b"U%d" % uid)

    def watch_groups(self, base: Path, owner: str) -> None:
        """The reaper removes ``base/ect-sandbox-<owner>-*`` (killing what is left in them)."""
        from runner.canonical import canonical_bytes

        self.send(b"C" + canonical_bytes([str(base), owner]))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


_LINK: ReaperLink | None = None
_LINK_LOCK = threading.Lock()


def reaper_link() -> ReaperLink:
    """This process's reaper (started on first use; a forked child starts its own)."""
    global _LINK
    with _LINK_LOCK:
        if _LINK is None or _LINK.owner_pid != os.getpid():
            _LINK = ReaperLink()
        return _LINK


def sweep_orphaned_sandboxes() -> int:
    """SIGKILL every sandbox pid 1 on this host left in its set-up by a launcher that died (see
    ``orphaned_pid1s`` in ``runner/sandbox/_reaper.py``), whichever runner started it: the
    backstop for a reaper that was itself killed. Never raises; returns how many were ended
    (another user's are left, and logged)."""
    from runner.sandbox._reaper import orphaned_pid1s

    ended = 0
    try:
        found = orphaned_pid1s()
    except Exception as e:  # never out of a backend's start: logged
        _log.warning("orphaned-sandbox sweep failed (%s: %s)", type(e).__name__, e)
        return 0
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
            ended += 1
        except OSError as e:
            _log.warning("orphaned-sandbox sweep: cannot end pid %d (%s)", pid, e.strerror or e)
    if ended:
        _log.warning("orphaned-sandbox sweep: ended %d sandbox pid 1(s) whose launcher was gone",
                     ended)  # fmt: skip
    return ended


def _forget_link_in_child() -> None:
    # a forked copy must not keep the parent's reaper waiting: it closes its copy of the socket
    global _LINK, _LINK_LOCK
    _LINK_LOCK = threading.Lock()
    if _LINK is not None:
        _LINK.close()
        _LINK = None


os.register_at_fork(after_in_child=_forget_link_in_child)
