"""Benchmark: `ect preflight` wall time, the probes run several at a time vs one at a time.

Every `ect run`, `ect demo`, the wheel test and every smoke run pay for the probe set. Issue 37
measured `ect preflight` at 11.0 s wall (1.7 s CPU) on this machine idle and 20-35 s under load,
the probes run one at a time. Three sides, interleaved so load from other processes hits each
alike, in one run:

* **cli** (the headline): ``ect preflight --store <absent>`` as a user runs it (simulated
  provider, every probe), wall clock of the whole process;
* **probes, at once**: ``BwrapBackend()`` then ``run_probes()`` (``PROBE_WORKERS`` at a time);
* **probes, one at a time** (the baseline, the code before): the same with ``workers=1`` and the
  sandbox's per-call default limits as the budget of a probe without its own.

The machine's load average is printed beside (the CPU probes need one CPU second each, so on a
loaded machine their wall time grows with the load). Target: cli <= 3 s wall idle.

Usage: python benchmarks/preflight.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.sandbox import BwrapBackend, Limits, run_probes  # noqa: E402


def cli() -> float:
    ect = Path(sys.executable).with_name("ect")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        r = subprocess.run([str(ect), "preflight", "--store", str(Path(tmp) / "absent.db")],
                           cwd=REPO, capture_output=True)  # fmt: skip
        took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"ect preflight failed: {r.stderr.decode()[-400:]}")
    return took


def probes(workers: int | None) -> float:
    t = time.perf_counter()
    be = BwrapBackend()
    try:
        results = (run_probes(be) if workers is None
                   else run_probes(be, workers=workers, limits=Limits()))  # fmt: skip
    finally:
        be.close()
    took = time.perf_counter() - t
    failed = [r.name for r in results if not r.passed]
    if failed:
        raise SystemExit(f"probes failed: {failed}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true",
                    help="one round: checks that the benchmark runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.rounds = 1
    sides: dict[str, list[float]] = {"cli": [], "at once": [], "one at a time": []}
    loads = []
    for i in range(args.rounds):
        loads.append(os.getloadavg()[0])
        sides["cli"].append(cli())
        sides["at once"].append(probes(None))
        sides["one at a time"].append(probes(1))
        print(f"round {i}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in sides.items())
              + f" (load {loads[-1]:.1f})", flush=True)
    med = {k: statistics.median(v) for k, v in sides.items()}
    print(f"  load average {statistics.median(loads):.1f} on {os.cpu_count()} CPUs (median of "
          f"{args.rounds} rounds); probes at once {med['at once']:.2f} s, one at a time (the code "
          f"before) {med['one at a time']:.2f} s; issue 37's figure for ect preflight: 11.0 s idle")
    print(f"preflight: {med['cli']:.2f} s wall (baseline {med['one at a time']:.2f} s probes one "
          f"at a time, ratio {med['at once'] / med['one at a time']:.2f}x; target <= 3 s idle)")

if __name__ == "__main__":
    main()
