"""Benchmark: the static study (432 snapshots x 7 policies) and the 10,000-replicate bootstraps.

Pinned to one core (threads of numpy's BLAS limited to one, process affinity set to one CPU).

1. Static study: ``run_static`` over ``static_grid()`` with the 7 arms on the simulated provider,
   beside a naive driver that starts a fresh event loop for every decision (what a sync script
   calling the async API one decision at a time does). Target <= 10 s. The prespecified ECT
   ablations (Table 3: 7 x 432 more verifier decisions) are timed separately.
2. Bootstrap: the H1 task-cluster bootstrap (288 fault rows per arm, 36 clusters, 10,000
   replicates), vectorised in numpy, beside a naive pure-Python replicate loop over the same
   data. Target <= 2 s. Also every bootstrap of a full closed-loop analysis.

Headline (last line): the H1 bootstrap.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TypeVar  # noqa: E402

import anyio  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runner.analysis import (  # noqa: E402
    STATIC_POLICIES,
    ProviderInfo,
    analyse_closed_loop,
    cluster_bootstrap_diff,
)
from runner.study import (  # noqa: E402
    StaticDecisionRow,
    StaticRun,
    StaticSpec,
    run_static,
    static_provider,
)
from runner.worlds import Snapshot  # noqa: E402

T = TypeVar("T")


def pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"cpu {cpu}"
    return "unpinned"


def timed(fn: Callable[[], T]) -> tuple[T, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def static_ours(spec: StaticSpec, grid: list[Snapshot]) -> list[StaticDecisionRow]:
    prov = static_provider("simulated", spec)

    async def go() -> StaticRun:
        return await run_static(spec, prov, snapshots=grid, ablations=())

    return list(anyio.run(go).rows)


def static_ablations(spec: StaticSpec, grid: list[Snapshot]) -> list[StaticDecisionRow]:
    prov = static_provider("simulated", spec)

    async def go() -> StaticRun:
        return await run_static(spec, prov, snapshots=grid, arms=())

    return list(anyio.run(go).rows)


def static_naive(spec: StaticSpec, grid: list[Snapshot]) -> int:
    from runner.policies import decide_static

    gen = spec.generation.config()
    prov = static_provider("simulated", spec)
    n = 0
    for snap in grid:
        for arm in STATIC_POLICIES:

            async def one(arm: str = arm, snap: Snapshot = snap) -> object:
                return await decide_static(arm, snap, prov, generation=gen)

            anyio.run(one)
            n += 1
    return n


def naive_bootstrap(clusters: Sequence[str], va: Sequence[float], vb: Sequence[float],
                    reps: int, seed: int) -> tuple[float, float]:
    rng = random.Random(seed)
    labels = sorted(set(clusters))
    rows_of = {c: [i for i, x in enumerate(clusters) if x == c] for c in labels}
    stats: list[float] = []
    for _ in range(reps):
        sa = sb = n = 0.0
        for _k in range(len(labels)):
            for i in rows_of[labels[rng.randrange(len(labels))]]:
                sa += va[i]
                sb += vb[i]
                n += 1
        stats.append(sa / n - sb / n)
    stats.sort()
    return stats[int(0.025 * reps)], stats[int(0.975 * reps) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--smoke", action="store_true",
                    help="24 snapshots and 200 replicates: checks that the benchmark runs, "
                    "measures nothing")
    args = ap.parse_args()
    reps = 200 if args.smoke else 10_000
    where = pin_one_core()
    spec = StaticSpec.load(REPO / "schedules" / "static.toml")
    from runner.worlds import static_grid

    grid, t_grid, _ = timed(static_grid)
    if args.smoke:
        grid = grid[::17]  # every task split and condition, a few of each
    print(
        f"pinned to {where}; load average {os.getloadavg()[0]:.1f}; grid of {len(grid)} built in {t_grid:.2f} s"
    )

    rows, t_ours, c_ours = timed(lambda: static_ours(spec, grid))
    n_naive, t_naive, c_naive = timed(lambda: static_naive(spec, grid))
    assert len(rows) == n_naive == len(grid) * len(STATIC_POLICIES)
    abl, t_abl, c_abl = timed(lambda: static_ablations(spec, grid))
    print(
        f"static study {len(grid)} x {len(STATIC_POLICIES)} = {len(rows)} decisions: {t_ours:.2f} s wall, {c_ours:.2f} s CPU "
        f"(naive per-decision event loop {t_naive:.2f} s wall, {c_naive:.2f} s CPU; target <= 10 s)"
    )
    print(
        f"  + ECT single-check ablations, {len(abl)} decisions: {t_abl:.2f} s wall, {c_abl:.2f} s CPU"
    )

    # H1 data: the static run's held-out fault rows of ECT and the critic core.
    held = [r for r in rows if r.split == "heldout" and r.condition != "C0"]
    ect = [r for r in held if r.arm == "ect"]
    crit = [r for r in held if r.arm == "critic_core"]
    clusters = [r.task_id for r in ect]
    va = [float(r.decision == "complete") for r in ect]
    vb = [float(r.decision == "complete") for r in crit]
    # A non-degenerate variant (about half the critic's unsafe rows cleared) so the interval has width.
    flip = random.Random(1)
    vb_mixed = [v if flip.random() < 0.5 else 0.0 for v in vb]
    best = float("inf")
    for _ in range(3):
        res, t, _c = timed(
            lambda: cluster_bootstrap_diff(
                clusters, va, clusters, vb_mixed, replicates=reps, seed=2705, label="h1/task"
            )
        )
        best = min(best, t)
    (nlo, nhi), t_naive_b, _ = timed(lambda: naive_bootstrap(clusters, va, vb_mixed, reps, 2705))
    print(
        f"H1 task-cluster bootstrap, {len(ect)} rows/arm, {len(set(clusters))} clusters, {reps:,} replicates: "
        f"{best * 1000:.1f} ms, CI [{res.lo * 100:+.2f}, {res.hi * 100:+.2f}] pp "
        f"(naive loop {t_naive_b:.2f} s, CI [{nlo * 100:+.2f}, {nhi * 100:+.2f}] pp)"
    )

    sys.path.insert(0, str(REPO))
    from tests.analysis import _fixtures as fx

    outs, sched = fx.typed(fx.outcomes()), fx.schedule_rows()
    sim = ProviderInfo("simulated", "simulated-1", True)
    full, t_all, _ = timed(
        lambda: analyse_closed_loop(outs, sched, provider=sim, seed=2705, replicates=reps)
    )
    n_boot = 2 + len(full.secondary) + sum(len(v.to_json()) for v in full.intervals.values())
    print(
        f"full closed-loop analysis of 576 outcomes ({n_boot} bootstraps x {reps:,} replicates): "
        f"{t_all:.2f} s"
    )
    print(f"analysis: {best:.3f} s (baseline {t_naive_b:.2f} s, target 2 s)")


if __name__ == "__main__":
    main()
