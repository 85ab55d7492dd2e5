"""`ect demo`: the product's main job, offline, on the embedded simulated provider.

preflight -> the full 576-trajectory closed-loop study (every tool call sandboxed, every cell
committed to the hash chain) -> store verification -> signed manifest (verified offline) ->
closed-loop report -> static study. Prints where every output is.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import click

from runner.cli._common import EXIT_USAGE, die, map_errors
from runner.cli._params import DEFAULT_SPEC, DEFAULT_STATIC_SPEC, check_out_dir, study_file
from runner.cli._study import _configure_logging, _run, throttle_options

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
    from runner.analysis import report_from_store, static_study
    from runner.cli._progress import CountProgress
    from runner.store import verify_store
    from runner.study import (
        ProviderChoice,
        RunSettings,
        SpecInvalid,
        StaticSpec,
        export_study,
        load_spec,
        study_paths,
        verify_export,
    )

    spec = study_file(spec, DEFAULT_SPEC, "--study")
    static_spec = study_file(static_spec, DEFAULT_STATIC_SPEC, "--static-spec")
    _configure_logging(False)
    # Both specs are checked before anything is created: a malformed one is a usage error (2)
    # and leaves no output directory behind.
    load_spec(spec)
    try:
        StaticSpec.load(static_spec)
    except SpecInvalid as e:
        die(str(e), EXIT_USAGE)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = Path(out) if out else Path("out") / f"demo-{stamp}"
    check_out_dir(out_dir, fresh=True)  # before the preflight: a used folder is refused at once
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    store = out_dir / "v2.db"
    manifest = out_dir / "manifest.json"
    settings = RunSettings(Path(spec), store, ProviderChoice("simulated"), concurrency, limit,
                           requests_per_minute=requests_per_minute,
                           tokens_per_minute=tokens_per_minute)
    try:
        summary = _run(settings, resume=False, as_json=False, quiet=quiet)
    except BaseException:
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()  # preflight refused: nothing was written, leave nothing behind
        raise

    def step(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    step("verifying the store in full (chain, Merkle root, signatures, every body)")
    report = verify_store(store, full=True)
    click.echo(f"store verified: {report.records} records, intact (full verification)", err=True)
    outputs = [("store", store), ("public key", store.with_name(store.name + ".key.pub"))]
    gates: dict[str, str] = {}
    if summary.committed == summary.total:
        step("signing the manifest")
        export_study(store, manifest, Path(spec))
        verify_export(manifest, store)
        click.echo("manifest signed and verified offline", err=True)
        outputs.append(("manifest", manifest))
        step("closed-loop report (Table 4, H2-H4, 10000 bootstrap replicates)")
        closed = report_from_store(store, study_paths(spec).schedule, out_dir / "report")
        outputs.append(("closed-loop report", out_dir / "report" / "report.html"))
        gates = {h: closed[h]["outcome"] for h in ("h2", "h3", "h4")}
        verdicts = "; ".join(f"{h.upper()}: {closed[h]['outcome']}" for h in ("h2", "h3", "h4"))
        click.echo(f"closed loop: {verdicts}", err=True)
        progress = CountProgress("static study", "decisions", enabled=not quiet,
                                 after="decisions done; analysing (tables, bootstrap, H1)")
        try:
            static = static_study(static_spec, out_dir / "static", on_progress=progress)
        finally:
            progress.stop()
        outputs.append(("static study", out_dir / "static" / "report.html"))
        click.echo(f"static study: H1: {static['h1']['outcome']}", err=True)
        gates["h1"] = static["h1"]["outcome"]
    else:
        click.echo(f"smoke run ({summary.committed}/{summary.total} cells): no manifest or "
                   "report (they need every cell)", err=True)
    if as_json:
        from runner.canonical import canonical_bytes

        click.echo(canonical_bytes({
            "committed": summary.committed, "total": summary.total, "simulated": True,
            "gates": gates, "outputs": {name: str(path) for name, path in outputs},
        }).decode())
        return
    click.echo("simulated provider: every figure below comes from the deterministic simulation, "
               "whose parameters this project chose (each report lists them; `ect sweep` "
               "shows how the gates move with them)")
    for name, path in outputs:
        click.echo(f"{name:>20}: {path}")
    click.echo(f"look inside the run: ect view --store {shlex.quote(str(store))}")


COMMANDS: list[click.Command] = [demo_cmd]
