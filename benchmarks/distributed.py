"""Benchmark: sandboxed tool calls per second, local executor vs a local Ray cluster of 1 and 2 nodes.

Every side runs the same call (``get_metric`` on world w00) in a fresh sandbox child, exactly as a
study cell does, through the executor interface the run loop uses (``LocalExecutor`` /
``RayExecutor``), awaited from one asyncio loop:

* ``local, 1 in flight`` and ``local, 2 in flight``: today's executor on this machine;
* ``ray, 1 node`` and ``ray, 2 nodes``: a Ray cluster started here with ``ray.cluster_utils``
  (a head that takes no work, worker nodes of one CPU each), one preflighted ECT worker per node,
  as many calls in flight as the nodes have CPUs.

The sides take turns in rounds so load from other processes hits each alike. Also measured:
the per-call latency with one call in flight, local vs Ray, interleaved (what Ray adds to each
call), and the Ray hop alone (an empty actor call: scheduling, serialisation, the round trip).
Target (docs/distributed.md): 2 nodes >= 1.8x one node. Each simulated node gets a core of its own
(its raylet, and so its workers and their sandbox children, are pinned to one CPU by affinity):
node 1 to the first usable CPU, node 2 to the second. The driver, Ray's head and whatever else
runs on the machine still share those cores, so on a busy machine the figure is bounded by the
cores that are free: see docs/distributed.md for how to read it.

Usage: python benchmarks/distributed.py [--calls N] [--rounds R] [--smoke]
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
from runner.study._ray import RAY_ENV_DEFAULTS, NodeExpectations, NodeLimits
from runner.worlds import build_world, task_manifest_digest, write_snapshot

CALL = ("w00", "get_metric", {"entity": "S01", "attribute": "units", "date": "2026-03-05"})
LIMITS = Limits()


def _node_on_cpu(cluster: Any, cpu: int | None) -> Any:
    """Add a one-CPU worker node whose processes run on ``cpu`` alone.

    The node's raylet inherits this process's CPU affinity when it is started, and every Ray
    worker it forks (the ECT actor, and through it each sandbox child) inherits the raylet's: so
    each simulated node has a core of its own, as real nodes have, instead of all of them sharing
    the host's cores (which made 2 nodes vs 1 measure the host, not scaling).
    """
    if cpu is None:
        return cluster.add_node(num_cpus=1)
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        return cluster.add_node(num_cpus=1)
    finally:
        os.sched_setaffinity(0, mine)


def _raylet_cpus() -> list[list[int]]:
    """The CPU affinity of every raylet running now (to show the pinning took)."""
    import psutil  # type: ignore[import-untyped]

    found: list[list[int]] = []
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] == "raylet":
            try:
                found.append(sorted(proc.cpu_affinity() or []))
            except psutil.Error:
                continue
    return sorted(found)


def _batch(executor: Any, calls: int, in_flight: int) -> float:
    """Seconds to run ``calls`` calls with ``in_flight`` outstanding at all times."""

    async def go() -> float:
        sem = anyio.Semaphore(in_flight)

        async def one() -> None:
            async with sem:
                await executor.call(*CALL)

        t = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(calls):
                tg.start_soon(one)
        return time.perf_counter() - t

    return anyio.run(go)


def _answer(executor: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        answer: dict[str, Any] = await executor.call(*CALL)
        return answer

    return anyio.run(go)


def _one(executor: Any) -> float:
    async def go() -> float:
        t = time.perf_counter()
        await executor.call(*CALL)
        return time.perf_counter() - t

    return anyio.run(go)


def _ping(actor: Any) -> float:
    async def go() -> float:
        t = time.perf_counter()
        await actor.ping.remote()
        return time.perf_counter() - t

    return anyio.run(go)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=48, help="calls per throughput side (default 48)")
    ap.add_argument("--rounds", type=int, default=4,
                    help="the sides take turns, this many rounds each (default 4)")
    ap.add_argument("--smoke", action="store_true",
                    help="4 calls in 1 round: checks that the benchmark runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.calls, args.rounds = 4, 1
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
        backend=None, limits=NodeLimits(wall_s=LIMITS.wall_s, cpu_s=int(LIMITS.cpu_s),
                                        output_bytes=LIMITS.output_bytes,
                                        memory_bytes=LIMITS.memory_bytes), probes="mandatory")

    started = time.perf_counter()
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 0, "include_dashboard": False})
    executors: list[Any] = []
    try:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
        pin = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
        first = _node_on_cpu(cluster, pin[0])
        _node_on_cpu(cluster, pin[1])
        cluster.wait_for_nodes()
        pinned = _raylet_cpus()
        one_node = RayExecutor.start(cluster.address, expect, node_ids={first.node_id})
        executors.append(one_node)
        two_nodes = RayExecutor.start(cluster.address, expect)
        executors.append(two_nodes)
        assert len(one_node.slots) == 1 and len(two_nodes.slots) == 2
        cluster_s = time.perf_counter() - started
        # (executor, calls in flight): as many as the side's CPUs
        sides: dict[str, tuple[Any, int]] = {
            "local, 1 in flight": (LocalExecutor(sandbox, 1), 1),
            "local, 2 in flight": (LocalExecutor(sandbox, 2), 2),
            "ray, 1 node": (one_node, 1),
            "ray, 2 nodes": (two_nodes, 2),
        }
        for executor, in_flight in sides.values():  # same answer everywhere; warm every side
            assert _answer(executor) == expected
            _batch(executor, 2 * in_flight, in_flight)
        spent = dict.fromkeys(sides, 0.0)
        per_round = max(1, args.calls // args.rounds)
        lat: dict[str, list[float]] = {"local": [], "ray": []}
        for r in range(args.rounds):  # take turns, so load from elsewhere hits every side
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                executor, in_flight = sides[name]
                spent[name] += _batch(executor, per_round, in_flight)
            for _ in range(max(3, per_round // 4)):  # one call in flight, local then Ray
                lat["local"].append(_one(sides["local, 1 in flight"][0]))
                lat["ray"].append(_one(one_node))
        rows = {name: per_round * args.rounds / t for name, t in spent.items()}
        # The Ray hop alone: an empty actor call awaited from the loop (no sandbox child).
        actor = one_node.slots[0].actor
        hop = [_ping(actor) for _ in range(40)]
    finally:
        for executor in reversed(executors):
            executor.close()
        cluster.shutdown()  # type: ignore[no-untyped-call]
        shutil.rmtree(tmp, ignore_errors=True)

    where = (f"node 1 pinned to CPU {pin[0]}, node 2 to CPU {pin[1]} (raylet affinities "
             f"{pinned})" if pin[0] is not None else
             "nodes not pinned (fewer than 2 usable CPUs: 2 nodes vs 1 cannot show scaling)")
    print(f"distributed: {per_round * args.rounds} calls per side in {args.rounds} alternating "
          f"rounds, one CPU per Ray node, {where}; {os.cpu_count()} cores on this machine, load "
          f"{os.getloadavg()[0]:.2f} (shared: figures as measured)")
    for name, rate in rows.items():
        print(f"  {name:22s} {rate:7.1f} calls/s")
    ml = statistics.median(lat["local"])
    mr = statistics.median(lat["ray"])
    print(f"  one call in flight ({len(lat['ray'])} each, interleaved): local median "
          f"{ml * 1000:.1f} ms, ray median {mr * 1000:.1f} ms: Ray adds {(mr - ml) * 1000:.1f} ms")
    print(f"  Ray hop alone (empty actor call, median of {len(hop)}): "
          f"{statistics.median(hop) * 1000:.1f} ms")
    print(f"  cluster start, two node joins and the preflights: {cluster_s:.1f} s")
    r1, r2 = rows["ray, 1 node"], rows["ray, 2 nodes"]
    print(f"distributed: {r2 / r1:.2f}x calls/s on 2 nodes vs 1 ({r2:.1f} vs {r1:.1f} calls/s; "
          f"baseline local {rows['local, 2 in flight']:.1f} calls/s, Ray adds "
          f"{(mr - ml) * 1000:.1f} ms/call of which the hop {statistics.median(hop) * 1000:.1f} "
          f"ms, target >= 1.8x)")


if __name__ == "__main__":
    main()
