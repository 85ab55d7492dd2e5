"""``ect evals``: stop-reason evals (did each run end the right way?)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from runner.cli._common import EXIT_NEGATIVE, EXIT_USAGE, map_errors
from runner.errors import FormatError

__all__ = ["COMMANDS", "evals"]


@click.group("evals")
def evals() -> None:
    """Stop-reason evals: cases with an expected stop reason, run by scripted agents."""


@evals.command("run")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("-v", "--verbose", is_flag=True, help="Also list the cases that passed.")
@map_errors({FormatError: EXIT_USAGE})
def run(path: Path | None, verbose: bool) -> None:
    """Run the eval cases in PATH (a case file or a directory of them; default: the bundled
    suite, which covers every stop reason).

    Prints each failure with the stop reason observed and expected, then a last line
    "N passed, M failed". Exits 1 when any case fails, 2 when a case file is malformed.
    """
    from runner.control import run_evals

    report = run_evals(path)
    for result in report.results:
        if not result.passed:
            click.echo(result.failure_line())
        elif verbose:
            click.echo(f"ok   {result.case_id}: {result.observed} ({result.stop_kind})")
    click.echo(report.summary())
    if not report.ok:
        sys.exit(EXIT_NEGATIVE)


COMMANDS: list[click.Command] = [evals]
