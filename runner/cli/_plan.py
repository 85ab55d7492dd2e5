"""`ect plan`: what a locked study will send, cost and take, before the first paid call."""

from __future__ import annotations

import json

import click

from runner.cli._common import EXIT_USAGE, die, map_errors
from runner.cli._params import (
    DEFAULT_SPEC,
    SANDBOX_BACKENDS,
    FiniteFloatRange,
    TableChoice,
    check_store_dir,
    provider_options,
    study_file,
)

__all__ = ["COMMANDS"]


def _pilot_cells() -> tuple[str, ...]:
    from runner.study import PILOT_CELLS

    return PILOT_CELLS


@click.command("plan")
@click.option("--study", "spec", default=None, show_default=DEFAULT_SPEC,
              type=click.Path(dir_okay=False),
              help="The frozen study spec (its schedule and lock sit beside it).")
@provider_options(model_help="Model name (default: the locked model).", default="gemini")
@click.option("--concurrency", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Cells in flight at once, as the run will use.")
@click.option("--limit", default=None, type=click.IntRange(1),
              help="Plan only the first N rows of the canonical schedule.")
@click.option("--requests-per-minute", "requests_per_minute", default=None,
              type=click.IntRange(0), metavar="N",
              help="The run's request throttle (default: the spec's [provider] value; 0: none).")
@click.option("--tokens-per-minute", "tokens_per_minute", default=None, type=click.IntRange(0),
              metavar="N", help="The run's token throttle (default: the spec's; 0: none).")
@click.option("--latency-s", "latency_s", default=2.0, show_default=True,
              type=FiniteFloatRange(min=0), help="The API's typical seconds a request (an "
                                                 "assumption the plan states).")
@click.option("--sandbox-backend", default=None, type=SANDBOX_BACKENDS,
              help="Override the platform's sandbox backend.")
@click.option("--pilot", default=None, type=click.IntRange(1), metavar="N",
              help="Run N cells live first (a real, paid run into --pilot-store; which cells: "
                   "--pilot-cells) and rescale the plan from their real requests, retries, "
                   "tokens and latency.")
@click.option("--pilot-store", default=None, type=click.Path(dir_okay=False),
              help="The new store the pilot writes.")
@click.option("--pilot-cells", "pilot_cells", default=None, show_default="spread",
              type=TableChoice(_pilot_cells),
              help="Which cells the pilot runs: spread over the strata (checkpoint, fault, "
                   "pipeline; over tasks and seeds within each), a sample whose real/simulated "
                   "ratio rescales every other cell; or the first N, a prefix of the run that "
                   "ect resume continues, whose real requests replace only their own.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON on stdout.")
@map_errors()
def plan_cmd(spec: str | None, provider_name: str, model: str | None, base_url: str | None,
             credential_file: str | None, credential_env: str | None, concurrency: int,
             limit: int | None, requests_per_minute: int | None, tokens_per_minute: int | None,
             latency_s: float, sandbox_backend: str | None, pilot: int | None,
             pilot_store: str | None, pilot_cells: str | None, as_json: bool) -> None:
    """Predict a run before paying: provider requests (by role and pipeline), tokens, dollars
    at the spec's price table and wall time under the throttle, min/expected/max.

    Runs the locked study once with the simulated provider (the real sandbox, a throwaway
    store), so every figure is SIMULATED; nothing is sent to any API and no credential is read,
    unless --pilot N runs N cells live (into --pilot-store) to rescale the plan.
    """
    from pathlib import Path

    from runner.cli._study import configure_logging
    from runner.study import PlanSettings, plan_study

    configure_logging(False)  # warnings only: the simulated pass's cell log is not the plan
    path = study_file(spec, DEFAULT_SPEC, "--study")
    choice = None
    if pilot is None:
        if pilot_store or pilot_cells or base_url or credential_file or credential_env:
            die("--pilot-store, --pilot-cells, --base-url and a credential are for --pilot N "
                "only (a plan without a pilot sends nothing)", EXIT_USAGE)
    else:
        if pilot_store is None:
            die("--pilot N needs --pilot-store PATH (the pilot is a real run)", EXIT_USAGE)
        if limit is not None and pilot > limit:
            die(f"--pilot {pilot} is more than the {limit} cells planned (--limit)", EXIT_USAGE)
        check_store_dir(pilot_store)
        from runner.providers import check_provider_settings
        from runner.study import ProviderChoice

        check_provider_settings(provider_name, model=model, base_url=base_url,
                                credential_given=bool(credential_file or credential_env))
        choice = ProviderChoice(provider_name, model, base_url, credential_file, credential_env)
    plan = plan_study(PlanSettings(Path(path), provider=provider_name, model=model,
                                   concurrency=concurrency, limit=limit,
                                   requests_per_minute=requests_per_minute,
                                   tokens_per_minute=tokens_per_minute, latency_s=latency_s,
                                   sandbox_backend=sandbox_backend, pilot=pilot,
                                   pilot_store=Path(pilot_store) if pilot_store else None,
                                   pilot_choice=choice,
                                   pilot_cells=pilot_cells or "spread"))
    if as_json:
        click.echo(json.dumps(plan.to_json(), indent=2))  # noqa: TID251 - display only
        return
    for line in plan.lines():
        click.echo(line)


COMMANDS: list[click.Command] = [plan_cmd]
