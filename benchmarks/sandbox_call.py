"""Benchmark: one sandboxed synthetic tool call vs a bare ``python -I -S`` spawn of the same worker.

Both sides run the same worker file on the same call (``get_metric`` on world w00) and the same
snapshot; the bare side gets no namespaces, no seccomp, no Landlock, no rlimits. Calls are
interleaved (bare, pooled, cold, ...) so load from other processes hits every side equally.

* **pooled** (the headline): the backend's default, a pre-spawned single-use sandbox (bwrap,
  namespaces, cgroups, seccomp, Landlock, the worker and the tools loaded, waiting on its pipe)
  serves the call and is destroyed. The latency is what the runner sees: handing over the
  request and reading the reply. Its replacement starts in the background; the benchmark waits
  for it before timing the next side, so the refill never overlaps a timed call (in a study it
  overlaps the model's turn).
* **cold**: ``pool_size=0``, every call starts its own sandbox on its critical path.

Also printed, to show what the cold figure is made of: a bare ``python -I -S -c pass``, bwrap
alone running ``/usr/bin/true`` with the same namespaces, and the sandboxed worker in ``check``
mode. Targets: pooled <= 1.0x bare (issue 30); cold <= 1.5x bare.

Usage: python benchmarks/sandbox_call.py [--calls N] [--smoke]
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
from typing import Any

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
    ap.add_argument("--smoke", action="store_true",
                    help="3 calls per side: checks that the benchmark runs, measures nothing")
    args = ap.parse_args()
    n = 3 if args.smoke else args.calls

    backend = select_backend()
    pool = getattr(backend, "pool_size", 0)
    coldb = select_backend(pool_size=0) if pool else backend
    tmp = Path(tempfile.mkdtemp(prefix="ect-bench-"))
    snap = write_snapshot(CALL[0], tmp)
    sandbox = ToolSandbox(backend, tmp, Limits())
    cold_sandbox = ToolSandbox(coldb, tmp, Limits())
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

    def refilled() -> None:
        # untimed: let the pooled child's replacement finish starting
        until = time.monotonic() + 30.0
        while pool and backend.pool_waiting() < 1 and time.monotonic() < until:
            time.sleep(0.002)

    def sandboxed() -> dict[str, Any]:
        return sandbox.call(*CALL)

    def cold() -> dict[str, Any]:
        return cold_sandbox.call(*CALL)

    cgroup = getattr(coldb, "cgroups", None)

    def cold_no_cgroup() -> dict[str, Any]:
        # What a non-root parent pays (RLIMIT_NPROC and RLIMIT_AS apply there, no cgroups). As root
        # this configuration bounds neither the process count nor the call's memory: it is
        # measured here only to show the per-call cgroups' cost.
        coldb.cgroups = None
        try:
            return cold_sandbox.call(*CALL)
        finally:
            coldb.cgroups = cgroup

    # same answer on both sides, and warm caches
    from runner.canonical import loads_strict

    assert loads_strict(bare()) == sandboxed() == cold()
    for _ in range(3):
        bare()
        refilled()
        sandboxed()
        cold()

    fns: dict[str, Callable[[], object]] = {"bare": bare, "sandboxed, pooled": sandboxed}
    if pool:
        fns["sandboxed, cold"] = cold
    if cgroup is not None:
        fns["cold, cgroups off"] = cold_no_cgroup
    sides: dict[str, list[float]] = {k: [] for k in fns}
    for i in range(n):
        order = list(fns) if i % 2 == 0 else list(reversed(fns))
        for side in order:
            refilled()
            t = time.perf_counter()
            fns[side]()
            sides[side].append(time.perf_counter() - t)

    # breakdown (fewer runs)
    k = 3 if args.smoke else max(10, n // 3)
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
        coldb.run_worker({"mode": "check"}, stdin=b"", limits=Limits())
        parts["sandboxed worker, check mode"].append(time.perf_counter() - t)

    layers = coldb.describe().get("layers", {})
    print(f"sandbox_call: {n} interleaved calls per side, backend {backend.name}, "
          f"seccomp {layers.get('seccomp', {}).get('default')}-default allow-list, "
          f"cgroups {layers.get('cgroups')}, host uid {layers.get('host_uid')}, "
          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
    for name, xs in sides.items():
        print(f"  {name:32s} {_ms(xs)}")
    for name, xs in parts.items():
        print(f"  {name:32s} {_ms(xs)}")
    b = statistics.median(sides["bare"])
    s = statistics.median(sides["sandboxed, pooled"])
    c = statistics.median(sides.get("sandboxed, cold", sides["sandboxed, pooled"]))
    stats = getattr(backend, "pool_stats", {})
    print(f"  pool: size {pool}, served {stats.get('served')}, started cold "
          f"{stats.get('cold')}, discarded {stats.get('discarded')}")
    print(f"  ratio pooled/bare (medians)      {s / b:.2f}x")
    print(f"  ratio cold/bare (medians)        {c / b:.2f}x")
    if cgroup is not None:
        nc = statistics.median(sides["cold, cgroups off"])
        print(f"  ratio cold without the root-only cgroups {nc / b:.2f}x")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"sandbox_call: {s * 1000:.1f} ms (baseline {b * 1000:.1f} ms, ratio {s / b:.2f}x, "
          f"target <= 1.0x; cold {c * 1000:.1f} ms, {c / b:.2f}x, target <= 1.5x)")

if __name__ == "__main__":
    main()
