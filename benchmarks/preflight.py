"""Benchmark: `ect preflight` wall time, ours vs the code before, measured side by side.

Every `ect run`, `ect demo`, the wheel test and every smoke run pay for the probe set. Issue 37
measured `ect preflight` at 11.0 s wall (1.7 s CPU) on this machine idle and 20-35 s under load
(the probes one at a time); 9.4 s wall at load 1-3 with the probes 8 at a time and
``limits.cpu_tree`` at a fixed 3 CPU s. Sides, interleaved so load from other processes hits each
alike, in one run:

* **cli** (the headline): ``ect preflight --store <absent>`` as a user runs it (simulated
  provider, every probe), wall clock until the process has ended (what a terminal waits for),
  and its CPU time (the process and every child it waited for: the sandboxes); beside it, the
  wall clock until its output was closed (what a caller capturing the output waits for: the
  sandbox's reaper process inherits the runner's stdout and stderr and keeps them until it has
  watched for ``MIN_WATCH_S`` after the runner ended);
* **cli, before**: the same command run from the code of ``--base`` (a git revision, by default
  the one this work started from: a fixed ``cpu_s`` of 3 for ``limits.cpu_tree``, a fixed 3 s
  wait in ``limits.memory_tree``, ``runner.study`` importing the executor chain), extracted with
  ``git archive`` into a temporary directory and run there (``python -m runner``);
* **probes**: ``BwrapBackend()`` then ``run_probes()`` in this process (ours).

The commands run without ``PYTHONDONTWRITEBYTECODE`` (as ``benchmarks/cli_startup.py`` does), after
one untimed warm-up run of each side, so each side imports from the ``.pyc`` files an installed
``ect`` has (pip compiles them at install); with it set, every run would compile both packages
from source (about 0.1 s of the lock check's imports alone).

The machine's load average is printed beside every round (the CPU probes need CPU seconds, so on
a loaded machine their wall time grows with the load). Target: cli <= 3 s wall idle.

``--timeline`` instead runs one preflight in this process (``run_preflight``, every probe) and
prints when each phase and each probe started and ended (seconds from the process start), the
critical path's reading.

Usage: python benchmarks/preflight.py [--rounds N] [--base REV] [--smoke] [--timeline]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

T0 = time.perf_counter()  # the timeline's zero (before this project's imports)
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.sandbox import BwrapBackend, run_probes  # noqa: E402

BASE = "9cf2d0159aae097cf25a3f3fa4817be5b6c1b3b8"  # the branch point of issue 37's preflight work


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpuacct_group() -> Path | None:
    """A cgroup-v1 cpuacct group beneath this process's own (root only), or None. The sandboxes'
    per-call groups are made beneath the runner's own cgroup, so its ``cpuacct.usage`` counts
    the whole preflight: the runner, every launcher and every sandbox (``_children_cpu`` counts
    only the processes the runner waited for, not the sandboxes' own)."""
    if os.geteuid() != 0:
        return None
    try:
        own = next(line.split(":", 2)[2].strip() for line in Path("/proc/self/cgroup").read_text()
                   .splitlines() if "cpuacct" in line.split(":", 2)[1].split(","))  # fmt: skip
        group = Path("/sys/fs/cgroup/cpuacct") / own.lstrip("/") / f"ect-bench-{os.getpid()}"
        group.mkdir(exist_ok=True)
    except (StopIteration, OSError, IndexError):
        return None
    return group


CPUACCT: Path | None = None  # set by main()


OUTPUT_CLOSED: dict[str, list[float]] = {}  # wall s until the output closed, per side
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cli(tree: Path | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of ``ect preflight`` from this checkout, or from ``tree`` (the base): the
    wall clock until the process ended, the CPU of the whole process tree, sandboxes included,
    where a cpuacct group can count it (the wall clock until its output closed is kept in
    ``OUTPUT_CLOSED``)."""
    import threading

    cmd = ([str(Path(sys.executable).with_name("ect"))] if tree is None
           else [sys.executable, "-m", "runner"])  # fmt: skip
    if CPUACCT is not None:  # the command joins the group, then runs
        cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(CPUACCT), *cmd]
    with tempfile.TemporaryDirectory() as tmp:
        usage = CPUACCT / "cpuacct.usage" if CPUACCT is not None else None
        before = int(usage.read_text()) / 1e9 if usage is not None else _children_cpu()
        t = time.perf_counter()
        proc = subprocess.Popen([*cmd, "preflight", "--store", str(Path(tmp) / "absent.db")],
                                cwd=tree or REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=ENV)  # fmt: skip
        ended: list[float] = []

        def wait() -> None:
            proc.wait()
            ended.append(time.perf_counter())

        waiter = threading.Thread(target=wait)
        waiter.start()
        _, err = proc.communicate()
        closed = time.perf_counter() - t
        waiter.join()
        took = ended[0] - t
        cpu = (int(usage.read_text()) / 1e9 if usage is not None else _children_cpu()) - before
    if proc.returncode != 0:
        raise SystemExit(f"ect preflight ({tree or 'ours'}) failed: {err.decode()[-400:]}")
    OUTPUT_CLOSED.setdefault("cli" if tree is None else "cli, before", []).append(closed)
    return took, cpu


def probes() -> tuple[float, float]:
    t = time.perf_counter()
    be = BwrapBackend()
    try:
        results = run_probes(be)
    finally:
        be.close()
    took = time.perf_counter() - t
    failed = [f"{r.name}: expected {r.expected}, observed {r.observed} {r.detail}".strip()
              for r in results if not r.passed]  # fmt: skip
    if failed:
        raise SystemExit("probes failed: " + "; ".join(failed))
    return took, float("nan")


def timeline() -> None:
    """One preflight in this process, each phase and probe with its start and end."""
    import threading
    from typing import Any

    import runner.sandbox as sandbox
    import runner.study._preflight as pf
    from runner.sandbox import _probes

    events: list[tuple[float, float, str]] = []
    lock = threading.Lock()

    def timed(fn: Callable[..., Any], label: Callable[..., str]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with lock:
                    events.append((t - T0, time.perf_counter() - T0, label(*args)))
        return wrapped

    pf.check_lock = timed(pf.check_lock, lambda *a: "check_lock")  # type: ignore[attr-defined]
    pf._store_prefix = timed(pf._store_prefix, lambda *a: "store")
    sandbox.select_backend = timed(sandbox.select_backend, lambda *a: "backend (self-check)")
    _probes._run_one = timed(_probes._run_one, lambda *a: f"probe {a[1].name}")
    start_cost = timed(_probes.StartCost.cpu_s, lambda self, prog, *a: f"start cost of {prog}")
    _probes.StartCost.cpu_s = start_cost  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        report = pf.run_preflight(REPO / "schedules" / "v2.toml", Path(tmp) / "absent.db")
        end = time.perf_counter() - T0
    print(f"imports done at {t - T0:.2f} s; preflight {'passed' if report.passed else 'FAILED'} "
          f"at {end:.2f} s (load {os.getloadavg()[0]:.1f})")
    for start, stop, label in sorted(events):
        print(f"  {start:6.2f} {stop:6.2f} {stop - start:5.2f}  {label}")


def base_tree(rev: str, into: Path) -> Path:
    """The code of ``rev`` (``git archive``), extracted under ``into``."""
    (into / "base").mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into / "base")], input=archive.stdout, check=True)
    return into / "base"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base", default=BASE, help="the git revision of the code before")
    ap.add_argument("--smoke", action="store_true",
                    help="one round: checks that the benchmark runs, measures nothing")
    ap.add_argument("--timeline", action="store_true",
                    help="one preflight in this process: when each phase and probe ran")
    args = ap.parse_args()
    global CPUACCT
    CPUACCT = _cpuacct_group()
    try:
        if args.timeline:
            return timeline()
        return compare(args)
    finally:
        if CPUACCT is not None:
            with contextlib.suppress(OSError):
                CPUACCT.rmdir()


def compare(args: argparse.Namespace) -> None:
    print("CPU s: " + ("the whole process tree, sandboxes included (a cpuacct cgroup)"
                       if CPUACCT is not None else "the processes the command waited for "
                       "(no cpuacct cgroup here: the sandboxes' own CPU is not counted)"))
    if args.smoke:
        args.rounds = 1
    with tempfile.TemporaryDirectory(prefix="ect-bench-preflight-") as tmp:
        before = base_tree(args.base, Path(tmp))
        runs: dict[str, Callable[[], tuple[float, float]]] = {
            "cli": cli, "cli, before": lambda: cli(before), "probes": probes}
        if not args.smoke:  # writes the .pyc files an installed ect has (see the docstring)
            cli()
            cli(before)
            OUTPUT_CLOSED.clear()
        wall: dict[str, list[float]] = {k: [] for k in runs}
        cpu: dict[str, list[float]] = {k: [] for k in runs}
        loads = []
        for i in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for name, run in runs.items():
                w, c = run()
                wall[name].append(w)
                cpu[name].append(c)
            print(f"round {i} (load {loads[-1]:.1f}): " + ", ".join(
                f"{k} {wall[k][-1]:.2f} s" + ("" if k == "probes" else
                                             f" ({cpu[k][-1]:.2f} CPU s, output closed at "
                                             f"{OUTPUT_CLOSED[k][-1]:.2f} s)")
                for k in runs), flush=True)  # fmt: skip
    med = {k: statistics.median(v) for k, v in wall.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items() if k != "probes"}
    low = min(range(args.rounds), key=lambda i: loads[i])
    print(f"  load average {statistics.median(loads):.1f} on {os.cpu_count()} CPUs (median of "
          f"{args.rounds} rounds, 1-minute average at each round's start); probes "
          f"{med['probes']:.2f} s; at the lowest load ({loads[low]:.1f}): cli {wall['cli'][low]:.2f}"
          f" s, before {wall['cli, before'][low]:.2f} s; issue 37's figure: 11.0 s idle; base "
          f"{args.base[:12]}")
    closed = {k: statistics.median(v) for k, v in OUTPUT_CLOSED.items()}
    print(f"preflight: {med['cli']:.2f} s wall, {cpu_med['cli']:.2f} CPU s, output closed at "
          f"{closed['cli']:.2f} s (the code before: {med['cli, before']:.2f} s wall, "
          f"{cpu_med['cli, before']:.2f} CPU s, output closed at {closed['cli, before']:.2f} s; "
          f"ratio {med['cli'] / med['cli, before']:.2f}x; load {statistics.median(loads):.1f}; "
          "target <= 3 s idle)")


if __name__ == "__main__":
    main()
