"""``ect sweep``: the closed-loop study across a grid of simulator parameters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from runner.cli._common import map_errors
from runner.cli._params import DEFAULT_SPEC, check_out_dir, study_file
from runner.cli._study import throttle_options

if TYPE_CHECKING:
    from runner.analysis import SweepRow

__all__ = ["COMMANDS"]

# runner.analysis (numpy, scipy) and runner.study are imported when the command runs.


_EPILOG = """\b
Example (two points; each runs the whole study, about half a minute on an idle machine):
  ect sweep --param simulated.planner.p_premature_finish=0.25,0.75 --out out/sweep
\b
Two parameters give their cartesian product:
  ect sweep --param simulated.planner.p_premature_finish=0.25,0.75 \\
            --param simulated.critic.p_reject_supported=0,0.35 --out out/sweep
\b
List every parameter name with the spec's value: ect sweep --list
Writes sweep.md, sweep.json and sweep.svg into --out, and each point's spec, schedule,
lock, store and report under --out/points/pNNN/.
Exit codes: 0 written; 2 bad --param, --study or --jobs; 3 a point's preflight refused;
4 halted (STOP file, Ctrl-C); 5 a point failed at run time.
"""


@click.command("sweep", epilog=_EPILOG)
@click.option("--study", "spec", default=None, show_default=DEFAULT_SPEC,
              type=click.Path(dir_okay=False), help="The study spec every point starts from.")
@click.option("--param", "params", multiple=True, metavar="NAME=v1,v2,...",
              help="A simulator parameter (dotted spec name) and the values to try; repeat "
              "for more parameters (the grid is their cartesian product).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory (required unless --list).")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Grid points run at once, one process each [default: the CPU count].")
@click.option("--seed", type=click.IntRange(min=0), default=2705, show_default=True,
              help="Bootstrap seed of every point's report.")
@click.option("--replicates", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Bootstrap replicates of every point's report.")
@click.option("--list", "list_params", is_flag=True,
              help="Print every simulator parameter name with the spec's value, and exit.")
@click.option("--json", "as_json", is_flag=True,
              help="Print sweep.json on stdout (with --list: the parameters as one JSON object).")
@throttle_options()[0]
@throttle_options()[1]
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@map_errors()
def sweep_cmd(spec: str | None, params: tuple[str, ...], out_dir: str | None, jobs: int | None,
              seed: int, replicates: int, list_params: bool, as_json: bool,
              requests_per_minute: int | None, tokens_per_minute: int | None,
              quiet: bool) -> None:
    """Rerun the closed-loop study at every point of a grid of simulator parameters.

    With the simulated provider a gate's outcome follows from the simulator's parameters,
    which this project chose. The sweep shows how the H2-H4 estimates and gate outcomes move
    with them: a table (sweep.md, sweep.json) and a plot (sweep.svg) across the grid.
    """
    from runner.analysis import SweepInvalid, parse_grid, sweep, sweep_table
    from runner.study import load_spec, simulator_parameters

    spec = study_file(spec, DEFAULT_SPEC, "--study")
    if list_params:
        params_now = simulator_parameters(load_spec(spec))
        if as_json:  # --json promises JSON on stdout, with --list too
            click.echo(json.dumps(params_now, indent=2, sort_keys=True))  # noqa: TID251
            return
        for name, value in params_now.items():
            click.echo(f"{name} = {value:g}")
        return
    if out_dir is None:
        raise SweepInvalid("--out DIR is required (or --list)")
    grid = parse_grid(params)  # a bad --param is refused before anything is written
    check_out_dir(out_dir, fresh=True)
    total = 1
    for values in grid.values():
        total *= len(values)
    if not quiet:
        click.echo(f"sweep: {total} grid points, each a full closed-loop study of {spec}",
                   err=True)

    import time

    from runner.cli._progress import CountProgress, duration

    started = time.monotonic()
    # Overall: every point's committed cells over the grid's, with rate and ETA.
    cells = CountProgress("sweep", "cells (all points)", enabled=not quiet)

    def on_point(done: int, of: int, row: SweepRow) -> None:
        if quiet:
            return
        gates = "; ".join(f"{name} {gate.outcome}" for name, gate in row.gates())
        elapsed = time.monotonic() - started
        per = elapsed / done if done else 0.0
        left = f", ETA {duration(per * (of - done))}" if done < of else ""
        click.echo(f"sweep: point {done}/{of} done ({row.label}): {gates} "
                   f"[{duration(elapsed)} elapsed, {duration(per)}/point{left}]", err=True)

    try:
        result = sweep(spec, params, out_dir, jobs=jobs, seed=seed, replicates=replicates,
                       on_point=on_point, requests_per_minute=requests_per_minute,
                       tokens_per_minute=tokens_per_minute, on_cells=cells)
    finally:
        cells.stop()
    out = Path(out_dir)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))  # noqa: TID251
        return
    click.echo(result.note)
    for line in sweep_table(result):
        click.echo(line)
    click.echo(f"wrote {out / 'sweep.md'}, sweep.json, sweep.svg and points/")


COMMANDS: list[click.Command] = [sweep_cmd]
