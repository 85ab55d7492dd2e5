"""Benchmark: what a SIGKILLed runner leaves behind, and for how long (issue 37, item 1).

A runner (``tests/sandbox/kill_runner.py``: a pooled bwrap backend serving calls that fork, with
discards and refills) is SIGKILLed at a random instant, then the host is polled until no tagged
sandbox process, no process of the runner's host ids, no per-call cgroup and no held lease is
left. Two sides, interleaved, in one run:

* **reaper** (ours): the runner as shipped; its reaper acts when the kernel closes its socket.
* **no reaper** (the baseline, what the code before had): the same runner with its reaper
  SIGKILLed just before the runner, leaving bwrap's ``--die-with-parent`` as the only guard.

Headline: the time to a clean host after the kill (median and max) with the reaper, and how many
kills left something after 2 s without it.

Usage: python benchmarks/orphans.py [--kills N]   (root: per-call cgroups need it)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.sandbox.test_no_orphans import _groups, _left, start_runner

WAIT_S = 30.0


def one(seed: int, reaper: bool) -> tuple[float | None, dict[str, list[object]]]:
    """Kill one runner; the seconds until the host was clean (None: not within the wait) and,
    for the baseline, what was left 2 s after the kill."""
    rnd = random.Random(seed)
    r = start_runner(seed)
    owners = r.owners
    with r.proc as proc:
        r.ready.wait(60)
        time.sleep(rnd.uniform(0.0, 1.2))
        if not reaper:
            with contextlib.suppress(OSError):
                os.kill(r.reaper[0], signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    r.reader.join(5)
    killed = time.monotonic()
    left = _left(owners, r.tags)
    after2: dict[str, list[object]] = {}
    clean_at: float | None = None
    while time.monotonic() - killed < (WAIT_S if reaper else 2.0):
        if not left:
            clean_at = time.monotonic() - killed
            break
        time.sleep(0.02)
        left = _left(owners, r.tags)
    if not reaper:
        after2 = left
        for pid in left.get("processes", []) + left.get("id_processes", []):
            with contextlib.suppress(OSError):
                os.kill(int(str(pid)), signal.SIGKILL)
        deadline = time.monotonic() + 15
        while _groups(owners) and time.monotonic() < deadline:
            for g in _groups(owners):
                with contextlib.suppress(OSError):
                    g.rmdir()
            time.sleep(0.05)
    return clean_at, after2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--smoke", action="store_true",
                    help="one kill per side: checks that the benchmark runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.kills = 1
    ours: list[float | None] = []
    base_left = []
    for i in range(args.kills):
        seed = 1000 + i
        t, _ = one(seed, reaper=True)
        ours.append(t)
        print(f"kill {i}: reaper: clean after {t if t is None else round(t, 3)} s", flush=True)
        t, left = one(seed, reaper=False)
        base_left.append(left)
        print(f"kill {i}: no reaper: left after 2 s: "
              f"{ {k: len(v) for k, v in left.items()} or 'nothing'}", flush=True)
    done = [t for t in ours if t is not None]
    dirty = sum(1 for x in base_left if x)
    med = statistics.median(done) if done else float("nan")
    print(f"orphans: clean {med:.2f} s median, {max(done, default=float('nan')):.2f} s max after "
          f"the kill, {len(done)}/{args.kills} kills (baseline --die-with-parent only, the code "
          f"before: {dirty}/{args.kills} left processes, cgroups or leases 2 s after; target 0 "
          f"left)")

if __name__ == "__main__":
    main()
