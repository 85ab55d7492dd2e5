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
Target (docs/distributed.md): 2 nodes >= 1.8x one node.

Where things run (printed, and checked before any figure is): each simulated node has a core of
its own, node 1 the first usable CPU, node 2 the second (its raylet is started under that
affinity, which its Ray workers, the ECT worker and every sandbox child inherit). The driver
(this process: the run loop that dispatches the calls) and Ray's head (GCS, the head raylet)
run on node 1's CPU while a Ray side runs (``--driver node-1``, the default), in both Ray sides
alike, as on a cluster whose first machine also runs the driver. Before, they ran on any CPU:
on the 1-node side their 1.5 to 3 ms of CPU per call ran free on the second core, on the 2-node
side it came out of the nodes' cores (``--driver any`` measures that placement). The local
sides run the driver on every CPU.

A rate is the steady state, the middle half of each batch's completions: a batch starts with
every ECT worker's pool of pre-spawned sandboxes already paid for (twice as many on 2 nodes) and
ends with one node idle while the other finishes; a pause before each batch lets the previous
side's pools refill outside it. The whole-batch figure is printed too. So is the CPU each
process spent per call on every side (driver, Ray head, each node's Ray daemons, ECT workers and
sandboxes, kernel threads, the rest of the machine) and how busy each CPU was.

Usage: python benchmarks/distributed.py [--calls N] [--rounds R] [--driver node-1|any] [--smoke]
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


def _threads_on(pid: int, cpus: set[int]) -> None:
    """Set the CPU affinity of every thread of ``pid`` (the affinity call sets one thread's)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:  # it ended
        return
    for tid in tids:
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            continue


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process now (from /proc)."""
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    found[int(entry)] = int(f.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return found


def _proc_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and of the children it reaped, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _busy_per_cpu() -> dict[int, float]:
    """Busy seconds of each CPU since boot (user, nice, system, irq, softirq), /proc/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    per: dict[int, float] = {}
    with open("/proc/stat") as f:
        for line in f:
            name, *vals = line.split()
            if name.startswith("cpu") and name != "cpu":
                v = [int(x) for x in vals]
                per[int(name[3:])] = (v[0] + v[1] + v[2] + v[5] + v[6]) / tick
    return per


SETTLE_S = 0.5  # a pause before each batch: the previous side's pools refill outside it


class _Accounts:
    """Who spent the CPU while a side ran (Linux).

    A process counts with its nearest ancestor among ``roots`` (pid -> role: the driver, Ray's
    head processes, each node's Ray daemons, each node's ECT workers). A sandbox child's CPU does
    not reach its parent's accounts (the parent's reaped-children time shows about a tenth of
    it), so it is read from its per-call cgroup instead (cumulative: a runner reuses its groups, all under
    ``groups``, the base every runner on this machine uses) and counted as ``<role>
    sandboxes`` of the role whose waiting sandboxes are in that owner's groups (kernel threads,
    kthreadd's children, are a role of their own). ``cpu<N>`` is what /proc/stat saw busy:
    beyond the roles, that is other jobs.
    """

    def __init__(self, roots: dict[int, str], groups: Path | None) -> None:
        self.roots = roots
        self.groups = groups
        self._owner_role: dict[str, str | None] = {}

    def _role(self, pid: int, parent: dict[int, int]) -> str | None:
        up, hops = pid, 0
        while up not in self.roots and up in parent and hops < 64:
            up, hops = parent[up], hops + 1
        return self.roots.get(up)

    def _sandboxes(self) -> list[tuple[str, list[int], float]]:
        """(owner, pids, CPU seconds so far) of every per-call group."""
        found: list[tuple[str, list[int], float]] = []
        for d in self.groups.glob("ect-sandbox-*-*") if self.groups is not None else ():
            try:
                pids = [int(t) for t in (d / "cgroup.procs").read_text().split()]
                if (d / "cpuacct.usage").exists():  # cgroup v1
                    used = int((d / "cpuacct.usage").read_text()) / 1e9
                else:
                    stat = dict(line.split() for line in (d / "cpu.stat").read_text().splitlines())
                    used = int(stat["usage_usec"]) / 1e6
            except (OSError, ValueError, KeyError):
                continue
            found.append((d.name.split("-")[2], pids, used))
        return found

    def members(self, role: str) -> list[int]:
        """Every live process counted under ``role`` (sandbox children included)."""
        parent = _parents()
        return [pid for pid in parent if self._role(pid, parent) == role]

    def snapshot(self, *, opening: bool) -> dict[str, float]:
        """Cumulative CPU seconds: per role, per sandbox owner (``sandboxes <owner>``, see
        :meth:`by_role`) and per CPU (``cpu<N>``, busy). The driver's own and the CPUs' are read
        last when ``opening`` a window and first when closing it, so the window does not count
        the scan of /proc that the snapshot itself costs the driver."""
        def edges() -> dict[str, float]:
            here = {f"cpu{cpu}": busy for cpu, busy in _busy_per_cpu().items()}
            here["driver"] = _proc_cpu_s(os.getpid())
            return here

        out = {} if opening else edges()
        parent = _parents()
        caged: set[int] = set()
        for owner, pids, used in self._sandboxes():
            caged.update(pids)
            for pid in pids:
                if self._owner_role.get(owner) is None:
                    self._owner_role[owner] = self._role(pid, parent)
            out[f"sandboxes {owner}"] = out.get(f"sandboxes {owner}", 0.0) + used
        for pid in parent:
            role = None if pid in caged or pid == os.getpid() else self._role(pid, parent)
            if role is not None:
                try:
                    out[role] = out.get(role, 0.0) + _proc_cpu_s(pid)
                except OSError:
                    continue
        for key, value in (edges() if opening else {}).items():
            out[key] = out.get(key, 0.0) + value
        return out

    def by_role(self, spent: dict[str, float]) -> dict[str, float]:
        """``spent`` (differences of snapshots) with each sandbox owner's CPU under
        ``<role> sandboxes`` (other runners' on this machine dropped)."""
        out: dict[str, float] = {}
        for key, v in spent.items():
            if key.startswith("sandboxes "):
                role = self._owner_role.get(key.removeprefix("sandboxes "))
                if role is None:
                    continue
                key = f"{role} sandboxes"
            out[key] = out.get(key, 0.0) + v
        return out


def _split(u: dict[str, float]) -> str:
    """One side's CPU, in ms per call, by role; and how busy each CPU was."""
    calls, wall = u["calls"], u["wall"]

    def ms(key: str) -> float:
        return u.get(key, 0.0) / calls * 1000

    cpus = sorted(k for k in u if k.startswith("cpu"))
    ours = sum(v for k, v in u.items() if k not in ("calls", "wall") and not k.startswith("cpu"))
    parts = [f"driver {ms('driver'):.1f} (+ its sandboxes {ms('driver sandboxes'):.1f})",
             f"Ray head {ms('head'):.1f}"]
    for node in ("node 1", "node 2"):
        parts.append(f"{node}: Ray daemons {ms(node + ' daemons'):.1f} + ECT workers "
                     f"{ms(node + ' worker'):.1f} + sandboxes {ms(node + ' worker sandboxes'):.1f}")
    parts.append(f"kernel threads {ms('kernel threads'):.1f}")
    rest = (sum(u[k] for k in cpus) - ours) / calls * 1000
    busy = ", ".join(f"CPU {k[3:]} {u[k] / wall * 100:.0f}%" for k in cpus)
    return f"{'; '.join(parts)}; rest of the machine {rest:.1f}; busy {busy}"


def _batch(executor: Any, calls: int, in_flight: int) -> tuple[int, float]:
    """Run ``calls`` calls with ``in_flight`` outstanding at all times; return the steady
    state: (calls, seconds) between the first and the last quarter of the completions.

    Why not the whole batch: each ECT worker starts a batch with its pool's pre-spawned
    sandboxes already paid for (two per worker, so twice as many on 2 nodes as on 1) and ends it
    with one node idle while the other finishes the last call; neither is a rate.
    """

    async def go() -> list[float]:
        sem = anyio.Semaphore(in_flight)
        done: list[float] = []

        async def one() -> None:
            async with sem:
                await executor.call(*CALL)
                done.append(time.perf_counter())

        async with anyio.create_task_group() as tg:
            for _ in range(calls):
                tg.start_soon(one)
        return done

    done = sorted(anyio.run(go))
    lo, hi = calls // 4, calls - calls // 4
    return hi - lo, done[hi - 1] - done[lo - 1]


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


def _affinity(pid: int) -> str:
    try:
        return _cpus(os.sched_getaffinity(pid))
    except OSError:
        return "?"


def _cpus(cpus: set[int]) -> str:
    return "CPU " + ",".join(str(c) for c in sorted(cpus))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=256,
                    help="calls per throughput side (default 256)")
    ap.add_argument("--rounds", type=int, default=4,
                    help="the sides take turns, this many rounds each (default 4)")
    ap.add_argument("--driver", choices=("node-1", "any"), default="node-1",
                    help="where the driver and Ray's head run while a Ray side runs: on node 1's "
                         "CPU, in both Ray sides alike (default), or on any CPU (then they take "
                         "the CPU that node 2 needs only on the 2-node side)")
    ap.add_argument("--smoke", action="store_true",
                    help="4 calls in 1 round: checks that the benchmark runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.calls, args.rounds = 4, 1
    if args.rounds < 1:
        raise SystemExit("distributed: --rounds must be at least 1")
    per_round = args.calls // args.rounds
    if per_round < 4:
        raise SystemExit("distributed: --calls must be at least 4 per round")
    if not hasattr(os, "sched_setaffinity") or not Path("/proc/self/stat").exists():
        raise SystemExit("distributed: needs Linux (CPU affinity and /proc) to give each node a "
                         "core of its own and count the CPU")
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
        every = set(os.sched_getaffinity(0))
        cpus = sorted(every)
        pin = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
        first = _node_on_cpu(cluster, pin[0])
        second = _node_on_cpu(cluster, pin[1])
        cluster.wait_for_nodes()
        one_node = RayExecutor.start(cluster.address, expect, node_ids={first.node_id})
        executors.append(one_node)
        two_nodes = RayExecutor.start(cluster.address, expect)
        executors.append(two_nodes)
        assert len(one_node.slots) == 1 and len(two_nodes.slots) == 2
        cluster_s = time.perf_counter() - started
        roots: dict[int, str] = {os.getpid(): "driver"}
        kthreadd = Path("/proc/2/comm")  # the kernel threads' parent, outside a pid namespace
        if kthreadd.exists() and kthreadd.read_text().strip() == "kthreadd":
            roots[2] = "kernel threads"
        assert cluster.head_node is not None
        roots.update({p.pid: "head" for _, p in cluster.head_node.live_processes()})
        for label, node in (("node 1", first), ("node 2", second)):
            roots.update({p.pid: f"{label} daemons" for _, p in node.live_processes()})
            for ex in (one_node, two_nodes):
                roots.update({s.node.host.pid: f"{label} worker" for s in ex.slots
                              if s.node.node_id == node.node_id and s.node.host is not None})
        cgroups = getattr(sandbox.backend, "cgroups", None)
        acct = _Accounts(roots, None if cgroups is None or not cgroups.cpu else
                         cgroups.bases.get("cpuacct", cgroups.bases.get("")))
        with_node_1 = args.driver == "node-1" and pin[0] is not None
        if with_node_1:
            assert pin[0] is not None
            for pid in acct.members("head"):
                _threads_on(pid, {pin[0]})

        def place(ray_side: bool) -> None:
            """The driver (every thread, and its own waiting sandboxes) on node 1's CPU while a
            Ray side runs, on every CPU while a local side runs."""
            if with_node_1:
                assert pin[0] is not None
                for pid in acct.members("driver"):
                    _threads_on(pid, {pin[0]} if ray_side else every)

        # (executor, calls in flight): as many as the side's CPUs
        sides: dict[str, tuple[Any, int]] = {
            "local, 1 in flight": (LocalExecutor(sandbox, 1), 1),
            "local, 2 in flight": (LocalExecutor(sandbox, 2), 2),
            "ray, 1 node": (one_node, 1),
            "ray, 2 nodes": (two_nodes, 2),
        }
        for name, (executor, in_flight) in sides.items():  # same answer everywhere; warm all
            place(name.startswith("ray"))
            assert _answer(executor) == expected
            _batch(executor, 4 * in_flight, in_flight)
        place(False)
        local = sorted({_affinity(pid) for pid in acct.members("driver")})
        place(True)
        placed = {role: sorted({_affinity(pid) for pid in acct.members(role)})
                  for role in sorted(set(roots.values()) - {"kernel threads"})}
        if pin[0] is not None:  # no figure unless every process is where it is said to be
            near = {pin[0]} if with_node_1 else every
            want = {"node 1 daemons": {pin[0]}, "node 1 worker": {pin[0]},
                    "node 2 daemons": {pin[1]}, "node 2 worker": {pin[1]},
                    "driver": near, "head": near}
            wrong = {role: placed[role] for role, cpus in want.items()
                     if placed[role] != [_cpus(cpus)]}
            if local != [_cpus(every)]:
                wrong["driver on the local sides"] = local
            if wrong:
                raise SystemExit(f"distributed: the pinning did not take: {wrong}")
        counted = dict.fromkeys(sides, 0)
        spent = dict.fromkeys(sides, 0.0)
        whole = dict.fromkeys(sides, 0.0)
        used: dict[str, dict[str, float]] = {name: {} for name in sides}
        lat: dict[str, list[float]] = {"local": [], "ray": []}
        loads: list[float] = []
        for r in range(args.rounds):  # take turns, so load from elsewhere hits every side
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                executor, in_flight = sides[name]
                place(name.startswith("ray"))
                time.sleep(SETTLE_S)  # the last side's pools refill before this one starts
                before = acct.snapshot(opening=True)
                t = time.perf_counter()
                calls, secs = _batch(executor, per_round, in_flight)
                wall = time.perf_counter() - t
                after = acct.snapshot(opening=False)
                counted[name] += calls
                spent[name] += secs
                whole[name] += wall
                used[name]["wall"] = used[name].get("wall", 0.0) + wall
                used[name]["calls"] = used[name].get("calls", 0.0) + per_round
                for k, v in after.items():
                    used[name][k] = used[name].get(k, 0.0) + v - before.get(k, 0.0)
            loads.append(os.getloadavg()[0])
            place(False)
            for _ in range(max(3, per_round // 16)):  # one call in flight, local then Ray
                lat["local"].append(_one(sides["local, 1 in flight"][0]))
                lat["ray"].append(_one(one_node))
        rows = {name: counted[name] / spent[name] for name in sides}
        # The Ray hop alone: an empty actor call awaited from the loop (no sandbox child).
        actor = one_node.slots[0].actor
        hop = [_ping(actor) for _ in range(40)]
    finally:
        for executor in reversed(executors):
            executor.close()
        cluster.shutdown()  # type: ignore[no-untyped-call]
        shutil.rmtree(tmp, ignore_errors=True)

    load = (f"load average {min(loads):.2f}-{max(loads):.2f} over the rounds "
            f"({os.cpu_count()} cores, shared: figures as measured)")
    if pin[0] is None:
        print("distributed: fewer than 2 usable CPUs: nodes not pinned, 2 nodes vs 1 cannot "
              "show scaling")
    print(f"distributed: {per_round} calls per side per round, {args.rounds} alternating rounds, "
          f"steady state (the middle half of each batch's completions); {load}")
    print("  pinned (affinity of every process, while a Ray side runs): " + "; ".join(
        f"{role} {'/'.join(a)}" for role, a in placed.items())
        + f"; the driver while a local side runs {'/'.join(local)}")
    for name, rate in rows.items():
        print(f"  {name:22s} {rate:7.1f} calls/s")
    print("  CPU per call while each side ran (ms; a node's sandboxes are its ECT workers' "
          "per-call cgroups):")
    for name, u in used.items():
        print(f"    {name}: {_split(acct.by_role(u))}")
    w1, w2 = (per_round * args.rounds / whole[n] for n in ("ray, 1 node", "ray, 2 nodes"))
    print(f"  whole batches (first calls served by pre-spawned sandboxes, the last call's tail "
          f"alone): ray 1 node {w1:.1f}, 2 nodes {w2:.1f} calls/s ({w2 / w1:.2f}x)")
    ray = [acct.by_role(used[n]) for n in ("ray, 1 node", "ray, 2 nodes")]
    ray_calls = sum(u["calls"] for u in ray)
    c = sum(v for u in ray for k, v in u.items() if k.startswith("node ")) / ray_calls * 1000
    d = sum(u.get(k, 0.0) for u in ray for k in ("driver", "driver sandboxes", "head")) \
        / ray_calls * 1000
    if acct.groups is None:
        print("  (the sandboxes' CPU is not measured here: no per-call cgroups with a CPU "
              "counter; the limit below leaves it out)")
    print(f"  CPU-bound limit from this split: a call costs its node {c:.1f} ms of CPU, the driver "
          f"and Ray's head {d:.1f} ms; with nothing else running, 2 nodes vs 1 reach at most "
          f"2c/(c+d) = {2 * c / (c + d):.2f}x with the driver and head on any CPU (on the 1-node "
          f"side they have the second core to themselves), 2.00x with them on node 1's CPU")
    ml = statistics.median(lat["local"])
    mr = statistics.median(lat["ray"])
    print(f"  one call in flight ({len(lat['ray'])} each, interleaved): local median "
          f"{ml * 1000:.1f} ms, ray median {mr * 1000:.1f} ms: Ray adds {(mr - ml) * 1000:.1f} ms")
    print(f"  Ray hop alone (empty actor call, median of {len(hop)}): "
          f"{statistics.median(hop) * 1000:.1f} ms")
    print(f"  cluster start, two node joins and the preflights (not timed): {cluster_s:.1f} s")
    r1, r2 = rows["ray, 1 node"], rows["ray, 2 nodes"]
    where = ("the driver and Ray's head on node 1's CPU in both" if with_node_1 else
             "the driver and Ray's head on any CPU")
    print(f"distributed: {r2 / r1:.2f}x calls/s on 2 nodes vs 1 ({r2:.1f} vs {r1:.1f} calls/s, "
          f"one CPU per node, {where}; baseline local {rows['local, 2 in flight']:.1f} calls/s; "
          f"Ray adds {(mr - ml) * 1000:.1f} ms/call of which the hop "
          f"{statistics.median(hop) * 1000:.1f} ms; {load}; target >= 1.8x)")


if __name__ == "__main__":
    main()
