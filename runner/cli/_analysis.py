"""``ect static`` (the static study) and ``ect report`` (the closed-loop report from a store)."""

from __future__ import annotations

import click

from runner.analysis import (
    DEFAULT_REPORT_SEED,
    FastPathInvariantBroken,
    InventoryIncomplete,
    ScheduleDisagrees,
    SpecInvalid,
    report_from_store,
    static_study,
)

# not (yet) in runner.analysis's public surface, which tests/analysis pins
from runner.cli._common import EXIT_REFUSED, EXIT_RUNTIME, EXIT_USAGE, die, map_errors
from runner.errors import StoreError
from runner.providers import CredentialError, EgressRefused
from runner.store import StoreUsageError

COMMANDS: list[click.Command] = []

_PROVIDERS = click.Choice(["simulated", "gemini", "openai"])


@click.command("static")
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False),
    default="schedules/static.toml",
    show_default=True,
    help="Static-study spec (seed, replicates, generation config, simulated critic, prices).",
)
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False), required=True, help="Output directory."
)
@click.option(
    "--provider",
    type=_PROVIDERS,
    default=None,
    help="Model provider [default: the spec's, simulated].",
)
@click.option("--model", default=None, help="Model name (default from the spec, per provider).")
@click.option(
    "--base-url",
    default=None,
    help="Provider base URL (OpenAI-compatible server, or a Gemini endpoint).",
)
@click.option(
    "--credential-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="File holding the API key (mode 0600).",
)
@click.option(
    "--credential-env",
    default=None,
    metavar="NAME",
    help="Environment variable holding the API key.",
)
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
@map_errors(
    {
        SpecInvalid: EXIT_USAGE,
        CredentialError: EXIT_USAGE,
        EgressRefused: EXIT_USAGE,  # an unusable --base-url (refused when the adapter is built)
        FastPathInvariantBroken: EXIT_RUNTIME,
    }
)
def static_cmd(
    spec_path: str,
    out_dir: str,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    credential_file: str | None,
    credential_env: str | None,
    seed: int | None,
    concurrency: int,
) -> None:
    """Run the static study: 7 policies on all 432 snapshots, Table 2, Table 3 and H1.

    Writes results.json, tables.md, report.html (byte-identical for equal spec, provider and
    seed), decisions.jsonl, attempts.jsonl and attempts.journal.jsonl (with wall-clock times)
    into --out. A model call from the critic core aborts the run (exit 5).
    """
    res = static_study(
        spec_path,
        out_dir,
        provider=provider,
        seed=seed,
        model=model,
        base_url=base_url,
        credential_file=credential_file,
        credential_env=credential_env,
        concurrency=concurrency,
    )
    click.echo(res["provider_line"])
    for name, v in res["table2"].items():
        click.echo(
            f"  {name:<17} U {v['unsafe']}/{v['unsafe_den']}  C {v['clean_noncomplete']}/"
            f"{v['clean_den']}  S {v['stuck']}/{v['stuck_den']}  macro-F1 {v['macro_f1']:.3f}"
        )
    h = res["h1"]
    verdict = "PASSED" if h["passed"] else "FAILED"
    click.echo(
        f"H1 {verdict}: b_ect={h['b_ect']} b_critic={h['b_critic']} p={h['mcnemar_p']:.6g} "
        f"diff={h['diff_pp']:+.2f} pp CI [{h['ci_pp'][0]:+.2f}, {h['ci_pp'][1]:+.2f}]"
    )
    click.echo(f"wrote {out_dir}/report.html, results.json, tables.md, decisions.jsonl")
    calls = sum(v.get("model_calls", 0) for v in res["table2"].values())
    failed = sum(v.get("provider_failures", 0) for v in res["table2"].values())
    if failed:
        click.echo(f"ect: warning: {failed} of {calls} model calls failed (each counts as "
                   "continue, as the protocol says); see attempts.jsonl", err=True)
    if calls and failed == calls:
        die("every model call failed: these tables are not model measurements "
            "(check the provider, --base-url and the credential)", EXIT_RUNTIME)


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
    default="schedules/v2.schedule.jsonl",
    show_default=True,
    help="The canonical schedule the store must cover exactly once.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=DEFAULT_REPORT_SEED,
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
@map_errors(
    {
        InventoryIncomplete: EXIT_REFUSED,
        ScheduleDisagrees: EXIT_REFUSED,
        StoreUsageError: EXIT_USAGE,  # an unreadable --store file (not damage)
        StoreError: EXIT_REFUSED,
    }
)
def report_cmd(
    store_path: str, out_dir: str, schedule_path: str, seed: int, replicates: int
) -> None:
    """Regenerate Table 4 and the H2-H4 gates from a verified run store.

    Refuses (exit 3) unless every schedule row is present exactly once and the store verifies.
    Writes results.json, tables.md and report.html into --out.
    """
    from runner.analysis._errors import ScheduleUnreadable  # not in the pinned public surface

    try:
        res = report_from_store(store_path, schedule_path, out_dir, seed=seed,
                                replicates=replicates)
    except ScheduleUnreadable as e:  # a junk --schedule file is a usage error
        die(str(e), EXIT_USAGE)
    click.echo(res["provider_line"])
    for h in ("h2", "h3", "h4"):
        click.echo(f"{h.upper()} {'PASSED' if res[h]['passed'] else 'FAILED'}")
    click.echo(f"wrote {out_dir}/report.html, results.json, tables.md")


COMMANDS.extend([static_cmd, report_cmd])
