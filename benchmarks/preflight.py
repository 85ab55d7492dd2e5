"""Benchmark: `ect preflight` wall time, ours vs the code before, measured side by side.

Every `ect run`, `ect demo`, the wheel test and every smoke run pay for the probe set. Issue 37
measured `ect preflight` at 11.0 s wall (1.7 s CPU) on this machine idle and 20-35 s under load,
the probes run one at a time; then 15.5 s under load 17.9 with the probes several at a time in
the probe file's order. Sides, interleaved so load from other processes hits each alike, in one
run:

* **cli** (the headline): ``ect preflight --store <absent>`` as a user runs it (simulated
  provider, every probe), wall clock of the whole process;
* **cli, file order** (the code before): the same, the probes started in the probe file's order
  (``limits.cpu_tree``, at least ``cpu_s`` = 3 s at the call's one CPU, is last in the file);
* **probes**: ``BwrapBackend()`` then ``run_probes()`` (``PROBE_WORKERS`` at a time, the probes
  that wait for a limit first);
* **probes, file order**: the same in the file's order;
* **probes, one at a time** (the code before issue 37's first change): ``workers=1`` and the
  sandbox's per-call default limits as the budget of a probe without its own.

The machine's load average is printed beside every round (the CPU probes need CPU seconds, so on
a loaded machine their wall time grows with the load). Target: cli <= 3 s wall idle; but
``limits.cpu_tree`` alone takes at least 3 s (3 CPU seconds at one CPU: docs/sandbox.md).

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
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.sandbox import BwrapBackend, Limits, run_probes  # noqa: E402

# ``ect`` with the probes started in the probe file's order (the code before): every probe's
# least wall time is taken as equal, so the (stable) sort keeps the file's order.
FILE_ORDER = ("import sys; import runner.sandbox._probes as p; p._least_wall_s = lambda _: 0.0; "
              "from runner._entry import main; sys.argv[0] = 'ect'; sys.exit(main())")


def cli(file_order: bool = False) -> float:
    ect = Path(sys.executable).with_name("ect")
    cmd = [sys.executable, "-c", FILE_ORDER] if file_order else [str(ect)]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        r = subprocess.run([*cmd, "preflight", "--store", str(Path(tmp) / "absent.db")],
                           cwd=REPO, capture_output=True)  # fmt: skip
        took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"ect preflight failed: {r.stderr.decode()[-400:]}")
    return took


def probes(workers: int | None, file_order: bool = False) -> float:
    import runner.sandbox._probes as p

    least = p._least_wall_s
    if file_order:
        p._least_wall_s = lambda _: 0.0  # type: ignore[assignment]
    t = time.perf_counter()
    be = BwrapBackend()
    try:
        results = (run_probes(be) if workers is None
                   else run_probes(be, workers=workers, limits=Limits()))  # fmt: skip
    finally:
        be.close()
        p._least_wall_s = least
    took = time.perf_counter() - t
    failed = [f"{r.name}: expected {r.expected}, observed {r.observed} {r.detail}".strip()
              for r in results if not r.passed]  # fmt: skip
    if failed:
        raise SystemExit("probes failed: " + "; ".join(failed))
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true",
                    help="one round: checks that the benchmark runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.rounds = 1
    sides: dict[str, list[float]] = {"cli": [], "cli, file order": [], "probes": [],
                                     "probes, file order": [], "probes, one at a time": []}
    runs: dict[str, Callable[[], float]] = {"cli": cli, "cli, file order": lambda: cli(file_order=True),
            "probes": lambda: probes(None), "probes, file order": lambda: probes(None, True),
            "probes, one at a time": lambda: probes(1)}
    loads = []
    for i in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for name, run in runs.items():
            sides[name].append(run())
        print(f"round {i} (load {loads[-1]:.1f}): "
              + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in sides.items()), flush=True)
    med = {k: statistics.median(v) for k, v in sides.items()}
    print(f"  load average {statistics.median(loads):.1f} on {os.cpu_count()} CPUs (median of "
          f"{args.rounds} rounds, 1-minute average at each round's start); probes "
          f"{med['probes']:.2f} s, in file order (the code before) {med['probes, file order']:.2f}"
          f" s, one at a time {med['probes, one at a time']:.2f} s; issue 37's figure for ect "
          "preflight: 11.0 s idle")
    print(f"preflight: {med['cli']:.2f} s wall (the code before, probes in file order: "
          f"{med['cli, file order']:.2f} s; ratio {med['cli'] / med['cli, file order']:.2f}x; "
          f"load {statistics.median(loads):.1f}; target <= 3 s idle)")


if __name__ == "__main__":
    main()
