"""``ect evals``: stop-reason evals (did each run end the right way?)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from runner.cli._common import EXIT_NEGATIVE, map_errors

__all__ = ["COMMANDS", "evals"]

# The stop reasons (runner.control.StopReason), spelled here so `ect --help` does not import the
# controller; tests/control/test_capture.py checks they match.
_REASONS = ["goal_met", "step_budget", "token_budget", "tool_limit", "no_progress", "needs_human",
            "tool_error", "policy_block", "time_budget", "internal_error"]


@click.group("evals")
def evals() -> None:
    """Stop-reason evals: cases with an expected stop reason, run by scripted agents."""


@evals.command("run")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("-v", "--verbose", is_flag=True, help="Also list the cases that passed.")
@click.option("--agent", metavar="MODULE:FUNCTION",
              help="Run every case with your own agent's decide(state) instead of the cases' "
                   "scripted agents.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: passed, failed, ok and every case's result.")
@map_errors()
def run(path: Path | None, verbose: bool, agent: str | None, as_json: bool) -> None:
    """Run the eval cases in PATH (a case file or a directory of them; default: the bundled
    suite, which covers every stop reason).

    Each case asserts the stop reason and, when it says so, the steps taken, the tools run,
    the side effects not done and the output; a run that did not meet its goal must carry no
    output.

    Prints each failure, then "N passed, M failed".

    Exits 1 when any case fails, 2 when a case file is malformed or the agent cannot be
    imported.
    """
    from runner.control import import_agent, run_evals

    decide = import_agent(agent) if agent is not None else None
    report = run_evals(path, decide=decide)
    if as_json:
        from runner.canonical import canonical_bytes

        click.echo(canonical_bytes({"passed": report.passed, "failed": report.failed,
                                    "ok": report.ok,
                                    "cases": [r.to_json() for r in report.results]}).decode())
        if not report.ok:
            sys.exit(EXIT_NEGATIVE)
        return
    for result in report.results:
        if not result.passed:
            click.echo(result.failure_line())
        elif verbose:
            click.echo(f"ok   {result.case_id}: {result.observed} ({result.stop_kind})")
    click.echo(report.summary())
    if not report.ok:
        sys.exit(EXIT_NEGATIVE)


@evals.command("capture")
@click.argument("record", type=click.Path(path_type=Path, dir_okay=False))
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the case here (default: standard output).")
@click.option("--id", "case_id", help="The case id (default: captured_<run id>).")
@click.option("--expect", type=click.Choice(_REASONS),
              help="The stop the run should have ended with (default: the one it ended with).")
@map_errors()
def capture(record: Path, output: Path | None, case_id: str | None, expect: str | None) -> None:
    """Turn a run record (RunResult.to_json() saved as JSON) into a replayable eval case.

    The case replays the same controls, the model's actions turn by turn and the tool results
    in order. Exits 2 when RECORD is not a run record.
    """
    from runner.canonical import load_strict_file
    from runner.control import EvalCaseError, capture_case

    try:
        obj = load_strict_file(record)
    except OSError as e:
        raise EvalCaseError(f"{record}: cannot read: {e.strerror}") from None
    case = capture_case(obj, case_id=case_id, expect=expect, source=str(record))
    text = json.dumps(case, indent=2, ensure_ascii=False) + "\n"  # noqa: TID251 - display only
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, "utf-8")
        click.echo(f"wrote {output}")


COMMANDS: list[click.Command] = [evals]
