"""`ect demo`: the product's main job, offline, on the embedded simulated provider.

preflight -> the full 576-trajectory closed-loop study (every tool call sandboxed, every cell
committed to the hash chain) -> store verification -> signed manifest (verified offline) ->
closed-loop report -> static study. Prints where every output is.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from runner.cli._common import map_errors
from runner.cli._params import DEFAULT_SPEC, DEFAULT_STATIC_SPEC, check_out_dir, study_file
from runner.cli._study import RunPrinter, configure_logging, throttle_options

__all__ = ["COMMANDS"]


@click.command("demo")
@click.option("--out", "out", default=None, type=click.Path(file_okay=False),
              help="Output directory [default: out/demo-<UTC time>].")
@click.option("--study", "spec", default=None, show_default=DEFAULT_SPEC,
              type=click.Path(dir_okay=False, exists=True), help="The frozen study spec.")
@click.option("--static-spec", default=None, show_default=DEFAULT_STATIC_SPEC,
              type=click.Path(dir_okay=False, exists=True), help="The static study spec.")
@click.option("--concurrency", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Cells in flight at once.")
@click.option("--limit", default=None, type=click.IntRange(1),
              help="Only the first N rows (a smoke run: export and report then refuse).")
@throttle_options()[0]
@throttle_options()[1]
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object on stdout: cells, simulated, gates and every output's path.")
@map_errors()
def demo_cmd(out: str | None, spec: str | None, static_spec: str | None, concurrency: int, limit: int | None,
             requests_per_minute: int | None, tokens_per_minute: int | None,
             quiet: bool, as_json: bool) -> None:
    """Run the whole offline study end to end and print where each output is.

    Everything runs on the deterministic simulated provider: no credential, no network.
    """
    from runner.analysis import DemoHooks, check_demo_specs, default_out_dir, run_demo
    from runner.cli._progress import CountProgress

    spec = study_file(spec, DEFAULT_SPEC, "--study")
    static_spec = study_file(static_spec, DEFAULT_STATIC_SPEC, "--static-spec")
    configure_logging(False)
    check_demo_specs(Path(spec), Path(static_spec))  # a malformed spec: 2, nothing created
    out_dir = Path(out) if out else default_out_dir()
    check_out_dir(out_dir, fresh=True)  # before the preflight: a used folder is refused at once
    progress = CountProgress("static study", "decisions", enabled=not quiet,
                             after="decisions done; analysing (tables, bootstrap, H1)")

    def on_step(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    def on_done(text: str) -> None:
        progress.stop()
        click.echo(text, err=True)

    from runner.study import Halted

    printer = RunPrinter(as_json=False, quiet=quiet)
    try:
        result = run_demo(out_dir, Path(spec), Path(static_spec), concurrency=concurrency,
                          limit=limit, requests_per_minute=requests_per_minute,
                          tokens_per_minute=tokens_per_minute,
                          hooks=DemoHooks(run=printer.hooks(), on_step=on_step, on_done=on_done,
                                          on_static_progress=progress))
    except Halted as e:
        printer.halted(e.summary)
        raise
    finally:
        printer.stop()
        progress.stop()
    if as_json:
        from runner.canonical import canonical_bytes

        click.echo(canonical_bytes({
            "committed": result.committed, "total": result.total, "simulated": True,
            "gates": result.gates, "outputs": {name: str(path) for name, path in result.outputs},
        }).decode())
        return
    click.echo("simulated provider: every figure below comes from the deterministic simulation, "
               "whose parameters this project chose (each report lists them; `ect sweep` "
               "shows how the gates move with them)")
    for name, path in result.outputs:
        click.echo(f"{name:>20}: {path}")
    click.echo(f"look inside the run: ect view --store {shlex.quote(str(result.store))}")


COMMANDS: list[click.Command] = [demo_cmd]
