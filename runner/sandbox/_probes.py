"""Run the denial probes of ``preflight/probes.toml`` through a real backend and judge them."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import secrets
import signal
import socket
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runner.canonical import canonical_bytes, loads_strict
from runner.errors import FormatError, SandboxError
from runner.sandbox._backend import ChildResult, Limits
from runner.sandbox._pins import REPO_ROOT

__all__ = ["CANARY_PREFIX", "PREFLIGHT_DIR", "PROBE_LIMITS", "PROBE_WORKERS", "Probe", "ProbeResult",
           "iter_probes", "load_probes", "run_probes"]

PREFLIGHT_DIR = REPO_ROOT / "preflight"
CANARY_PREFIX = "ECTCANARY-"
CANARY_ENV = "ECT_PROBE_CANARY_SECRET"
_CONTEXTS = (None, "listener", "canary", "snapshot", "orphan", "keyring", "parent_uid",
             "parent_pid", "boot_id", "record", "sibling")


def _layers(backend: Any) -> dict[str, Any]:
    layers = getattr(backend, "layers", None)
    return layers() if callable(layers) else {}


# Conditions under which a probe's documented fallback expectation applies instead of its
# ``expect``: each is a recorded fact about the layers in force (``backend.layers()``).
FALLBACK_WHEN: dict[str, Any] = {
    # no per-call cgroups (unprivileged parent without delegation): memory is per process only
    "no_call_cgroups": lambda L: bool(L) and L.get("cgroups") is None,
    # Landlock below ABI 6 and a non-root parent: pid 1 has the sandbox's own uid, and a pid
    # namespace's init ignores signals it has no handler for, so kill() "succeeds" and does nothing
    "no_signal_scoping_same_uid": lambda L: bool(L) and L.get("landlock_abi", 0) < 6
    and os.geteuid() != 0,
    # a non-root parent: the sandbox runs as the parent's own uid, so that user's keyrings
    # (user and user-session) stay viewable although the session keyring was left
    "sandbox_is_parent_uid": lambda L: bool(L) and L.get("host_uid") == os.geteuid() != 0,
    # no Landlock at all (only with allow_weaker_landlock_unsafe): exec from /tmp is not refused
    "no_landlock": lambda L: bool(L) and L.get("landlock_abi", 0) < 1,
    # the record says CPU is bounded per process (no per-call cpu cgroup): each process has its
    # own RLIMIT_CPU, only the wall clock bounds the call's processes together
    "cpu_per_process": lambda L: bool(L)
    and str((L.get("bounds") or {}).get("cpu", "")).startswith("rlimit"),
    # a kernel (or architecture) without syscalls that bypass seccomp: the filter answers them
    "no_seccomp_passthrough": lambda L: bool(L)
    and not (L.get("seccomp") or {}).get("kernel_passthrough"),
}

_RLIMIT_NAMES = {"RLIMIT_CPU": "cpu_s", "RLIMIT_AS": "address_space_bytes",
                 "RLIMIT_FSIZE": "file_size_bytes", "RLIMIT_NPROC": "nproc",
                 "RLIMIT_NOFILE": "nofile"}  # fmt: skip


def _claimed_rlimits(layers: dict[str, Any], limits: Limits) -> dict[str, int]:
    """The rlimits the record says are in force (listed under ``rlimits`` or named by a layer or
    fallback of a guarantee), each with the value the call's ``limits`` give it."""
    claimed = {k for k, v in (layers.get("rlimits") or {}).items() if v is not None}
    for held in (layers.get("guarantees") or {}).values():
        for text in held:
            for name, key in _RLIMIT_NAMES.items():
                if name in text:
                    claimed.add(key)
    values = limits.rlimits()
    return {k: values[k] for k in sorted(claimed) if k in values}


def _find_marked(marker: str) -> int | None:
    """The pid of a process whose argv carries ``marker``."""
    needle = marker.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    return int(pid)
        except OSError:
            continue
    return None


def _uid_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _run_once(backend: Any, argv: Sequence[str], **kwargs: Any) -> ChildResult:
    """``backend.run`` for a call no other call repeats (limits or binds of its own): a pooled
    backend starts no replacement child for it, which nobody would take."""
    one_off = getattr(backend, "one_off_calls", None)
    with one_off() if callable(one_off) else contextlib.nullcontext():
        result: ChildResult = backend.run(argv, **kwargs)
    return result


@dataclass(frozen=True)
class Probe:
    name: str
    program: str
    args: tuple[str, ...]
    expect: str
    why: str
    kind: str = "report"
    context: str | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    fallback: dict[str, str] | None = None  # {"when": FALLBACK_WHEN key, "expect": value}


@dataclass(frozen=True)
class ProbeResult:
    name: str
    expected: str
    observed: str
    passed: bool
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "expected": self.expected, "observed": self.observed,
                "passed": self.passed, "detail": self.detail}  # fmt: skip


def load_probes(preflight_dir: Path = PREFLIGHT_DIR) -> list[Probe]:
    """Parse ``probes.toml``. Raises FormatError on anything unexpected."""
    path = preflight_dir / "probes.toml"
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise FormatError(f"{path}: {e}") from e
    if data.get("format") != "ect.probes/1":
        raise FormatError(f"{path}: expected format ect.probes/1")
    probes = []
    allowed = {"name", "program", "args", "expect", "why", "kind", "context", "limits", "fallback"}
    for i, p in enumerate(data.get("probe", [])):
        extra = set(p) - allowed
        fb = p.get("fallback")
        if (
            extra
            or p.get("kind", "report") not in ("report", "kill")
            or p.get("context") not in _CONTEXTS
            or (fb is not None and (set(fb) != {"when", "expect"}
                                    or fb["when"] not in FALLBACK_WHEN))
        ):
            raise FormatError(f"{path}: probe[{i}] has bad fields {sorted(extra) or p}")
        if not (preflight_dir / p["program"]).is_file():
            raise FormatError(f"{path}: probe {p['name']}: no program {p['program']}")
        probes.append(Probe(name=p["name"], program=p["program"], args=tuple(p.get("args", ())),
                            expect=p["expect"], why=p["why"], kind=p.get("kind", "report"),
                            context=p.get("context"), limits=dict(p.get("limits", {})),
                            fallback=dict(fb) if fb is not None else None))  # fmt: skip
    if len({p.name for p in probes}) != len(probes):
        raise FormatError(f"{path}: duplicate probe names")
    return probes


def _reported(result: ChildResult) -> str:
    lines = result.stdout.decode("utf-8", "replace").strip().splitlines()
    if lines:
        try:
            obj = loads_strict(lines[-1])
            if isinstance(obj, dict) and isinstance(obj.get("observed"), str):
                return str(obj["observed"])
        except FormatError:
            pass
    if result.kill_reason:
        return f"killed:{result.kill_reason}"
    tail = result.stderr.decode("utf-8", "replace").strip().splitlines()
    return f"exit {result.exit_status}" + (f": {tail[-1][:200]}" if tail else "")


def _marker_alive(marker: str) -> bool:
    needle = marker.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if needle in fh.read():
                    return True
        except OSError:
            continue
    return False


@contextlib.contextmanager
def _canary() -> Iterator[str]:
    secret = CANARY_PREFIX + secrets.token_hex(16)
    old = os.environ.get(CANARY_ENV)
    os.environ[CANARY_ENV] = secret
    try:
        yield secret
    finally:
        if old is None:
            os.environ.pop(CANARY_ENV, None)
        else:
            os.environ[CANARY_ENV] = old


_SYS_ADD_KEY = {"x86_64": 248, "aarch64": 217}
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}


@contextlib.contextmanager
def _canary_key() -> Iterator[str]:
    """A key in the parent's session keyring for the call's lifetime; yields its description."""
    import ctypes
    import platform

    desc = "ect-canary-" + secrets.token_hex(8)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    arch = platform.machine()
    key = libc.syscall(_SYS_ADD_KEY.get(arch, -1), b"user", desc.encode(), b"canary", 6,
                       ctypes.c_long(-3))  # KEY_SPEC_SESSION_KEYRING  # fmt: skip
    if key < 0:
        raise SandboxError(f"cannot add the probe's canary key (errno {ctypes.get_errno()})")
    try:
        yield desc
    finally:
        libc.syscall(_SYS_KEYCTL.get(arch, -1), 21, ctypes.c_long(key))  # KEYCTL_INVALIDATE


def _run_one(
    backend: Any, probe: Probe, preflight_dir: Path, scratch: Path, base: Limits,
    start: StartCost | None = None,
) -> ProbeResult:
    python = str(backend.python)
    dest = "/ect/preflight"
    binds: list[tuple[Path, str]] = [(preflight_dir, dest)]
    args = list(probe.args)
    listener: socket.socket | None = None
    secret: str | None = None
    marker: str | None = None
    stack = contextlib.ExitStack()
    with stack:
        if probe.context in ("canary", "keyring"):
            stack.enter_context(_PARENT_STATE)
        if probe.context == "listener":
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            stack.callback(listener.close)
            listener.bind(("127.0.0.1", 0))
            listener.listen(4)
            listener.setblocking(False)
            args.append(str(listener.getsockname()[1]))
        elif probe.context == "canary":
            secret = stack.enter_context(_canary())
            args.append(CANARY_PREFIX.encode().hex())
        elif probe.context == "snapshot":
            binds.append((scratch / "probe.json", "/ect/world/probe.json"))
        elif probe.context == "orphan":
            marker = "ect-orphan-" + secrets.token_hex(8)
            args.append(marker)
        elif probe.context == "parent_uid":
            args.append(str(os.geteuid()))
        elif probe.context == "keyring":
            desc = stack.enter_context(_canary_key())
            args.append(desc.encode().hex())
        elif probe.context == "parent_pid":
            args.append(str(os.getpid()))
        elif probe.context == "boot_id":
            import hashlib

            try:
                boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
            except OSError:
                boot = ""
            args.append(hashlib.sha256(boot.encode()).hexdigest())
        elif probe.context == "record":
            claimed = _claimed_rlimits(_layers(backend), replace(base, **probe.limits))
            args.append(canonical_bytes(claimed).hex())
        host = {h: backend.sandbox_path(h, d) for h, d in binds}
        prog = f"{host[preflight_dir]}/{probe.program}"
        if probe.context == "sibling":
            # a concurrent call of the same backend, alive while the probe runs; the probe is
            # given the host uid the sibling runs as
            sib_marker = "ect-sibling-" + secrets.token_hex(8)
            sib_limits = replace(base, wall_s=60.0)
            sibling = threading.Thread(target=_run_once, args=(backend,
                [python, "-I", "-S", prog, "hold", sib_marker],), kwargs={
                "stdin": b"", "limits": sib_limits, "ro_binds": binds}, daemon=True)  # fmt: skip
            sibling.start()

            def stop_sibling() -> None:
                pid = _find_marked(sib_marker)
                if pid is not None:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                sibling.join(timeout=30)

            stack.callback(stop_sibling)
            found: int | None = None
            until = time.monotonic() + 30.0
            while found is None and time.monotonic() < until:
                pid = _find_marked(sib_marker)
                found = _uid_of(pid) if pid is not None else None
                if found is None:
                    time.sleep(0.02)
            if found is None:
                return ProbeResult(probe.name, probe.expect, "no-sibling", False,
                                   "the concurrent sibling call never started")  # fmt: skip
            # The probe's own host uid is read from the host's /proc as well, while it holds:
            # inside, a nested user namespace (bwrap >= 0.8, --disable-userns, non-root parent)
            # maps only to bwrap's own namespace, so the call cannot name its host uid itself.
            own_marker = "ect-probe-" + secrets.token_hex(8)
            holder: list[ChildResult] = []
            own = threading.Thread(target=lambda: holder.append(_run_once(backend,
                [python, "-I", "-S", prog, "hold", own_marker], stdin=b"",
                limits=replace(base, wall_s=60.0), ro_binds=binds)), daemon=True)  # fmt: skip
            own.start()
            mine: int | None = None
            until = time.monotonic() + 30.0
            while mine is None and time.monotonic() < until and own.is_alive():
                pid = _find_marked(own_marker)
                mine = _uid_of(pid) if pid is not None else None
                if mine is None:
                    time.sleep(0.02)
            pid = _find_marked(own_marker)
            if pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            own.join(timeout=30)
            if mine is None:
                return ProbeResult(probe.name, probe.expect, "no-probe", False,
                                   "the probe's own call never started")  # fmt: skip
            observed = "shared-uid" if mine == found else "own-uid"
            expected = probe.expect
            detail = f"host uid {mine}, the concurrent call's {found} (read from the host's /proc)"
            if probe.fallback is not None and \
                    FALLBACK_WHEN[probe.fallback["when"]](_layers(backend)):
                expected = probe.fallback["expect"]
                detail += f"; fallback expectation: {probe.fallback['when']}"
            return ProbeResult(probe.name, expected, observed, observed == expected, detail)
        args = [a.replace("/ect/world/probe.json", host.get(scratch / "probe.json", a)) if
                probe.context == "snapshot" else a for a in args]  # fmt: skip
        limits = replace(base, **probe.limits)
        start_note = ""
        # the probes without limits or binds of their own share one key, so a pooled backend
        # serves them from waiting children; any other probe's call is its key's only one
        run = backend.run if not probe.limits and len(binds) == 1 else \
            functools.partial(_run_once, backend)
        argv = [python, "-I", "-S", prog, *args]
        result = run(argv, stdin=b"", limits=limits, ro_binds=binds)
        if _ends_at_cpu(probe) and start is not None and result.kill_reason == "cpu" \
                and not result.stdout:
            # Ended at its budget before it said it had started (a probe program that ends at
            # its CPU budget writes a line once started): this machine's start used the budget,
            # so the start is measured and the probe runs again with a budget that leaves the
            # program more than its start cost after it has started. A slow start is never what
            # the probe judges; where a start is cheap, the probe costs no measuring call.
            spent = start.cpu_s(prog, binds, limits)
            limits = replace(limits, cpu_s=cpu_budget(limits.cpu_s, spent))
            start_note = f"; the program's start measured at {spent:.2f} CPU s"
            result = run(argv, stdin=b"", limits=limits, ro_binds=binds)
        observed = result.kill_reason or "none" if probe.kind == "kill" else _reported(result)
        detail = ""
        if probe.kind == "report" and result.kill_reason in ("cpu", "timeout"):
            # ended for its speed before it could report: no layer was judged
            budget = f"cpu_s={limits.cpu_s}{start_note}" if result.kill_reason == "cpu" else \
                f"wall_s={limits.wall_s}"
            detail = (f"the probe was killed for {result.kill_reason} at its budget ({budget}) "
                      "before it could report: the machine was too slow for the probe to judge "
                      "its layer; not a failed layer")  # fmt: skip
        elif probe.kind == "kill" and result.kill_reason == "cpu" and observed != probe.expect:
            detail = (f"the probe was killed for cpu at its budget (cpu_s={limits.cpu_s}"
                      f"{start_note})")
        if listener is not None:
            try:
                conn, _ = listener.accept()
                conn.close()
                observed, detail = (
                    "connected",
                    "the parent's loopback listener accepted a connection",
                )
            except BlockingIOError:
                pass
        if secret is not None:
            blob = result.stdout + result.stderr
            if secret.encode() in blob:
                observed, detail = "leaked", "the canary secret appeared in the child's output"
        if marker is not None:
            if observed != "spawned":
                detail = f"the probe could not set up its grandchild ({observed})"
            else:
                deadline = time.monotonic() + 2.0
                alive = _marker_alive(marker)
                while alive and time.monotonic() < deadline:
                    time.sleep(0.02)
                    alive = _marker_alive(marker)
                observed = "survived" if alive else "gone"
    expected = probe.expect
    if probe.fallback is not None and FALLBACK_WHEN[probe.fallback["when"]](_layers(backend)):
        expected = probe.fallback["expect"]
        detail = detail or f"fallback expectation: {probe.fallback['when']}"
    return ProbeResult(probe.name, expected, observed, observed == expected, detail)


def _ends_at_cpu(probe: Probe) -> bool:
    return probe.kind == "kill" and probe.expect == "cpu"


# A probe that ends at its CPU budget gets a budget that fits its check, not the machine's speed
# and not a fixed large one (the call has one CPU, so a CPU budget is wall time ``ect preflight``
# waits for): at least twice the CPU a call of the same program that only starts and reports
# took on this machine, plus a margin, so the program always has more than its own start cost
# left after it has started (under emulation its start alone used over 1 CPU s); the probe's
# ``cpu_s`` is the floor. A whole ``cpu_s`` is a budget ``RLIMIT_CPU`` must reach (whole seconds:
# it has no finer unit), so it stays whole; a fraction (``limits.cpu_tree``) is a budget only the
# per-call cpu cgroup ends a call at (the parent polls its usage every ``CPU_POLL_S``), so the
# probe of that layer costs a fraction of a second, not the rlimit's whole one.
START_FACTOR = 2.0
START_MARGIN_S = 0.5
CGROUP_MARGIN_S = 0.1


def cpu_budget(cpu_s: float, start_cpu_s: float) -> float:
    """The ``cpu_s`` of a probe's call: its own ``cpu_s``, or more when the program's start
    (``start_cpu_s``, measured) needs it: whole seconds for a whole ``cpu_s`` (``RLIMIT_CPU``),
    hundredths for a fractional one (the per-call cpu cgroup's budget)."""
    if float(cpu_s).is_integer():
        return max(int(cpu_s), math.ceil(START_FACTOR * start_cpu_s + START_MARGIN_S))
    return max(float(cpu_s), math.ceil(100 * (START_FACTOR * start_cpu_s + CGROUP_MARGIN_S)) / 100)


class StartCost:
    """The CPU seconds a call of a probe program that only starts and reports takes through the
    backend (the whole call's usage, as its budget counts it), measured once per program, only
    when a probe's call was ended at its budget before the program said it had started, and
    shared by the probes running at once."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.lock = threading.Lock()
        self.seen: dict[str, float] = {}

    def cpu_s(self, prog: str, binds: Sequence[tuple[Path, str]], limits: Limits) -> float:
        with self.lock:
            if prog not in self.seen:
                result = _run_once(self.backend, [str(self.backend.python), "-I", "-S", prog,
                                                  "start"], stdin=b"",
                                   limits=replace(limits, cpu_s=PROBE_LIMITS.cpu_s),
                                   ro_binds=binds)  # fmt: skip
                if _reported(result) != "started":
                    raise SandboxError(f"a probe program could not start: {_reported(result)}")
                self.seen[prog] = result.cpu_s
            return self.seen[prog]


# The budget of a probe that does not set its own: large enough that a slow or loaded machine
# (or one under emulation) never ends a probe for its speed, since a probe judges a layer; the
# wall clock is only a guard against a probe that hangs. A probe that checks a limit sets the
# one it checks (e.g. ``cpu_s = 1``, ``wall_s = 1.5``). Measured: under qemu's software
# emulation (Debian 12 guest, 8 probes at once on 2 vCPUs) 14 of 59 probes used up 60 s of wall.
PROBE_LIMITS = Limits(wall_s=600.0, cpu_s=60)
def _least_wall_s(probe: Probe) -> float:
    """The least wall time ``probe`` can take on any machine: a probe killed at its CPU budget
    takes at least ``cpu_s`` (the per-call cpu cgroup gives a call one CPU), one killed at its
    wall clock ``wall_s``; one that sets any other limit (it waits for the limit to be reached)
    or holds a concurrent call, 1 s; any other 0. Only orders the probes (the longest start
    first, so they overlap the rest); no probe is judged by it."""
    if probe.kind == "kill" and probe.expect == "cpu":
        return float(probe.limits.get("cpu_s", PROBE_LIMITS.cpu_s))
    if probe.kind == "kill" and probe.expect == "timeout":
        return float(probe.limits.get("wall_s", PROBE_LIMITS.wall_s))
    return 1.0 if probe.limits or probe.context in ("sibling", "orphan") else 0.0


# Probes run this many at a time: most of a probe's time is a sandbox starting or a limit being
# reached, not CPU (issue 37: one at a time, preflight took 11 s idle, 20-35 s loaded).
PROBE_WORKERS = 8
# Contexts that change the parent process itself (its environment, its session keyring) run
# one at a time.
_PARENT_STATE = threading.Lock()


def run_probes(
    backend: Any,
    *,
    preflight_dir: Path = PREFLIGHT_DIR,
    only: Sequence[str] | None = None,
    limits: Limits | None = None,
    workers: int = PROBE_WORKERS,
) -> list[ProbeResult]:
    """Run every probe (or those named in ``only``) through ``backend``; never raises for a
    failed probe (that is a result), but SandboxError propagates if the backend cannot run."""
    return list(iter_probes(backend, preflight_dir=preflight_dir, only=only, limits=limits,
                            workers=workers))  # fmt: skip


def iter_probes(
    backend: Any,
    *,
    preflight_dir: Path = PREFLIGHT_DIR,
    only: Sequence[str] | None = None,
    limits: Limits | None = None,
    workers: int = PROBE_WORKERS,
) -> Iterator[ProbeResult]:
    """:func:`run_probes`, ``workers`` probes at a time, yielding each result in the probe
    file's order as soon as it and every one before it are done."""
    from concurrent.futures import ThreadPoolExecutor

    probes = load_probes(preflight_dir)
    if only is not None:
        unknown = set(only) - {p.name for p in probes}
        if unknown:
            raise SandboxError(f"unknown probe(s): {', '.join(sorted(unknown))}")
        probes = [p for p in probes if p.name in set(only)]
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers!r}")
    base = limits or PROBE_LIMITS
    with tempfile.TemporaryDirectory(prefix="ect-probe-") as tmp:
        scratch = Path(tmp)
        os.chmod(scratch, 0o755)
        (scratch / "probe.json").write_text('{"world_id":"probe"}', "utf-8")
        with ThreadPoolExecutor(max_workers=min(workers, max(len(probes), 1)),
                                thread_name_prefix="ect-probe") as pool:  # fmt: skip
            # the longest first, so that they overlap the rest instead of starting last
            start = StartCost(backend)
            started = {p.name: pool.submit(_run_one, backend, p, preflight_dir, scratch, base,
                                           start)
                       for p in sorted(probes, key=lambda p: -_least_wall_s(p))}  # fmt: skip
            try:
                for p in probes:
                    yield started[p.name].result()
            finally:  # a consumer that stops early: probes not yet started never start
                for f in started.values():
                    f.cancel()
