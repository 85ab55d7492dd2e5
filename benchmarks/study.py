"""The whole offline closed-loop study: 576 trajectories, every tool call sandboxed.

Wall time and peak memory of the full V2 study on the simulated provider, at concurrency 1 (the
baseline) and concurrency 2 (ours, the default of `ect demo`), side by side in one run. Each run
is a fresh child interpreter (`--one N`) that locks its own copy of schedules/v2.toml in a
temporary directory (so a stale committed lock does not matter), runs preflight with the two
mandatory denial probes (timed separately: `ect run` runs every probe, ~20 s more), then
executes every row into a real store. The child reports its wall time for the cells, its own
peak RSS and the peak RSS of its largest sandbox child (getrusage); both runs must give the same
per-cell result digests.

On an idle 2-core machine each run takes 10-20 s and the whole benchmark about half a minute;
on a loaded host (other sandboxes starting, cgroup migrations waiting for RCU grace periods) a
run can take minutes with little CPU used, so the CPU seconds are printed beside the wall time.
`--cells N` runs only the first N rows.

    python benchmarks/study.py [--cells N]
"""

from __future__ import annotations

import argparse
import hashlib
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
TARGET_S = 120.0


def one(concurrency: int, cells: int | None) -> dict[str, object]:
    """Run the study once in this process and return the figures (called in a child)."""
    from runner.store import Store
    from runner.study import (
        RunSettings,
        execute,
        load_spec,
        run_preflight,
        study_paths,
        write_lock,
        write_schedule,
    )

    with tempfile.TemporaryDirectory(prefix="ect-bench-study-") as tmp:
        spec_path = Path(tmp) / "v2.toml"
        shutil.copyfile(REPO / "schedules" / "v2.toml", spec_path)
        spec = load_spec(spec_path)
        paths = study_paths(spec_path)
        write_schedule(spec, paths)
        write_lock(spec, paths)
        store = Path(tmp) / "v2.db"
        t0 = time.perf_counter()
        report = run_preflight(spec_path, store, probes="mandatory")
        preflight_s = time.perf_counter() - t0
        if not report.passed:
            raise SystemExit(f"preflight failed: {report.to_json()}")
        t0 = time.perf_counter()
        summary = execute(RunSettings(spec_path, store, concurrency=concurrency, limit=cells),
                          preflight=report)
        wall_s = time.perf_counter() - t0
        with Store.open(store) as s:
            digests = [r.body["result_digest"] for r in s.records(1)]
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "concurrency": concurrency,
        "cells": summary.committed,
        "tool_calls": summary.tool_calls,
        "provider_attempts": summary.provider_attempts,
        "stop_reasons": dict(summary.stop_reasons),
        "preflight_s": round(preflight_s, 2),
        "wall_s": round(wall_s, 2),
        "peak_rss_mib": round(me.ru_maxrss / 1024, 1),
        "peak_child_rss_mib": round(kids.ru_maxrss / 1024, 1),
        "cpu_s": round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 1),
        "digests": hashlib.sha256("\n".join(digests).encode()).hexdigest(),
    }


def child(concurrency: int, cells: int | None) -> dict[str, object]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--one", str(concurrency)]
    if cells is not None:
        argv += ["--cells", str(cells)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's runner, not another one
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"concurrency {concurrency} failed:\n{done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=None, help="only the first N rows")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true",
                        help="the first 8 rows: checks that the benchmark runs, measures nothing")
    args = parser.parse_args()
    if args.smoke:
        args.cells = 8
    if args.one is not None:
        import logging

        import structlog

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        print(json.dumps(one(args.one, args.cells)))  # noqa: TID251 - display only
        return

    base = child(1, args.cells)
    ours = child(2, args.cells)
    print(f"{'':>12} {'cells':>6} {'tool calls':>10} {'attempts':>9} {'wall s':>8} "
          f"{'cpu s':>7} {'peak MiB':>9} {'child MiB':>10} {'preflight s':>12}")
    for name, r in (("concurrency1", base), ("concurrency2", ours)):
        print(f"{name:>12} {r['cells']:>6} {r['tool_calls']:>10} {r['provider_attempts']:>9} "
              f"{r['wall_s']:>8} {r['cpu_s']:>7} {r['peak_rss_mib']:>9} "
              f"{r['peak_child_rss_mib']:>10} {r['preflight_s']:>12}")
    print("peak MiB: this process (getrusage); child MiB: the largest child as getrusage reports "
          "it (a forked child counts the parent's pages until it execs)")
    print(f"stop reasons: {json.dumps(ours['stop_reasons'], sort_keys=True)}")  # noqa: TID251
    same = base["digests"] == ours["digests"]
    print(f"per-cell result digests identical across concurrency: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit("result digests differ between concurrency 1 and 2")
    print(f"study: {ours['wall_s']} s (baseline {base['wall_s']} s, target {TARGET_S:g} s)")


if __name__ == "__main__":
    main()
