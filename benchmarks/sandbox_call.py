"""Benchmark: one sandboxed synthetic tool call vs a bare ``python -I -S`` spawn of the same worker.

Both sides run the same worker file on the same call (``get_metric`` on world w00) and the same
snapshot; the bare side gets no namespaces, no seccomp, no Landlock, no rlimits. Calls are
interleaved (bare, sandboxed, bare, ...) so load from other processes hits both equally. Also
printed, to show what the difference is made of: a bare ``python -I -S -c pass``, bwrap alone
running ``/usr/bin/true`` with the same namespaces, and the sandboxed worker in ``check`` mode
(Landlock + rlimits, no tool). Target (DESIGN §10): sandboxed <= 1.5x bare.

Usage: python benchmarks/sandbox_call.py [--calls N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runner.canonical import canonical_bytes
from runner.sandbox import Limits, ToolSandbox, select_backend
from runner.sandbox._pins import REPO_ROOT
from runner.sandbox._tool import DEFAULT_TOOLS_PATH
from runner.worlds import write_snapshot

CALL = ("w00", "get_metric", {"entity": "S01", "attribute": "units", "date": "2026-03-05"})


def _ms(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=10)
    return f"median {statistics.median(xs) * 1000:6.1f} ms  p10 {q[0] * 1000:6.1f}  p90 {q[-1] * 1000:6.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=60, help="calls per side (default 60)")
    n = ap.parse_args().calls

    backend = select_backend()
    tmp = Path(tempfile.mkdtemp(prefix="ect-bench-"))
    snap = write_snapshot(CALL[0], tmp)
    sandbox = ToolSandbox(backend, tmp, Limits())
    python = str(backend.python)
    worker = str(REPO_ROOT / "runner" / "sandbox" / "_worker.py")
    cfg = canonical_bytes({"mode": "tool", "world_id": CALL[0], "tools": str(DEFAULT_TOOLS_PATH),
                           "snapshot": str(snap), "landlock": None}).decode()  # fmt: skip
    call = canonical_bytes({"world_id": CALL[0], "tool_id": CALL[1], "args": CALL[2]})
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    def bare() -> bytes:
        r = subprocess.run([python, "-I", "-S", worker, cfg], input=call, capture_output=True, env=env,
                           check=True)  # fmt: skip
        return r.stdout

    def sandboxed() -> dict:
        return sandbox.call(*CALL)

    cgroup = getattr(backend, "cgroups", None)

    def sandboxed_no_cgroup() -> dict:
        # What a non-root parent pays (RLIMIT_NPROC and RLIMIT_AS apply there, no cgroups). As root
        # this configuration bounds neither the process count nor the call's memory: it is
        # measured here only to show the per-call cgroups' cost.
        backend.cgroups = None
        try:
            return sandbox.call(*CALL)
        finally:
            backend.cgroups = cgroup

    # same answer on both sides, and warm caches
    from runner.canonical import loads_strict

    assert loads_strict(bare()) == sandboxed()
    for _ in range(3):
        bare()
        sandboxed()

    sides: dict[str, list[float]] = {"bare": [], "sandboxed": []}
    fns: dict[str, Callable[[], object]] = {"bare": bare, "sandboxed": sandboxed}
    if cgroup is not None:
        sides["sandboxed, cgroups off"] = []
        fns["sandboxed, cgroups off"] = sandboxed_no_cgroup
    for i in range(n):
        order = list(fns) if i % 2 == 0 else list(reversed(fns))
        for side in order:
            t = time.perf_counter()
            fns[side]()
            sides[side].append(time.perf_counter() - t)

    # breakdown (fewer runs)
    k = max(10, n // 3)
    parts: dict[str, list[float]] = {"python -I -S -c pass": [], "bwrap /usr/bin/true": [],
                                     "sandboxed worker, check mode": []}  # fmt: skip
    bw = [backend.bwrap, "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
          "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
          "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
          "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--remount-ro", "/", "/usr/bin/true"]  # fmt: skip
    for _ in range(k):
        t = time.perf_counter()
        subprocess.run([python, "-I", "-S", "-c", "pass"], env=env, check=True)
        parts["python -I -S -c pass"].append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run(bw, env={}, check=True)
        parts["bwrap /usr/bin/true"].append(time.perf_counter() - t)
        t = time.perf_counter()
        backend.run_worker({"mode": "check"}, stdin=b"", limits=Limits())
        parts["sandboxed worker, check mode"].append(time.perf_counter() - t)

    layers = backend.describe().get("layers", {})
    print(f"sandbox_call: {n} interleaved calls per side, backend {backend.name}, "
          f"seccomp {layers.get('seccomp', {}).get('default')}-default allow-list, "
          f"cgroups {layers.get('cgroups')}, host uid {layers.get('host_uid')}, "
          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
    for name, xs in sides.items():
        print(f"  {name:32s} {_ms(xs)}")
    for name, xs in parts.items():
        print(f"  {name:32s} {_ms(xs)}")
    b = statistics.median(sides["bare"])
    s = statistics.median(sides["sandboxed"])
    print(f"  ratio sandboxed/bare (medians)   {s / b:.2f}x")
    if cgroup is not None:
        nc = statistics.median(sides["sandboxed, cgroups off"])
        print(f"  ratio without the root-only cgroups {nc / b:.2f}x")
    shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"sandbox_call: {s * 1000:.1f} ms (baseline {b * 1000:.1f} ms, ratio {s / b:.2f}x, target <= 1.5x)"
    )


if __name__ == "__main__":
    main()
