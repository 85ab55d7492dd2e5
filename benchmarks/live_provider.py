"""Model calls a second through the real runner against a live (local) OpenAI-compatible server.

A fake paid API (``tests/fake_provider.py``, its own process, 0.5 s latency per reply) answers
the closed-loop study's planner and critic requests; ``execute`` runs the first cells of a copy
of ``schedules/v2.toml`` with ``--provider openai`` at concurrency 1, 4, 16 and 32 (each run a
fresh child interpreter with its own store). With 0.5 s a call, a parent that keeps up makes
about 2 calls/s per cell in flight; the figure is provider attempts / wall time of the cells.

``--baseline-repo PATH`` runs the same children against another checkout (e.g. a `git worktree`
of the commit before, read only: its spec is copied, its code imported) so before and after are
measured side by side in one run.

Each cell also makes sandboxed tool calls (a bwrap child each); their CPU time is printed beside
the parent's, because on a small machine they, not the parent, can bound the throughput.

    python benchmarks/live_provider.py [--baseline-repo ../before] [--latency 0.5] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LEVELS = (1, 4, 16, 32)
TARGET_X = 16.0


def cells_for(concurrency: int) -> int:
    return max(6, 4 * concurrency)


def one(repo: Path, url: str, concurrency: int, cells: int) -> dict[str, float]:
    """Run ``cells`` cells at ``concurrency`` with the runner of ``repo`` (called in a child)."""
    sys.path.insert(0, str(repo))
    from runner.study import (
        ProviderChoice,
        RunSettings,
        execute,
        load_spec,
        run_preflight,
        study_paths,
        write_lock,
        write_schedule,
    )

    with tempfile.TemporaryDirectory(prefix="ect-bench-live-") as tmp:
        spec_path = Path(tmp) / "v2.toml"
        shutil.copyfile(repo / "schedules" / "v2.toml", spec_path)
        spec = load_spec(spec_path)
        paths = study_paths(spec_path)
        write_schedule(spec, paths)
        write_lock(spec, paths)
        store = Path(tmp) / "v2.db"
        choice = ProviderChoice("openai", model=spec.model.name, base_url=url)
        report = run_preflight(spec_path, store, choice, probes="mandatory")
        assert report.passed, [c.to_json() for c in report.checks if not c.ok]
        t0 = time.perf_counter()
        c0 = time.process_time()
        k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        summary = execute(RunSettings(spec_path, store, choice, concurrency, cells),
                          preflight=report)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        sandbox_cpu = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    return {"concurrency": concurrency, "cells": summary.committed_now,
            "calls": summary.provider_attempts, "wall_s": round(wall, 3),
            "parent_cpu_s": round(cpu, 3), "sandbox_cpu_s": round(sandbox_cpu, 3),
            "tool_calls": summary.tool_calls,
            "calls_per_s": round(summary.provider_attempts / wall, 2)}


def _child(repo: Path, url: str, concurrency: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(repo)
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--one", str(concurrency),
         "--repo", str(repo), "--url", url],
        env=env, capture_output=True, text=True, check=False, cwd=repo)
    if out.returncode != 0:
        raise SystemExit(f"child failed ({repo}, concurrency {concurrency}):\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(repo: Path, url: str, label: str,
            levels: tuple[int, ...]) -> dict[int, dict[str, float]]:
    rows: dict[int, dict[str, float]] = {}
    for c in levels:
        rows[c] = _child(repo, url, c)
        r = rows[c]
        print(f"  {label:>8} concurrency {c:>2}: {r['calls']:>4} calls in {r['wall_s']:6.1f} s "
              f"= {r['calls_per_s']:6.2f} calls/s (parent CPU {r['parent_cpu_s']:.1f} s, "
              f"{r['tool_calls']} sandboxed tool calls: {r['sandbox_cpu_s']:.1f} CPU s)",
              flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--baseline-repo", type=Path, default=None,
                        help="Another checkout (e.g. the original main) measured the same way.")
    parser.add_argument("--latency", type=float, default=0.5, help="Server latency a reply (s).")
    parser.add_argument("--levels", type=lambda s: tuple(int(x) for x in s.split(",")),
                        default=LEVELS, help="Concurrency levels, comma-separated (default "
                        + ",".join(map(str, LEVELS)) + "); the headline compares the last "
                        "with the first.")
    parser.add_argument("--smoke", action="store_true",
                        help="concurrency 1 and 2 at 0.01 s a reply: checks that the benchmark "
                        "runs, measures nothing")
    args = parser.parse_args()
    if args.smoke:
        args.levels, args.latency = (1, 2), 0.01
    if args.one is not None:
        print(json.dumps(one(args.repo, args.url, args.one, cells_for(args.one))))  # noqa: TID251
        return
    env = dict(os.environ, PYTHONPATH=str(REPO))
    server = subprocess.Popen([sys.executable, "-m", "tests.fake_provider", "--latency",
                               str(args.latency)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        print(f"fake OpenAI-compatible server at {url}, {args.latency} s a reply; "
              f"{os.cpu_count()} CPUs", flush=True)
        before = (measure(args.baseline_repo, url, "baseline", args.levels)
                  if args.baseline_repo is not None else None)
        after = measure(REPO, url, "ours", args.levels)
    finally:
        server.terminate()
        server.wait(timeout=10)
    lo, hi = args.levels[0], args.levels[-1]
    top, base = after[hi]["calls_per_s"], after[lo]["calls_per_s"]
    if before is not None:
        print(f"baseline checkout {args.baseline_repo}: {before[hi]['calls_per_s']} calls/s at "
              f"concurrency {hi} ({before[hi]['calls_per_s'] / before[lo]['calls_per_s']:.1f}x "
              f"its {before[lo]['calls_per_s']} calls/s at concurrency {lo})")
    print(f"ours: {top / base:.1f}x the concurrency-{lo} throughput at concurrency {hi}")
    print(f"live_provider: {top} calls/s (baseline {base} calls/s at concurrency {lo}, "
          f"target >= {TARGET_X:g}x at 32 vs 1)")


if __name__ == "__main__":
    main()
