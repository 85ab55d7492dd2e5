"""Progress for long commands: a live rich line on a terminal, plain periodic lines otherwise.

The library reports progress through callbacks (``execute(on_start=, on_cell=)``,
``run_preflight(on_check=)``, ``replay_store(on_cell=)``, ``static_study(on_progress=)``) and
knows nothing about rendering; this module turns those callbacks into output on stderr.

On a TTY a rich progress bar redraws in place (``transient`` off, so the last state stays on
screen). Elsewhere (CI logs, pipes) one line is written at the first update, then at most every
``interval`` seconds, and always at the end, so a log shows the run is alive without a line per
cell.
"""

from __future__ import annotations

import sys
import time
from typing import IO, TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID
    from rich.status import Status

    from runner.study import RunSummary

__all__ = ["CellProgress", "CountProgress", "PhaseNote", "cell_fields", "duration"]

INTERVAL_S = 5.0


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class _Lines:
    """Shared pacing: when to write the next plain line."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.last = -float("inf")

    def due(self, final: bool) -> bool:
        now = time.monotonic()
        if final or now - self.last >= self.interval:
            self.last = now
            return True
        return False


def cell_fields(summary: RunSummary, done_now: int, elapsed: float) -> dict[str, str]:
    """The figures of a run's progress line, as text: rate, ETA, cost, calls and stops."""
    from runner.providers import is_simulated

    rate = done_now / elapsed if elapsed > 0 else 0.0
    left = summary.goal - summary.committed
    eta = "-" if left == 0 else (duration(left / rate) if rate > 0 else "?")
    simulated = " (simulated)" if is_simulated(summary.provider) else ""
    stops = ", ".join(f"{k} {v}" for k, v in sorted(summary.stop_reasons.items())) or "-"
    return {
        "rate": f"{rate:.1f} cells/s",
        "eta": f"ETA {eta}",
        "cost": f"cost ${summary.cost_usd:.4f}{simulated}",
        "calls": f"{summary.provider_attempts} calls",
        "stops": f"stops: {stops}",
    }


def _count(summary: RunSummary) -> str:
    """``committed/goal``: the count the ETA runs to; under ``--limit`` it says which part of
    the schedule that is (``3/24 (--limit 24 of 576 rows)``), never ``3/576`` beside an ETA
    for 24."""
    if summary.goal < summary.total:
        return f"{summary.committed}/{summary.goal} (--limit {summary.goal} of {summary.total} rows)"
    return f"{summary.committed}/{summary.total}"


class CellProgress:
    """Progress of `ect run` / `resume` / `demo`: cells done/total, rate, ETA, cost, calls, stops.

    ``stops`` counts the trajectories by stop reason: goal_met, and every way a trajectory
    halted without it (no_progress, step_budget, needs_human, ...).
    """

    def __init__(self, enabled: bool, *, stream: IO[str] | None = None,
                 tty: bool | None = None, interval: float = INTERVAL_S) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._lines = _Lines(interval)
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._base = 0
        self._started = time.monotonic()

    def start(self, summary: RunSummary) -> None:
        if not self.enabled:
            return
        self._base = summary.committed
        self._started = time.monotonic()
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(
                TextColumn("cells"), BarColumn(bar_width=20), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}  {task.fields[eta]}  {task.fields[cost]}  "
                           "{task.fields[calls]}  {task.fields[stops]}"),
                console=Console(file=self.stream, force_terminal=True, highlight=False),
                transient=False)
            self._bar.start()
            f = cell_fields(summary, 0, 0.0)
            self._task = self._bar.add_task("cells", total=summary.goal,
                                            completed=summary.committed, rate=f["rate"],
                                            eta=f["eta"], cost=f["cost"], calls=f["calls"],
                                            stops=f["stops"])
        elif summary.committed:
            click.echo(f"cells {_count(summary)} already committed; "
                       f"{summary.goal - summary.committed} to run", file=self.stream)

    def update(self, record: object, summary: RunSummary) -> None:
        if not self.enabled:
            return
        fields = cell_fields(summary, summary.committed - self._base,
                             time.monotonic() - self._started)
        if self._bar is not None:
            self._show(summary, fields)
            return
        if self._lines.due(final=summary.committed >= summary.goal):
            click.echo(f"cells {_count(summary)}  " + "  ".join(fields.values()),
                       file=self.stream)

    def _show(self, summary: RunSummary, fields: dict[str, str]) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=summary.committed, rate=fields["rate"],
                             eta=fields["eta"], cost=fields["cost"], calls=fields["calls"],
                             stops=fields["stops"])

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class CountProgress:
    """Progress of a counted step (static decisions, replayed cells, sandbox probes)."""

    def __init__(self, label: str, unit: str, enabled: bool = True, *,
                 after: str | None = None, stream: IO[str] | None = None,
                 tty: bool | None = None, interval: float = INTERVAL_S) -> None:
        self.label, self.unit, self.enabled, self.after = label, unit, enabled, after
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._lines = _Lines(interval)
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._first: tuple[float, int] | None = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self._first is None:  # the rate is measured from the first item on, so set-up
            self._first = (now, done)  # work before it does not skew the ETA
        elapsed = now - self._first[0]
        rate = (done - self._first[1]) / elapsed if elapsed > 0 else 0.0
        if self.tty:
            if self._bar is None:
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeRemainingColumn,
                )

                self._bar = Progress(
                    TextColumn(self.label), BarColumn(bar_width=30), MofNCompleteColumn(),
                    TextColumn(self.unit), TimeRemainingColumn(),
                    console=Console(file=self.stream, force_terminal=True, highlight=False),
                    transient=False)
                self._bar.start()
                self._task = self._bar.add_task(self.label, total=total)
            if self._task is not None:
                self._bar.update(self._task, completed=done, total=total)
            if done >= total:
                self.stop()
        elif self._lines.due(final=done >= total):
            left = total - done
            eta = "" if left == 0 or rate <= 0 else f"  ETA {duration(left / rate)}"
            speed = f"  {rate:.1f}/s" if rate > 0 else ""
            click.echo(f"{self.label}: {done}/{total} {self.unit}{speed}{eta}", file=self.stream)
        if done >= total and self.after:
            click.echo(f"{self.label}: {self.after}", file=self.stream)
            self.after = None

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class PhaseNote:
    """Preflight's checks as they finish: a live status on a TTY, a line per interval elsewhere.

    Failed checks are always printed in full (by the caller); this shows that work goes on.
    """

    def __init__(self, label: str, enabled: bool = True, *, stream: IO[str] | None = None,
                 tty: bool | None = None, interval: float = INTERVAL_S) -> None:
        self.label, self.enabled = label, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._lines = _Lines(interval)
        self._status: Status | None = None
        self.count = 0

    def __call__(self, name: str) -> None:
        if not self.enabled:
            return
        self.count += 1
        plural = "" if self.count == 1 else "s"
        text = f"{self.label}: {self.count} check{plural} done (last: {name})"
        if self.tty:
            if self._status is None:
                from rich.console import Console

                console = Console(file=self.stream, force_terminal=True, highlight=False)
                self._status = console.status(text)
                self._status.start()
            self._status.update(text)
        elif self._lines.due(final=False):
            click.echo(text, file=self.stream)

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
