"""Benchmark: sandboxed tool calls per second, local executor vs a local Ray cluster of 1 and 2 nodes.

Every side runs the same call (``get_metric`` on world w00) in a fresh sandbox child, exactly as a
study cell does, through the executor interface the run loop uses (``LocalExecutor`` /
``RayExecutor``), awaited from one asyncio loop:

* ``local, 1 in flight`` and ``local, 2 in flight``: today's executor on this machine;
* ``ray, 1 node`` and ``ray, 2 nodes``: a Ray cluster started here with ``ray.cluster_utils``
  (a head that takes no work, worker nodes of one CPU each), one preflighted ECT worker per node,
  as many calls in flight as the nodes have CPUs.

Also measured: the per-call latency with one call in flight, local vs Ray (what Ray adds to each
call: scheduling, serialisation, the actor hop). Target (DESIGN §10): 2 nodes >= 1.8x one node.
All "nodes" here share this machine's cores, so the 2-node figure is bounded by the cores that
are free, not by Ray: see docs/distributed.md for how to read it.

Usage: python benchmarks/distributed.py [--calls N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio

from runner.sandbox import Limits, ToolSandbox, select_backend
from runner.sandbox._pins import verify_pins
from runner.study import LocalExecutor, RayExecutor
from runner.study._lock import source_tree_digest
from runner.study._ray import RAY_ENV_DEFAULTS, NodeExpectations
from runner.worlds import build_world, task_manifest_digest, write_snapshot

CALL = ("w00", "get_metric", {"entity": "S01", "attribute": "units", "date": "2026-03-05"})
LIMITS = Limits()


def _throughput(executor: Any, calls: int, in_flight: int) -> float:
    """calls/s with ``in_flight`` calls outstanding at all times."""

    async def go() -> float:
        sem = anyio.Semaphore(in_flight)

        async def one() -> None:
            async with sem:
                await executor.call(*CALL)

        t = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(calls):
                tg.start_soon(one)
        return calls / (time.perf_counter() - t)

    return anyio.run(go)


def _latencies(executor: Any, calls: int) -> list[float]:
    async def go() -> list[float]:
        out = []
        for _ in range(calls):
            t = time.perf_counter()
            await executor.call(*CALL)
            out.append(time.perf_counter() - t)
        return out

    return anyio.run(go)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=48, help="calls per throughput side (default 48)")
    n = ap.parse_args().calls
    for key, value in RAY_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    from ray.cluster_utils import Cluster

    tmp = Path(tempfile.mkdtemp(prefix="ect-bench-dist-"))
    write_snapshot(CALL[0], tmp)
    sandbox = ToolSandbox(select_backend(), tmp, LIMITS)
    expected = sandbox.call(*CALL)
    expect = NodeExpectations(
        source_tree=source_tree_digest(), sandbox_pins=verify_pins(),
        task_manifest=task_manifest_digest(), worlds={CALL[0]: build_world(CALL[0]).digest()},
        backend=None, limits={"wall_s": LIMITS.wall_s, "cpu_s": LIMITS.cpu_s,
                              "output_bytes": LIMITS.output_bytes}, probes="mandatory")
    rows: dict[str, float] = {}
    lat: dict[str, list[float]] = {}

    local1, local2 = LocalExecutor(sandbox, 1), LocalExecutor(sandbox, 2)
    _throughput(local2, 6, 2)  # warm caches
    rows["local, 1 in flight"] = _throughput(local1, n, 1)
    rows["local, 2 in flight"] = _throughput(local2, n, 2)
    lat["local"] = _latencies(local1, max(10, n // 4))

    started = time.perf_counter()
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        for nodes in (1, 2):
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            executor = RayExecutor.start(cluster.address, expect)
            try:
                assert len(executor.slots) == nodes
                assert anyio.run(lambda: executor.call(*CALL)) == expected  # noqa: B023
                _throughput(executor, 4 * nodes, nodes)  # warm the actors
                rows[f"ray, {nodes} node{'s' if nodes > 1 else ''}"] = _throughput(
                    executor, n, nodes)
                if nodes == 1:
                    lat["ray"] = _latencies(executor, max(10, n // 4))
            finally:
                executor.close()
        cluster_s = time.perf_counter() - started
    finally:
        cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"distributed: {n} calls per side, one CPU per Ray node, {os.cpu_count()} cores on "
          f"this machine, load {os.getloadavg()[0]:.2f} (shared: figures as measured)")
    for name, rate in rows.items():
        print(f"  {name:22s} {rate:7.1f} calls/s")
    ml = statistics.median(lat["local"])
    mr = statistics.median(lat["ray"])
    print(f"  one call in flight: local median {ml * 1000:.1f} ms, ray median {mr * 1000:.1f} ms, "
          f"Ray adds {(mr - ml) * 1000:.1f} ms per call")
    print(f"  cluster start, two node joins and two preflights: {cluster_s:.1f} s")
    r1, r2 = rows["ray, 1 node"], rows["ray, 2 nodes"]
    print(f"distributed: {r2 / r1:.2f}x calls/s on 2 nodes vs 1 ({r2:.1f} vs {r1:.1f} calls/s; "
          f"baseline local {rows['local, 2 in flight']:.1f} calls/s, Ray adds "
          f"{(mr - ml) * 1000:.1f} ms/call, target >= 1.8x)")


if __name__ == "__main__":
    main()
