"""``ect static`` (the static study) and ``ect report`` (the closed-loop report from a store)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from runner.cli._common import EXIT_USAGE, die, map_errors
from runner.cli._params import (
    DEFAULT_SCHEDULE,
    DEFAULT_STATIC_SPEC,
    check_out_dir,
    provider_options,
    study_file,
)

if TYPE_CHECKING:
    from runner.analysis import ClosedLoopResults, StaticResults

# runner.analysis (numpy, scipy) and runner.providers (httpx) are imported when a command runs.
# The report's default bootstrap seed, shown in --help without importing runner.analysis;
# tests/cli/test_startup.py checks it equals runner.analysis.DEFAULT_REPORT_SEED.
REPORT_SEED = 2705

COMMANDS: list[click.Command] = []


@click.command("static")
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False),
    default=None,
    show_default=DEFAULT_STATIC_SPEC,
    help="Static-study spec (seed, replicates, generation config, simulated critic, prices).",
)
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False), required=True, help="Output directory."
)
@provider_options(model_help="Model name (default from the spec, per provider).", default=None,
                  default_shown="the spec's provider.default")
@click.option(
    "--seed", type=click.IntRange(min=0), default=None, help="Bootstrap seed [default: the spec's]."
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Decisions in flight at once (for a remote provider; output order is unchanged).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.option("--json", "as_json", is_flag=True,
              help="Print results.json on stdout instead of the summary.")
@map_errors()
def static_cmd(
    spec_path: str | None,
    out_dir: str,
    provider_name: str | None,
    model: str | None,
    base_url: str | None,
    credential_file: str | None,
    credential_env: str | None,
    seed: int | None,
    concurrency: int,
    quiet: bool,
    as_json: bool,
) -> None:
    """Run the static study: 7 policies on all 432 snapshots, Table 2, Table 3 and H1.

    Writes results.json, tables.md, report.html (byte-identical for equal spec, provider and
    seed), decisions.jsonl, attempts.jsonl and attempts.journal.jsonl (with wall-clock times)
    into --out. A model call from the critic core aborts the run (exit 5).
    """
    from runner.analysis import AllModelCallsFailed, static_study
    from runner.cli._progress import CountProgress

    spec_path = study_file(spec_path, DEFAULT_STATIC_SPEC, "--spec")
    check_out_dir(out_dir, fresh=False)  # an unwritable --out is refused before the computing
    progress = CountProgress("static", "decisions", enabled=not quiet,
                             after="decisions done; analysing (tables, bootstrap, H1)")
    failed: AllModelCallsFailed | None = None
    try:
        res = static_study(
            spec_path,
            out_dir,
            provider=provider_name,
            seed=seed,
            model=model,
            base_url=base_url,
            credential_file=credential_file,
            credential_env=credential_env,
            concurrency=concurrency,
            on_progress=progress,
        )
    except AllModelCallsFailed as e:  # the tables are still written and shown, then exit 5
        failed, res = e, e.results
    finally:
        progress.stop()
    if as_json:
        click.echo((Path(out_dir) / "results.json").read_text("utf-8").rstrip("\n"))
    else:
        _print_static(res, out_dir)
    if failed is not None:
        raise failed


def _print_static(res: StaticResults, out_dir: str) -> None:
    click.echo(res.provider_line)
    for name, v in res.table2.items():
        click.echo(
            f"  {name:<17} U {v.unsafe}/{v.unsafe_den}  C {v.clean_noncomplete}/"
            f"{v.clean_den}  S {v.stuck}/{v.stuck_den}  macro-F1 {v.macro_f1:.3f}"
        )
    h = res.h1
    click.echo(
        f"H1 {h.outcome}: b_ect={h.b_ect} b_critic={h.b_critic} p={h.mcnemar_p:.6g} "
        f"diff={h.diff_pp:+.2f} pp CI [{h.ci_pp[0]:+.2f}, {h.ci_pp[1]:+.2f}]"
    )
    _print_simulator(res)
    click.echo(f"wrote {Path(out_dir) / 'report.html'}, results.json, tables.md, decisions.jsonl")
    calls, failed = res.model_calls()
    if failed:
        click.echo(f"ect: warning: {failed} of {calls} model calls failed (each counts as "
                   "continue, as the protocol says); see attempts.jsonl", err=True)


def _print_simulator(res: StaticResults | ClosedLoopResults) -> None:
    """Name the simulator's parameters (chosen by the project) and where they were read."""
    sim = res.simulator
    if sim is None:
        return
    params = ", ".join(f"{k}={v:g}" if isinstance(v, int | float) else f"{k}={v}"
                       for k, v in sim.parameters.items()) or "none recorded"
    click.echo(f"simulator parameters (chosen by this project, not measured; from "
               f"{sim.source}): {params}")


@click.command("report")
@click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False),
    required=True,
    help="Run store (SQLite).",
)
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False), required=True, help="Output directory."
)
@click.option(
    "--schedule",
    "schedule_path",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    show_default="the schedule of the spec the store's header records",
    help="The canonical schedule the store must cover exactly once.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=REPORT_SEED,
    show_default=True,
    help="Bootstrap seed.",
)
@click.option(
    "--replicates",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Bootstrap replicates.",
)
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The output of `ect plan --json` for this run: shown beside the actual "
                   "requests, tokens and cost.")
@click.option("--json", "as_json", is_flag=True,
              help="Print results.json on stdout instead of the summary.")
@map_errors()
def report_cmd(
    store_path: str, out_dir: str, schedule_path: str | None, seed: int, replicates: int,
    plan_path: str | None, as_json: bool,
) -> None:
    """Regenerate Table 4 and the H2-H4 gates from a verified run store.

    Refuses (exit 3) unless every schedule row is present exactly once and the store verifies.
    Writes results.json, tables.md and report.html into --out.
    """
    from runner.analysis import report_from_store

    # default: the schedule beside the spec the store's header records (from any directory)
    if schedule_path is not None:
        schedule_path = study_file(schedule_path, DEFAULT_SCHEDULE, "--schedule")
    check_out_dir(out_dir, fresh=False)
    # a junk --schedule file is a usage error (ScheduleUnreadable's category)
    plan = None
    if plan_path is not None:
        from runner.canonical import loads_strict
        from runner.errors import FormatError

        try:
            doc = loads_strict(Path(plan_path).read_bytes())
        except (FormatError, OSError) as e:
            die(f"--plan {plan_path}: not the JSON of ect plan --json ({e})", EXIT_USAGE)
        if not isinstance(doc, dict):
            die(f"--plan {plan_path}: not the JSON of ect plan --json", EXIT_USAGE)
        plan = doc
    res = report_from_store(store_path, schedule_path, out_dir, seed=seed,
                            replicates=replicates, plan=plan)
    if as_json:
        click.echo((Path(out_dir) / "results.json").read_text("utf-8").rstrip("\n"))
        return
    click.echo(res.provider_line)
    _print_simulator(res)
    for name, _, outcome in res.gates():
        click.echo(f"{name}: {outcome}")
    click.echo(f"wrote {Path(out_dir) / 'report.html'}, results.json, tables.md")


COMMANDS.extend([static_cmd, report_cmd])
