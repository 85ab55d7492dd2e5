"""``ect sweep``: the closed-loop study rerun over a grid of simulator parameters.

With the simulated provider a gate's outcome follows from the simulator's parameters, which this
project chose. A sweep shows how: for every point of the cartesian product of the values given
per parameter it writes a spec with those values, builds that spec's schedule and lock, runs
the whole closed-loop study (every tool call sandboxed, every cell committed to a verified
store) and analyses it as ``ect report`` does; then it writes one table (``sweep.md``,
``sweep.json``) and one plot (``sweep.svg``) of the H2-H4 estimates and gate outcomes across
the grid. Points run in parallel, one process each, as many at once as ``jobs`` (default: the
machine's cores).

Parameters are named by their dotted spec names (``simulated.planner.p_premature_finish``,
``simulated.critic.p_reject_supported``: the TOML path in the study spec). A point's directory
(``points/p001`` ...) keeps its spec, schedule, lock, store and full report.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from html import escape
from multiprocessing import get_context
from multiprocessing.queues import Queue
from pathlib import Path
from typing import TYPE_CHECKING

from runner.analysis._closed_results import Table4Counts
from runner.analysis._honesty import SIMULATOR_NOTE
from runner.analysis._record import Record
from runner.analysis._svg import _n, _text
from runner.canonical import (
    MAX_TOML_BYTES,
    atomic_write_all,
    loads_toml,
    raw_digest,
    read_bounded,
)
from runner.errors import AnalysisError, ExitCategory, FormatError

if TYPE_CHECKING:
    from runner.analysis._closed_results import ClosedLoopResults
    from runner.study import CellRecord, RunSummary

__all__ = [
    "SweepGate",
    "SweepH4",
    "SweepInvalid",
    "SweepPointFailed",
    "SweepPointHalted",
    "SweepPointRefused",
    "SweepResult",
    "SweepRow",
    "SweepSpec",
    "UnknownSimulatorParameter",
    "parse_grid",
    "simulator_parameter_names",
    "spec_with_overrides",
    "sweep",
    "sweep_markdown",
    "sweep_svg",
    "sweep_table",
]

SWEEP_FORMAT = "ect.sweep/1"
MAX_POINTS = 64
"""Grid points one sweep may run (each is a whole study; a larger grid is refused up front)."""


class SweepInvalid(AnalysisError):
    """A sweep's arguments are unusable (a malformed --param, an empty or oversized grid)."""

    exit_category = ExitCategory.USAGE


class SweepPointFailed(AnalysisError):
    """A grid point's study or report failed (the message names the point and the cause).
    Carried across the process boundary as a plain message, so it always unpickles."""

    exit_category = ExitCategory.RUNTIME


class SweepPointRefused(SweepPointFailed):
    """A grid point's preflight or lock refused to run (a refused precondition)."""

    exit_category = ExitCategory.REFUSED


class SweepPointHalted(SweepPointFailed):
    """A grid point's run was halted by a kill switch (STOP file, ceilings)."""

    exit_category = ExitCategory.HALTED


class UnknownSimulatorParameter(SweepInvalid):
    """A --param names no simulator parameter; ``valid`` lists every name there is."""

    exit_category = ExitCategory.USAGE

    def __init__(self, name: str, valid: Sequence[str]) -> None:
        self.name = name
        self.valid = tuple(valid)
        super().__init__(f"unknown simulator parameter {name!r}; valid names: "
                         f"{', '.join(self.valid)}")


def simulator_parameter_names() -> tuple[str, ...]:
    """Every simulator parameter by its dotted spec name, in name order (the study's list:
    :func:`runner.study.simulator_parameters`)."""
    from runner.study import simulator_parameters

    return tuple(simulator_parameters())


def _probability(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SweepInvalid(f"--param {name}: {text!r} is not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise SweepInvalid(f"--param {name}: {text!r} is not a probability in [0, 1]")
    return value


def parse_grid(params: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """``["NAME=v1,v2", ...]`` -> ``{NAME: (v1, v2)}``, every name and value checked.

    Raises:
        UnknownSimulatorParameter: a name is not a simulator parameter.
        SweepInvalid: a malformed item, a repeated name or value, a value outside [0, 1], or a
            grid of more than :data:`MAX_POINTS` points.
    """
    if not params:
        raise SweepInvalid("give at least one --param NAME=v1,v2,...")
    valid = simulator_parameter_names()
    grid: dict[str, tuple[float, ...]] = {}
    for item in params:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not name or not values.strip():
            raise SweepInvalid(f"--param {item!r}: expected NAME=v1,v2,...")
        if name not in valid:
            raise UnknownSimulatorParameter(name, valid)
        if name in grid:
            raise SweepInvalid(f"--param {name} is given twice; list its values once")
        parsed = tuple(_probability(name, v.strip()) for v in values.split(","))
        if len(set(parsed)) != len(parsed):
            raise SweepInvalid(f"--param {name}: a value is listed twice")
        grid[name] = parsed
    points = math.prod(len(v) for v in grid.values())
    if points > MAX_POINTS:
        raise SweepInvalid(f"the grid has {points} points; at most {MAX_POINTS} per sweep")
    return grid


def spec_with_overrides(spec_bytes: bytes, overrides: Mapping[str, float]) -> bytes:
    """The study spec's TOML with simulator parameters replaced (a new, self-contained spec).

    Raises:
        UnknownSimulatorParameter: a name is not a simulator parameter.
        SweepInvalid: the spec is not TOML.
    """
    import tomli_w

    valid = simulator_parameter_names()
    try:
        doc = loads_toml(spec_bytes, what="study spec")
    except FormatError as e:
        raise SweepInvalid(str(e)) from e
    simulated = doc.setdefault("simulated", {})
    for name, value in overrides.items():
        if name not in valid:
            raise UnknownSimulatorParameter(name, valid)
        _, table, field = name.split(".")
        simulated.setdefault(table, {})[field] = float(value)
    header = ("# Written by `ect sweep`: the study spec with these simulator parameters "
              "replaced:\n" + "".join(f"#   {k} = {v!r}\n" for k, v in sorted(overrides.items())))
    return (header + tomli_w.dumps(doc)).encode("utf-8")


@dataclass(frozen=True)
class _Point:
    index: int
    overrides: dict[str, float]
    directory: str
    seed: int
    replicates: int
    requests_per_minute: int | None = None  # the point's throttle (None: the spec's)
    tokens_per_minute: int | None = None

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v:g}" for k, v in self.overrides.items())


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepGate(Record):
    """H2 or H3 at one grid point: the difference, its interval and the gate's outcome."""

    diff_pp: float
    ci_pp: tuple[float, float]
    passed: bool
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepH4(Record):
    """H4 at one grid point."""

    recoveries: int
    eligible: int
    recovered_then_supported: int
    passed: bool
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepRow(Record):
    """One grid point: its parameters, where its report is, the gates and Table 4's counts."""

    point: int
    parameters: dict[str, float]
    directory: str
    h2: SweepGate
    h3: SweepGate
    h4: SweepH4
    table4: dict[str, Table4Counts]  # each policy's counts at this point

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v:g}" for k, v in self.parameters.items())

    def gates(self) -> tuple[tuple[str, SweepGate | SweepH4], ...]:
        return (("H2", self.h2), ("H3", self.h3), ("H4", self.h4))


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepSpec(Record):
    """The study spec every point started from."""

    name: str
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult(Record):
    """sweep.json: the grid, the spec's other parameters, and one row per point."""

    format: str = SWEEP_FORMAT
    spec: SweepSpec
    grid: dict[str, tuple[float, ...]]
    base_parameters: dict[str, float]
    seed: int
    replicates: int
    note: str
    rows: tuple[SweepRow, ...]

    def __post_init__(self) -> None:
        if self.format != SWEEP_FORMAT:
            raise AnalysisError(f"sweep: format {self.format!r}, not {SWEEP_FORMAT!r}")


_CellQueue = Queue  # multiprocessing's queue of (point, committed, total), None to stop

# The queue a point's process reports its committed cells on (set by the pool's initializer;
# None when the caller asked for no cell progress).
_CELLS: _CellQueue[tuple[int, int, int] | None] | None = None


def _set_cell_queue(queue: _CellQueue[tuple[int, int, int] | None] | None) -> None:
    global _CELLS
    _CELLS = queue


def _quiet_logs() -> None:
    """A point's process logs warnings and errors only (to stderr), as `ect run` does without
    --log-json: per-cell info lines from every point at once would bury the progress."""
    import logging
    import sys

    import structlog

    structlog.configure(
        processors=[structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def _run_point(point: _Point, spec_bytes: bytes) -> SweepRow:
    """One grid point, in its own process: spec -> schedule -> lock -> study -> report.

    Raises:
        SweepPointRefused / SweepPointHalted / SweepPointFailed: the point's run or report
            failed; the message names the point and the original error.
    """
    from runner.errors import EctError
    from runner.study import Halted, LockError, PreflightFailed

    try:
        return _study_point(point, spec_bytes)
    except EctError as e:
        kind: type[SweepPointFailed] = SweepPointFailed
        if isinstance(e, PreflightFailed | LockError):
            kind = SweepPointRefused
        elif isinstance(e, Halted):
            kind = SweepPointHalted
        raise kind(f"sweep point p{point.index:03d} ({point.label}): {e}") from None


def _study_point(point: _Point, spec_bytes: bytes) -> SweepRow:
    from runner.analysis._driver import report_from_store
    from runner.study import (
        ProviderChoice,
        RunSettings,
        execute,
        load_spec,
        study_paths,
        write_lock,
        write_schedule,
    )

    _quiet_logs()
    where = Path(point.directory)
    where.mkdir(parents=True, exist_ok=True)
    spec_path = where / "study.toml"
    data = spec_with_overrides(spec_bytes, point.overrides)
    spec_path.write_bytes(data)
    spec = load_spec(spec_path)
    for name, value in point.overrides.items():  # the written spec says what was asked
        _, table, field = name.split(".")
        if spec.simulated.get(table, {}).get(field) != value:
            raise AnalysisError(f"the spec written for {point.label} does not carry {name}")
    paths = study_paths(spec_path)
    write_schedule(spec, paths, replace=True)
    write_lock(spec, paths, replace=True)
    store = where / "run.db"
    for stale in where.glob("run.db*"):
        stale.unlink()
    queue = _CELLS

    def on_cell(_record: CellRecord, summary: RunSummary) -> None:
        if queue is not None:
            queue.put((point.index, summary.committed, summary.total))

    execute(RunSettings(spec_path, store, ProviderChoice("simulated"), concurrency=1,
                        requests_per_minute=point.requests_per_minute,
                        tokens_per_minute=point.tokens_per_minute), on_cell=on_cell)
    res = report_from_store(store, paths.schedule, where / "report", seed=point.seed,
                            replicates=point.replicates)
    return _row(point, res)


def _row(point: _Point, res: ClosedLoopResults) -> SweepRow:
    h2, h3, h4 = res.h2, res.h3, res.h4
    return SweepRow(
        point=point.index,
        parameters=dict(point.overrides),
        directory=f"points/p{point.index:03d}",
        h2=SweepGate(diff_pp=h2.diff_pp, ci_pp=h2.ci_pp, passed=h2.passed, outcome=h2.outcome),
        h3=SweepGate(diff_pp=h3.diff_pp, ci_pp=h3.ci_pp, passed=h3.passed, outcome=h3.outcome),
        h4=SweepH4(recoveries=h4.recoveries, eligible=h4.eligible,
                   recovered_then_supported=h4.recovered_then_supported, passed=h4.passed,
                   outcome=h4.outcome),
        table4={p: v.counts() for p, v in res.table4.items()},
    )


class _CellDrain:
    """Reads the points' (point, committed, total) reports in a thread and calls ``on_cells``
    with the grid's totals."""

    def __init__(self, queue: _CellQueue[tuple[int, int, int] | None], points: int,
                 on_cells: Callable[[int, int], None]) -> None:
        self._queue, self._points, self._on_cells = queue, points, on_cells
        self._done: dict[int, int] = {}
        self._thread = threading.Thread(target=self._run, name="ect-sweep-cells", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            point, committed, total = item
            self._done[point] = committed
            self._on_cells(sum(self._done.values()), total * self._points)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._queue.close()


def sweep(
    spec_path: str | Path,
    params: Sequence[str],
    out_dir: str | os.PathLike[str],
    *,
    jobs: int | None = None,
    seed: int = 2705,
    replicates: int = 10_000,
    on_point: Callable[[int, int, SweepRow], None] | None = None,
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
    on_cells: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """Run the closed-loop study at every grid point of ``params`` and write the outputs.

    ``requests_per_minute``/``tokens_per_minute`` throttle each point's run (one limiter per
    point process; None: the spec's [provider] values; pacing changes no result).

    ``params`` are ``NAME=v1,v2,...`` items (dotted simulator parameter names); ``jobs`` grid
    points run at once, each in its own process (default: ``os.cpu_count()``, at most the
    number of points). ``on_point(done, total, row)`` is called as each point finishes;
    ``on_cells(done, total)`` as any point commits a cell, with the cells committed and to run
    over the whole grid (every point runs the same schedule), from a thread of the caller's
    process.
    Writes ``sweep.json``, ``sweep.md`` and ``sweep.svg`` into ``out_dir`` (and each point's
    spec, schedule, lock, store and report under ``points/``); returns sweep.json's record.

    Raises:
        SweepInvalid / UnknownSimulatorParameter: unusable ``params`` (before anything runs).
        SpecError (runner.study): the study spec is not a valid spec.
        any error of the study run or its report, for the first point that fails.
    """
    from runner.study import SpecError, load_spec, simulator_parameters

    grid = parse_grid(params)
    spec = load_spec(spec_path)  # refuse a bad spec before any process starts
    try:
        spec_bytes = read_bounded(spec_path, limit=MAX_TOML_BYTES, what="study spec")
    except OSError as e:
        raise SpecError(f"cannot read study spec {spec_path}: {e.strerror}") from e
    if jobs is not None and jobs < 1:
        raise SweepInvalid(f"--jobs must be at least 1, got {jobs}")
    out = Path(out_dir)
    names = list(grid)
    points = [
        _Point(i + 1, dict(zip(names, values, strict=True)), str(out / "points" / f"p{i + 1:03d}"),
               seed, replicates, requests_per_minute, tokens_per_minute)
        for i, values in enumerate(itertools.product(*(grid[n] for n in names)))
    ]
    workers = min(len(points), jobs or os.cpu_count() or 1)
    rows: dict[int, SweepRow] = {}
    out.mkdir(parents=True, exist_ok=True)
    ctx = get_context("spawn")
    queue = ctx.Queue() if on_cells is not None else None
    drain = None if queue is None or on_cells is None else _CellDrain(queue, len(points), on_cells)
    # "spawn": every point starts from a fresh interpreter (no inherited threads or locks).
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_set_cell_queue,
                             initargs=(queue,)) as pool:
        futures = {pool.submit(_run_point, p, spec_bytes): p for p in points}
        try:
            for future in as_completed(futures):
                row = future.result()
                rows[row.point] = row
                if on_point is not None:
                    on_point(len(rows), len(points), row)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        finally:
            if drain is not None:
                drain.close()
    result = SweepResult(
        spec=SweepSpec(name=spec.name, sha256=raw_digest(spec_bytes)),
        grid=dict(grid),
        base_parameters=simulator_parameters(spec),
        seed=seed,
        replicates=replicates,
        note=SIMULATOR_NOTE,
        rows=tuple(rows[p.index] for p in points),
    )
    atomic_write_all({out / "sweep.json": _json_bytes(result),
                      out / "sweep.md": sweep_markdown(result),
                      out / "sweep.svg": sweep_svg(result)})
    return result


def _json_bytes(result: SweepResult) -> bytes:
    import json

    return (json.dumps(result.to_json(), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)  # noqa: TID251
            + "\n").encode("utf-8")


def _pp(x: float) -> str:
    return f"{x:+.2f}" if round(x, 2) != 0 else "0.00"


def _short(name: str) -> str:
    return name.removeprefix("simulated.")


def sweep_table(r: SweepResult) -> list[str]:
    """The sweep's table as Markdown lines: one row per grid point, H2-H4 estimates and each
    gate's outcome in words."""
    names = list(r.grid)
    head = [*(_short(n) for n in names), "H2 ECT-controller (pp) [95% CI]", "H2",
            "H3 ECT-controller (pp) [95% CI]", "H3", "H4 recovered / then supported", "H4"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for row in r.rows:
        h2, h3, h4 = row.h2, row.h3, row.h4
        cells = [
            *(f"{row.parameters[n]:g}" for n in names),
            f"{_pp(h2.diff_pp)} [{_pp(h2.ci_pp[0])}, {_pp(h2.ci_pp[1])}]",
            h2.outcome,
            f"{_pp(h3.diff_pp)} [{_pp(h3.ci_pp[0])}, {_pp(h3.ci_pp[1])}]",
            h3.outcome,
            f"{h4.recoveries}/{h4.eligible}, {h4.recovered_then_supported}",
            h4.outcome,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def sweep_markdown(r: SweepResult) -> bytes:
    """sweep.md: what was swept, the note on the simulator, and :func:`sweep_table`."""
    lines = [
        f"# ect sweep: {r.spec.name} across the simulator's parameters",
        "",
        r.note,
        "",
        "Every other simulator parameter keeps the spec's value: "
        + ", ".join(f"{k}={v:g}" for k, v in r.base_parameters.items() if k not in r.grid)
        + f". Bootstrap: {r.replicates} replicates, seed {r.seed}.",
        "",
        *sweep_table(r),
        "",
        "ECT's U is structural (0 by construction: the verifier is both ECT's stop rule and "
        "half of \"supported\"), so H2 moves only with the controller's U; each point's "
        "report gives the measured parts (S, R, turns, tokens, cost) and the verifier audit.",
        "",
        "Each point's full report: `points/pNNN/report/` (tables.md, report.html).",
        "",
    ]
    return "\n".join(lines).encode("utf-8")


NEUTRAL = "#52606d"
"""The report's neutral colour (a simulated gate's badge in report.html): never pass/fail."""


def sweep_svg(r: SweepResult) -> bytes:
    """sweep.svg: per grid point, H2 and H3 differences with their 95% intervals (a dot and a
    whisker on a shared pp axis with 0 and H3's margin marked), H4's counts, and whether each
    gate was met under that point's parameters.

    Every figure here comes from the simulated provider, so the report's neutral-badge rule
    holds: no pass/fail colours (H2 and H3 in blue and the report's neutral grey, never green
    or red), SIMULATED next to the figures, and each gate line says it was met or not *under
    the simulator's parameters* (which the row label and the note name)."""
    rows = r.rows
    label_w, plot_w, row_h, top = 260, 360, 26, 74
    lo = min([-10.0, *(v for row in rows for g in (row.h2, row.h3) for v in g.ci_pp)])
    hi = max([10.0, *(v for row in rows for g in (row.h2, row.h3) for v in g.ci_pp)])
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return float(label_w + (v - lo) / span * plot_w)

    height = top + 3 * row_h * len(rows) + 40
    width = label_w + plot_w + 120
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img">',
        f"<title>{escape('ect sweep: H2 and H3 across the simulator grid')}</title>",
        '<rect width="100%" height="100%" fill="#fff"/>',
        _text(8, 18, "H2 and H3 (ECT minus controller, pp) across the simulator grid",
              size=14),
        _text(8, 36, "SIMULATED: every point is from the deterministic simulation (the row "
              "names what it varies; the rest: the spec's)", size=11),
        _text(8, 52, "dot: estimate; whisker: 95% task-cluster interval; filled: gate met "
              "under these simulator parameters", size=11),
    ]
    for v, colour in ((0.0, NEUTRAL), (-10.0, "#9aa5b1")):
        parts.append(f'<line x1="{_n(x(v))}" y1="{top - 6}" x2="{_n(x(v))}" '
                     f'y2="{height - 34}" stroke="{colour}" stroke-dasharray="3,3"/>')
    parts.append(_text(x(0.0), height - 20, "0", anchor="middle", size=11))
    parts.append(_text(x(lo), height - 20, f"{lo:.0f} pp", anchor="start", size=11))
    parts.append(_text(x(hi), height - 20, f"{hi:+.0f} pp", anchor="end", size=11))
    parts.append(_text(x(-10.0), height - 8, "H3 margin -10", anchor="middle", size=11))
    y = top
    for row in rows:
        label = ", ".join(f"{_short(k)}={v:g}" for k, v in row.parameters.items())
        for name, g, colour in (("H2", row.h2, "#1d4ed8"), ("H3", row.h3, NEUTRAL)):
            cy = y + row_h / 2
            parts.append(_text(8, cy + 4, f"{name} @ {label}"[:44], size=11))
            parts.append(f'<line x1="{_n(x(g.ci_pp[0]))}" y1="{_n(cy)}" '
                         f'x2="{_n(x(g.ci_pp[1]))}" y2="{_n(cy)}" stroke="{colour}" '
                         'stroke-width="2"/>')
            fill = colour if g.passed else "#fff"
            parts.append(f'<circle cx="{_n(x(g.diff_pp))}" cy="{_n(cy)}" r="5" '
                         f'fill="{fill}" stroke="{colour}" stroke-width="2"/>')
            met = "met" if g.passed else "not met"
            parts.append(_text(label_w + plot_w + 10, cy + 4,
                               f"{_pp(g.diff_pp)} ({met}, simulated)", size=11))
            y += row_h
        h4 = row.h4
        met = "met" if h4.passed else "not met"
        parts.append(_text(8, y + row_h / 2 + 4,
                           f"H4 @ {label}"[:44] + f": {h4.recoveries}/{h4.eligible} "
                           f"recovered, {h4.recovered_then_supported} then supported "
                           f"(gate {met} under the simulator's parameters)", size=11))
        y += row_h
    parts.append("</svg>")
    return ("\n".join(parts) + "\n").encode("utf-8")
