"""CLI start-up: wall time of `ect --help` and `ect verify` against a bare interpreter start.

Workload: `ect --help`, and `ect verify` on the worked aggregation example of docs/formats.md
(docs/examples/aggregation: contract, 10-receipt ledger, certificate; decision `complete`).
Each is a fresh process, as from a shell loop or a CI step, so the figure is import time plus
the command's own work.

Baseline (measured in the same run, interleaved round by round so load on a shared machine hits
all three alike): `python -I -c pass` with the same interpreter, the floor of any Python CLI.
Target: each command at most 4x the baseline. The headline is the worse of the two ratios, from
the median wall time of each command over the rounds.

Run: python benchmarks/cli_startup.py [--rounds N]. Prints its headline last.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "examples" / "aggregation"
TARGET = 4.0


def _ect() -> list[str]:
    """The installed `ect` script beside this interpreter (what a user runs), else `-m runner`."""
    script = Path(sys.executable).with_name("ect")
    return [str(script)] if script.exists() else [sys.executable, "-m", "runner"]


def _wall(argv: list[str], expect: int) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()}")
    return dt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25, help="runs of each command")
    args = parser.parse_args()
    ect = _ect()
    commands = {
        "baseline: python -I -c pass": ([sys.executable, "-I", "-c", "pass"], 0),
        "ect --help": ([*ect, "--help"], 0),
        "ect verify (aggregation example)": ([*ect, "verify",
                                              "--contract", str(EXAMPLE / "contract.json"),
                                              "--ledger", str(EXAMPLE / "ledger.json"),
                                              "--certificate", str(EXAMPLE / "certificate.json")],
                                             0),
    }
    for argv, expect in commands.values():  # warm the page cache and .pyc files
        _wall(argv, expect)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, (argv, expect) in commands.items():
            times[name].append(_wall(argv, expect))
    median = {name: statistics.median(ts) for name, ts in times.items()}
    base_name = next(iter(commands))
    base = median[base_name]
    print(f"{args.rounds} rounds, median (min) wall time per process; interpreter {sys.executable}")
    for name, ts in times.items():
        ratio = "" if name == base_name else f"  {median[name] / base:.2f}x baseline"
        print(f"  {name:<34} {median[name] * 1e3:7.1f} ms  ({min(ts) * 1e3:.1f} ms){ratio}")
    worst = max(median[name] / base for name in commands if name != base_name)
    print(f"cli_startup: {worst:.2f} x bare interpreter start (worse of `ect --help` and "
          f"`ect verify`) (baseline {base * 1e3:.1f} ms, target <= {TARGET:.0f} x)")


if __name__ == "__main__":
    main()
