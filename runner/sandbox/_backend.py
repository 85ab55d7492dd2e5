"""The backend interface, limits, results, and the parent-side supervisor shared by backends."""

from __future__ import annotations

import math
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

__all__ = ["Backend", "ChildResult", "KillReason", "Limits", "supervise"]

KillReason = Literal["timeout", "cpu", "memory", "output_cap", "signal"]
CPU_POLL_S = 0.05  # how often the parent reads a call's cgroup CPU usage


@dataclass(frozen=True)
class Limits:
    """Per-call resource limits. Wall clock and output are enforced by the parent; the rest by rlimits
    in the sandbox, and under a root parent ``nproc``, ``memory_bytes`` and ``cpu_s`` by per-call
    cgroups over the call's whole process tree (``pids.max``; a memory limit with no swap; one
    CPU of bandwidth and the parent polling the usage). Without those cgroups ``memory_bytes`` is
    not enforced and memory is bounded per process by ``address_space_bytes`` only, and
    ``cpu_s`` per process (the backend's ``describe()`` says which held)."""

    wall_s: float = 10.0
    # whole seconds for a study (RLIMIT_CPU counts whole seconds: the rlimit is the next whole
    # second up); a fraction is enforced exactly only by the per-call cpu cgroup
    cpu_s: float = 5
    address_space_bytes: int = 1 << 30
    file_size_bytes: int = 16 << 20
    nproc: int = 32
    nofile: int = 64
    output_bytes: int = 4 << 20
    tmpfs_bytes: int = 32 << 20
    memory_bytes: int = 512 << 20

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0 \
                    or not math.isfinite(value):
                raise ValueError(f"Limits.{name} must be a positive finite number, got {value!r}")

    def rlimits(self) -> dict[str, int]:
        return {
            "cpu_s": math.ceil(self.cpu_s),
            "address_space_bytes": int(self.address_space_bytes),
            "file_size_bytes": int(self.file_size_bytes),
            "nproc": int(self.nproc),
            "nofile": int(self.nofile),
        }


@dataclass(frozen=True)
class ChildResult:
    """What one sandboxed child did. ``exit_status`` is None when it ended by a signal."""

    exit_status: int | None
    term_signal: int | None
    stdout: bytes
    stderr: bytes
    wall_s: float
    kill_reason: KillReason | None
    cpu_s: float = 0.0


class Backend(Protocol):
    name: str

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes,
        limits: Limits,
        ro_binds: Sequence[tuple[Path, str]] = (),
    ) -> ChildResult: ...


class WorkerRunMixin:
    """``run`` for a backend whose worker applies the policy and then execs a command: both
    backends expose any command through the same worker entry point."""

    def run_worker(self, config: dict[str, Any], *, stdin: bytes, limits: Limits,
                   ro_binds: Sequence[tuple[Path, str]] = ()) -> ChildResult:
        raise NotImplementedError

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes,
        limits: Limits,
        ro_binds: Sequence[tuple[Path, str]] = (),
    ) -> ChildResult:
        """Run any command under the worker policy (the worker applies it, then execs ``argv``)."""
        if not argv:
            raise ValueError("argv must name a command")
        return self.run_worker({"mode": "exec", "argv": list(argv)}, stdin=stdin, limits=limits,
                               ro_binds=ro_binds)  # fmt: skip


def _exited_by(pid: int, deadline: float) -> bool:
    """Wait (without reaping) until ``pid`` exits or ``deadline`` passes; True if it exited."""
    try:
        pfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pfd = None
    if pfd is not None:
        try:
            ready, _, _ = select.select([pfd], [], [], max(deadline - time.monotonic(), 0.0))
            return bool(ready)
        finally:
            os.close(pfd)
    while time.monotonic() < deadline:  # no pidfd (macOS): poll
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if info is not None:
            return True
        time.sleep(0.002)
    return False


def supervise(
    proc: subprocess.Popen[bytes],
    stdin: bytes,
    limits: Limits,
    *,
    started: float,
    signal_offset: int | None = 128,
    inner_pidfd: int = -1,
    cpu_used: Callable[[], float] | None = None,
    oom_killed: Callable[[], bool] | None = None,
) -> ChildResult:
    """Feed ``stdin``, collect output incrementally, enforce the wall clock and the output cap.

    ``proc`` must lead its own process group (``start_new_session=True``): on a deadline or cap the
    whole group gets SIGKILL. ``signal_offset``: a backend whose launcher reports a child's death
    by signal N as exit code ``offset + N`` (bwrap: 128). ``inner_pidfd``: a pidfd on the
    sandbox's pid 1 (bwrap): it is killed first, so the kernel tears the pid namespace down and
    the launcher reaps it; killing the launcher first would orphan pid 1 to the host's init.
    ``cpu_used``: the CPU seconds the call's whole process tree has used so far (its cpu cgroup);
    polled every ``CPU_POLL_S``, and at ``limits.cpu_s`` the call is killed (reason ``cpu``).
    ``oom_killed``: whether the kernel's OOM killer ended a process of the call (its memory
    cgroup's ``oom_kill`` count rose): a call ended by SIGKILL then is recorded as ``memory``.
    """
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    pgid = proc.pid
    sel = selectors.DefaultSelector()
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    out = {out_fd: bytearray(), err_fd: bytearray()}
    for f in (proc.stdout, proc.stderr):
        os.set_blocking(f.fileno(), False)
        sel.register(f.fileno(), selectors.EVENT_READ)
    pending = memoryview(stdin)
    in_fd = proc.stdin.fileno()
    if pending:
        os.set_blocking(in_fd, False)
        sel.register(in_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    deadline = started + limits.wall_s
    total = 0
    reason: KillReason | None = None

    def kill_group() -> None:
        if inner_pidfd >= 0:
            try:
                signal.pidfd_send_signal(inner_pidfd, signal.SIGKILL)
            except OSError:
                pass
            # the launcher reaps pid 1 and exits on its own; the group kill is the fallback
            if _exited_by(proc.pid, time.monotonic() + 2.0):
                return
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    readers = 2
    cpu_seen = 0.0
    while readers:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            reason = "timeout"
            kill_group()
            break
        if cpu_used is not None:
            cpu_seen = cpu_used()
            if cpu_seen >= limits.cpu_s:
                reason = "cpu"
                kill_group()
                break
            remaining = min(remaining, CPU_POLL_S)
        for key, _ in sel.select(remaining):
            fd = key.fd
            if fd == in_fd:
                try:
                    n = os.write(fd, pending[:65536])
                    pending = pending[n:]
                except BrokenPipeError:
                    pending = pending[:0]
                if not pending:
                    sel.unregister(fd)
                    proc.stdin.close()
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                sel.unregister(fd)
                readers -= 1
                continue
            room = limits.output_bytes - total
            out[fd] += chunk[: max(room, 0)]
            total += len(chunk)
            if total > limits.output_bytes:
                reason = "output_cap"
                kill_group()
                readers = 0
                break
    sel.close()
    if not proc.stdin.closed:
        proc.stdin.close()
    # Both pipes are closed, but the child may live on (it can close its stdout): the deadline
    # still applies until it exits.
    while reason is None and not _exited_by(proc.pid, min(deadline, time.monotonic() + (
            CPU_POLL_S if cpu_used is not None else math.inf))):  # fmt: skip
        if time.monotonic() >= deadline:
            reason = "timeout"
            kill_group()
        elif cpu_used is not None:
            cpu_seen = cpu_used()
            if cpu_seen >= limits.cpu_s:
                reason = "cpu"
                kill_group()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    try:  # anything left in the group (the pid namespace normally took it already)
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for f in (proc.stdout, proc.stderr):
        f.close()
    cpu = usage.ru_utime + usage.ru_stime
    if cpu_used is not None:
        cpu = max(cpu, cpu_used(), cpu_seen)
    code = proc.returncode
    exit_status: int | None
    term: int | None
    if code < 0:
        exit_status, term = None, -code
    elif signal_offset is not None and signal_offset < code <= signal_offset + 64:
        exit_status, term = None, code - signal_offset
    else:
        exit_status, term = code, None
    if reason is None and term is not None:
        if term == signal.SIGXCPU:
            reason = "cpu"
        elif term == signal.SIGKILL and oom_killed is not None and oom_killed():
            reason = "memory"
        elif term == signal.SIGKILL and cpu >= limits.cpu_s:
            reason = "cpu"
        else:
            reason = "signal"
    return ChildResult(
        exit_status=exit_status,
        term_signal=term,
        stdout=bytes(out[out_fd]),
        stderr=bytes(out[err_fd]),
        wall_s=wall,
        kill_reason=reason,
        cpu_s=cpu,
    )
