"""CLI start-up: wall time of `ect --help` and `ect verify` against a bare interpreter start.

Workload: `ect --help`, and `ect verify` on the worked aggregation example of docs/formats.md
(docs/examples/aggregation: contract, 10-receipt ledger, certificate; decision `complete`).
Each is a fresh process, as from a shell loop or a CI step, so the figure is import time plus
the command's own work.

Baseline (measured in the same run, interleaved round by round so load on a shared machine hits
all three alike): `python -I -c pass` with the same interpreter, the floor of any Python CLI.
For scale, the table also times `python -c 'import click'`, the start of any click program.
Target: each command at most 4x the baseline. The headline is the worse of the two ratios, from
the median wall time of each command over the rounds.

The children run without ``PYTHONDONTWRITEBYTECODE``, so the warm-up round leaves the ``.pyc``
files an installed ``ect`` has (pip compiles them at install); with it set, every start would
compile the package from source and the figure would measure the compiler.

``--before DIR`` also times the same commands from another checkout of the package (say the
original code, ``git worktree add DIR main``), interleaved in the same rounds: before and after
side by side, measured in one run.

Run: python benchmarks/cli_startup.py [--rounds N] [--before DIR] [--smoke]. Prints its headline last.
"""

from __future__ import annotations

import argparse
import os
import resource
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


def _env(pythonpath: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath  # ahead of the installed (editable) package
    return env


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _wall(argv: list[str], expect: int, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``argv`` in ``cwd``."""
    c0, t0 = _cpu(), time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env=env)
    dt, dc = time.perf_counter() - t0, _cpu() - c0
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()}")
    return dt, dc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25, help="runs of each command")
    parser.add_argument("--before", type=Path, default=None, metavar="DIR",
                        help="also time a checkout of the package at DIR (before vs after)")
    parser.add_argument("--smoke", action="store_true",
                        help="one round: checks that the benchmark runs, measures nothing")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1
    ect = _ect()
    verify = ["verify", "--contract", str(EXAMPLE / "contract.json"),
              "--ledger", str(EXAMPLE / "ledger.json"),
              "--certificate", str(EXAMPLE / "certificate.json")]
    env = _env()
    commands = {
        "baseline: python -I -c pass": ([sys.executable, "-I", "-c", "pass"], 0, env, REPO),
        "ect --help": ([*ect, "--help"], 0, env, REPO),
        "ect verify (aggregation example)": ([*ect, *verify], 0, env, REPO),
    }
    ours = list(commands)[1:]
    # Not ours, for scale: the start of any click program (what `ect --help` cannot go below).
    commands["for scale: python -c 'import click'"] = (
        [sys.executable, "-I", "-c", "import click"], 0, env, REPO)
    if args.before is not None:
        # `python -m` puts the working directory first on sys.path: run from that checkout.
        where = args.before.resolve()
        old, module = _env(str(where)), [sys.executable, "-m", "runner"]
        commands["before: ect --help"] = ([*module, "--help"], 0, old, where)
        commands["before: ect verify"] = ([*module, *verify], 0, old, where)
    for argv, expect, e, cwd in commands.values():  # warm the page cache and .pyc files
        _wall(argv, expect, e, cwd)
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, (argv, expect, e, cwd) in commands.items():
            wall, cpu = _wall(argv, expect, e, cwd)
            times[name].append(wall)
            cpus[name].append(cpu)
    median = {name: statistics.median(ts) for name, ts in times.items()}
    cpu_median = {name: statistics.median(cs) for name, cs in cpus.items()}
    base_name = next(iter(commands))
    base, base_cpu = median[base_name], cpu_median[base_name]
    print(f"{args.rounds} rounds, median (min) wall time per process, then median CPU time "
          f"(user + system; less disturbed by other jobs); interpreter {sys.executable}")
    for name, ts in times.items():
        ratio = "" if name == base_name else f"  {median[name] / base:.2f}x baseline"
        print(f"  {name:<34} {median[name] * 1e3:7.1f} ms  ({min(ts) * 1e3:.1f} ms){ratio:<20}"
              f"  CPU {cpu_median[name] * 1e3:6.1f} ms  {cpu_median[name] / base_cpu:.2f}x")
    worst = max(median[name] / base for name in ours)
    before = ""
    if args.before is not None:
        was = max(median[name] / base for name in commands if name.startswith("before: "))
        before = f", before {was:.2f} x"
    print(f"cli_startup: {worst:.2f} x bare interpreter start (worse of `ect --help` and "
          f"`ect verify`) (baseline {base * 1e3:.1f} ms{before}, target <= {TARGET:.0f} x)")

if __name__ == "__main__":
    main()
