"""`ect schedule|preflight|run|resume|export|replay|demo`: the closed-loop study commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from runner.cli._common import (
    EXIT_NEGATIVE,
    EXIT_USAGE,
    Decorator,
    F,
    die,
    map_errors,
)
from runner.cli._params import (
    DEFAULT_SPEC,
    EXECUTOR_CHOICE,
    SANDBOX_BACKENDS,
    FiniteFloatRange,
    check_store_dir,
    provider_options,
    study_file,
)

if TYPE_CHECKING:
    from runner.study import (
        PreflightCheck,
        PreflightReport,
        ProviderChoice,
        RunHooks,
        RunSettings,
        RunSummary,
    )

__all__ = ["COMMANDS"]

# The library is imported inside each command, never at module level: `import runner.cli` (and
# so `ect --help`) must not pay for numpy, scipy, httpx or google-genai (tests/cli/test_startup.py).


def configure_logging(log_json: bool) -> None:
    import logging

    import structlog

    processors: list[structlog.typing.Processor] = [structlog.processors.add_log_level,
                             structlog.processors.TimeStamper(fmt="iso", utc=True)]
    processors.append(structlog.processors.JSONRenderer() if log_json
                      else structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.INFO if log_json else logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


_provider_options = provider_options(model_help="Model name (must equal the locked model).")


def _choice(provider_name: str, model: str | None, base_url: str | None,
            credential_file: str | None, credential_env: str | None) -> ProviderChoice:
    from runner.providers import check_provider_settings
    from runner.study import ProviderChoice

    check_provider_settings(provider_name, model=model, base_url=base_url,
                            credential_given=bool(credential_file or credential_env))
    return ProviderChoice(provider_name, model, base_url, credential_file, credential_env)


def _study_option(fn: F) -> F:
    return click.option("--study", "spec", default=None, show_default=DEFAULT_SPEC,
                        type=click.Path(dir_okay=False),
                        help="The frozen study spec (its schedule and lock sit beside it).")(fn)


# --- schedule -----------------------------------------------------------------------------


@click.group("schedule")
def schedule_group() -> None:
    """Build the canonical schedule and the lock from a study spec."""


@schedule_group.command("build")
@_study_option
@click.option("--replace", is_flag=True, help="Rewrite a schedule file whose bytes differ.")
@map_errors()
def schedule_build(spec: str | None, replace: bool) -> None:
    """Write SPEC's canonical rows to <spec>.schedule.jsonl (task -> checkpoint -> seed -> policy)."""
    from runner.study import load_spec, study_paths, write_schedule

    spec = study_file(spec, DEFAULT_SPEC, "--study")
    loaded = load_spec(spec)
    paths = study_paths(spec)
    rows = write_schedule(loaded, paths, replace=replace)
    click.echo(f"{paths.schedule}: {len(rows)} rows")


@schedule_group.command("lock")
@_study_option
@click.option("--replace", is_flag=True,
              help="Rewrite an existing lock that differs (the old lock's runs stop resuming).")
@map_errors()
def schedule_lock(spec: str | None, replace: bool) -> None:
    """Write <spec>.lock.json pinning spec, schedule, tasks, prompts, config, pins, source.

    A lock is never rewritten silently: when one exists and differs, this refuses and names
    the first difference unless --replace is given.
    """
    from runner.study import load_spec, lock_digest, study_paths, write_lock

    spec = study_file(spec, DEFAULT_SPEC, "--study")

    loaded = load_spec(spec)
    paths = study_paths(spec)
    lock = write_lock(loaded, paths, replace=replace)
    click.echo(f"{paths.lock}: {lock_digest(lock)}")


# --- preflight ----------------------------------------------------------------------------


def _print_check(check: PreflightCheck) -> None:
    mark = "ok  " if check.ok else "FAIL"
    click.echo(f"  [{mark}] {check.name}: {check.detail}", err=True)


@click.command("preflight")
@_study_option
@click.option("--store", "store", required=True, type=click.Path(dir_okay=False),
              help="The run store the study will write (absent, or a verified prefix).")
@_provider_options
@click.option("--sandbox-backend", default=None, type=SANDBOX_BACKENDS,
              help="Override the platform's sandbox backend.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True,
              help="Print only the verdict line (and, on failure, the failed checks).")
@map_errors()
def preflight_cmd(spec: str | None, store: str, provider_name: str, model: str | None,
                  base_url: str | None, credential_file: str | None,
                  credential_env: str | None, sandbox_backend: str | None, as_json: bool,
                  quiet: bool) -> None:
    """Check everything a run needs before any provider use; exit 3 on any failure.

    Lock vs files, schedule vs lock, the store (absent or a verified prefix), an explicit
    credential (none for simulated), the frozen generation config, the sandbox backend and
    every probe in preflight/ (network and persistent-write denial among them).
    """
    from runner.study import PreflightFailed, load_spec, run_preflight

    spec = study_file(spec, DEFAULT_SPEC, "--study")
    check_store_dir(store)
    load_spec(spec)  # a malformed spec is a usage error (2), not a failed check
    report = run_preflight(spec, store, _choice(provider_name, model, base_url, credential_file,
                                                credential_env),
                           sandbox_backend=sandbox_backend,
                           on_check=None if as_json else _quiet_check if quiet else _print_check)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))  # noqa: TID251 - display only
    if not report.passed:
        raise PreflightFailed(report)
    if not as_json:
        click.echo(f"preflight passed ({len(report.checks)} checks); report {report.digest}")


# --- run / resume -------------------------------------------------------------------------


def _quiet_check(check: PreflightCheck) -> None:
    if not check.ok:
        _print_check(check)


class RunPrinter:
    """What ``ect run``, ``ect resume`` and ``ect demo`` print while
    :func:`runner.study.run_study` works: the preflight's checks, cell progress, and the
    summary (text on stderr, or the summary as JSON on stdout)."""

    def __init__(self, *, as_json: bool, quiet: bool) -> None:
        from runner.cli._progress import CellProgress, PhaseNote

        self.as_json, self.quiet = as_json, quiet
        self.nothing_to_do = False
        self._note = PhaseNote("preflight", enabled=not quiet)
        self._progress = CellProgress(enabled=not quiet)

    def hooks(self) -> RunHooks:
        from runner.study import RunHooks

        return RunHooks(on_preflight=self._on_preflight,
                        on_check=None if self.quiet else self._on_check,
                        on_preflight_passed=self._on_preflight_passed,
                        on_nothing_to_do=self._on_nothing_to_do,
                        on_start=self._progress.start, on_cell=self._progress.update,
                        on_finished=self.finished)

    def stop(self) -> None:
        self._note.stop()
        self._progress.stop()

    def _on_preflight(self, settings: RunSettings) -> None:
        if not self.quiet:
            click.echo(f"preflight: {settings.spec_path} -> {settings.store_path} (lock, store, "
                       "sandbox and its denial probes)", err=True)

    def _on_check(self, check: PreflightCheck) -> None:
        self._note(check.name)
        if not check.ok:
            _print_check(check)

    def _on_preflight_passed(self, report: PreflightReport) -> None:
        self._note.stop()
        if not self.quiet:
            click.echo(f"preflight passed ({len(report.checks)} checks)", err=True)

    def _on_nothing_to_do(self, summary: RunSummary) -> None:
        self.nothing_to_do = True
        if not self.as_json and not self.quiet:
            click.echo(f"nothing to do: all {summary.total} cells are already committed to "
                       f"{summary.store} (next: ect export, ect replay, ect report)", err=True)

    def halted(self, summary: RunSummary) -> None:
        self.stop()
        if self.as_json:
            click.echo(json.dumps(summary.to_json(), indent=2))  # noqa: TID251 - display only
        elif not self.quiet:
            if (line := _failure_line(summary)) is not None:
                click.echo(line, err=True)
            if (line := _accounting_line(summary)) is not None:
                click.echo(line, err=True)

    def finished(self, summary: RunSummary) -> None:
        self.stop()
        if self.as_json:
            click.echo(json.dumps(summary.to_json(), indent=2))  # noqa: TID251 - display only
        elif not self.quiet and not self.nothing_to_do:
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(summary.stop_reasons.items()))
            click.echo(f"{summary.committed_now} cells run, {summary.committed}/{summary.total} "
                       f"committed to {summary.store} in {summary.wall_s:.1f}s ({reasons})",
                       err=True)
            if (line := _failure_line(summary)) is not None:
                click.echo(line, err=True)
            if (line := _accounting_line(summary)) is not None:
                click.echo(line, err=True)


def _accounting_line(summary: RunSummary) -> str | None:
    """The attempts, retries, failures, halts and billed cost of the whole store, for a paid
    run or any run with a retry, a failed attempt or a halt (None otherwise)."""
    acc = summary.accounting
    if acc is None or (summary.provider == "simulated" and not acc.retries
                       and not acc.failed_attempts and not acc.halts):
        return None
    return acc.line(summary.cost_usd)


def _run(settings: RunSettings, *, resume: bool, as_json: bool, quiet: bool) -> None:
    """``ect run`` / ``ect resume``: one call of :func:`runner.study.run_study`, printed."""
    from runner.study import Halted, run_study

    printer = RunPrinter(as_json=as_json, quiet=quiet)
    try:
        run_study(settings, resume=resume, hooks=printer.hooks())
    except Halted as e:
        printer.halted(e.summary)
        raise
    finally:
        printer.stop()


def throttle_options() -> list[Decorator]:
    """``--requests-per-minute`` and ``--tokens-per-minute`` (run, resume, demo, sweep)."""
    return [
        click.option("--requests-per-minute", "requests_per_minute", default=None,
                     type=click.IntRange(0), metavar="N",
                     help="Start at most N provider requests a minute, evenly spaced, across all "
                          "cells (default: the spec's [provider] value; 0: no limit). Changes "
                          "no result; recorded in the run header."),
        click.option("--tokens-per-minute", "tokens_per_minute", default=None,
                     type=click.IntRange(0), metavar="N",
                     help="Keep the provider's tokens (as its usage reports them) under N a "
                          "minute across all cells (default: the spec's; 0: no limit)."),
    ]


def _failure_line(summary: RunSummary) -> str | None:
    """One line counting the provider failures of the committed cells, or None if there are none."""
    f = summary.failures
    if not f.total and not summary.transport_halts:
        return None
    roles = ", ".join(f"{k} {v}" for k, v in sorted(f.by_role.items())) or "none"
    pipelines = ", ".join(f"{k} {v}" for k, v in sorted(f.by_pipeline.items())) or "none"
    line = (f"provider failures in committed cells: {f.by_class.get('transport', 0)} transport, "
            f"{f.by_class.get('model_output', 0)} model output, in {len(f.cells)} cell(s) "
            f"(by role: {roles}; by pipeline: {pipelines})")
    if summary.transport_halts:
        line += (f"; {len(summary.transport_halts)} cell(s) halted by a transport failure "
                 "and not committed")
    return line


def _run_options(fn: F) -> F:
    options = [
        click.option("--concurrency", default=2, show_default=True, type=click.IntRange(1, 64),
                     help="Cells in flight at once (commits stay in canonical order)."),
        click.option("--limit", default=None, type=click.IntRange(1),
                     help="Run only the first N rows of the canonical schedule (smoke runs)."),
        click.option("--max-cost-usd", default=None, type=FiniteFloatRange(min=0, min_open=True),
                     help="Halt at a cell boundary once this much has been spent."),
        click.option("--max-calls", default=None, type=click.IntRange(1),
                     help="Halt at a cell boundary after this many provider attempts."),
        *throttle_options(),
        click.option("--sandbox-backend", default=None,
                     type=SANDBOX_BACKENDS,
                     help="Override the platform's sandbox backend."),
        click.option("--executor", default="local", show_default=True,
                     type=EXECUTOR_CHOICE,
                     help="Where sandboxed tool calls run: this machine, or the nodes of a Ray "
                          "cluster (model calls, credential and store stay here)."),
        click.option("--ray-address", default=None, metavar="ADDR",
                     help="The Ray cluster for --executor ray (default: $RAY_ADDRESS, else the "
                          "cluster `ray start` runs on this machine)."),
        click.option("--log-json", is_flag=True, help="Structured JSON logs on stderr."),
        click.option("--quiet", "-q", is_flag=True, help="No progress output."),
        click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@click.command("run")
@_study_option
@click.option("--store", "store", required=True, type=click.Path(dir_okay=False),
              help="The new run store (e.g. stores/v2.db); a key is made beside it.")
@_provider_options
@_run_options
@map_errors()
def run_cmd(spec: str | None, store: str, provider_name: str, model: str | None, base_url: str | None,
            credential_file: str | None, credential_env: str | None, concurrency: int,
            limit: int | None, max_cost_usd: float | None, max_calls: int | None,
            requests_per_minute: int | None, tokens_per_minute: int | None,
            sandbox_backend: str | None, executor: str, ray_address: str | None,
            log_json: bool, quiet: bool, as_json: bool) -> None:
    """Run the locked study: preflight, then every cell, each committed to the hash chain.

    Halts cleanly at a cell boundary (exit 4) when a STOP file appears beside the store, a
    ceiling is reached, or on Ctrl-C; continue with `ect resume --store PATH`.
    """
    from runner.study import RunSettings

    configure_logging(log_json)
    spec = study_file(spec, DEFAULT_SPEC, "--study")
    check_store_dir(store)
    settings = RunSettings(Path(spec), Path(store),
                           _choice(provider_name, model, base_url, credential_file,
                                   credential_env),
                           concurrency, limit, max_cost_usd, max_calls, sandbox_backend,
                           executor=executor, ray_address=_ray_address(executor, ray_address),
                           requests_per_minute=requests_per_minute,
                           tokens_per_minute=tokens_per_minute)
    _run(settings, resume=False, as_json=as_json, quiet=quiet)


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ray_address(executor: str, ray_address: str | None) -> str | None:
    if ray_address is not None and executor != "ray":
        die("--ray-address needs --executor ray", EXIT_USAGE)
    return ray_address


def _recorded_spec(store: str, spec: str | None) -> str:
    """``--study`` as given, else the spec the store's header records, found from here or from
    the checkout (see :func:`study_file`); a header that records none is a usage error."""
    from runner.study import spec_for_store

    recorded = None if spec is not None else str(spec_for_store(store))
    return study_file(spec, recorded or DEFAULT_SPEC, "--study")


@click.command("resume")
@click.option("--store", "store", required=True, type=click.Path(dir_okay=False, exists=True),
              help="The store of an interrupted run.")
@click.option("--study", "spec", default=None, type=click.Path(dir_okay=False),
              help="The study spec (default: the one recorded in the store's header).")
@provider_options(model_help="Model name (default: the one the run header records).",
                  default_shown="the run header's")
@_run_options
@map_errors()
def resume_cmd(store: str, spec: str | None, provider_name: str, model: str | None,
               base_url: str | None, credential_file: str | None, credential_env: str | None,
               concurrency: int, limit: int | None, max_cost_usd: float | None,
               max_calls: int | None, requests_per_minute: int | None,
               tokens_per_minute: int | None, sandbox_backend: str | None, executor: str,
               ray_address: str | None, log_json: bool, quiet: bool, as_json: bool) -> None:
    """Continue an interrupted run from its verified prefix.

    Verifies the store in full and the lock against the files; refuses on any drift, naming
    it. Reports provider attempts that were made but whose cell never committed. Continues
    with the provider, model, base URL, limit, concurrency and throttle the run header records:
    give only the credential again (an option given must equal the record, or is refused
    naming it; --limit may set another target).
    """
    configure_logging(log_json)
    from runner.errors import FormatError
    from runner.store import Store
    from runner.study import RecordedRun, RunSettings, orphan_attempts

    with Store.open(store, readonly=True) as s:
        try:
            orphans = orphan_attempts(s)
        except FormatError:  # not a run's records: the preflight refuses the store, naming why
            orphans = []
    spec_path = _recorded_spec(store, spec)
    if orphans and not quiet:
        cells = sorted({a.cell_id for a in orphans})
        click.echo(f"{len(orphans)} provider attempt(s) were made for {len(cells)} cell(s) "
                   f"that never committed (first: {cells[0]}); those cells run again", err=True)
    # The run header records the provider, model, base URL, limit, concurrency and throttle:
    # an option left out takes the recorded value, one given must equal it (only the
    # credential is given again).
    values: dict[str, object] = {
        "provider": provider_name, "model": model, "base_url": base_url, "limit": limit,
        "concurrency": concurrency, "requests_per_minute": requests_per_minute,
        "tokens_per_minute": tokens_per_minute}
    recorded = RecordedRun.read(Path(store))
    if recorded is not None:
        ctx = click.get_current_context()
        given = {k: v for k, v in values.items()
                 if ctx.get_parameter_source("provider_name" if k == "provider" else k)
                 not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP, None)}
        values = recorded.resolve(Path(store), given)
    settings = RunSettings(Path(spec_path), Path(store),
                           _choice(str(values["provider"]), _opt_str(values["model"]),
                                   _opt_str(values["base_url"]), credential_file,
                                   credential_env),
                           _opt_int(values["concurrency"]) or concurrency,
                           _opt_int(values["limit"]), max_cost_usd, max_calls, sandbox_backend,
                           executor=executor, ray_address=_ray_address(executor, ray_address),
                           requests_per_minute=_opt_int(values["requests_per_minute"]),
                           tokens_per_minute=_opt_int(values["tokens_per_minute"]))
    _run(settings, resume=True, as_json=as_json, quiet=quiet)


# --- export / replay ----------------------------------------------------------------------


@click.command("export")
@click.option("--store", "store", required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Where to write the signed manifest (JSON).")
@click.option("--study", "spec", default=None, type=click.Path(dir_okay=False),
              help="The study spec (default: the one recorded in the store's header).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: out, cells, audit_groups, merkle_root.")
@map_errors()
def export_cmd(store: str, out: str, spec: str | None, as_json: bool) -> None:
    """Write the signed final manifest; refuses unless every schedule row committed once.

    The manifest lists every cell as {row, cell_id, result_digest} (the digest leaves out
    wall-clock fields, so two runs of one lock compare cell by cell) and every audit group.
    """
    from runner.study import export_study

    if Path(out).exists() or Path(out).is_symlink():
        # The manifest is written by atomic replace: an existing --out (the store itself, its
        # key, an earlier manifest) would be lost without a word.
        die(f"--out {out} already exists; export writes a new file only", EXIT_USAGE)
    check_store_dir(out, "--out")
    doc = export_study(Path(store), Path(out), Path(_recorded_spec(store, spec)))
    m = doc["manifest"]
    if as_json:
        from runner.canonical import canonical_bytes

        click.echo(canonical_bytes({"out": str(out), "cells": len(m["cells"]),
                                    "audit_groups": len(m["audit_groups"]),
                                    "merkle_root": m["merkle_root"], "signed": True}).decode())
        return
    click.echo(f"{out}: {len(m['cells'])} cells, {len(m['audit_groups'])} audit groups, "
               f"merkle root {m['merkle_root'][:16]}..., signed")


@click.command("replay")
@click.option("--store", "store", required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--study", "spec", default=None, type=click.Path(dir_okay=False, exists=True),
              help="The study spec (default: the one recorded in the store's header).")
@click.option("--json", "as_json", is_flag=True, help="Print the replay report as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@map_errors()
def replay_cmd(store: str, spec: str | None, as_json: bool, quiet: bool) -> None:
    """Re-score every cell from the stored raw outputs; exit 1 if any result differs."""
    from runner.cli._progress import CountProgress
    from runner.study import replay_store

    if not quiet:
        click.echo(f"replay: verifying {store} in full, then re-scoring every cell", err=True)
    progress = CountProgress("replay", "cells", enabled=not quiet)
    try:
        report = replay_store(Path(store), Path(spec) if spec else None, on_cell=progress)
    finally:
        progress.stop()
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))  # noqa: TID251 - display only
    else:
        click.echo(f"replayed {report.cells} cells: {report.reproduced} reproduced, "
                   f"{len(report.mismatches)} differ")
        for m in report.mismatches[:10]:
            click.echo(f"  row {m.row} {m.cell_id}: {m.detail}")
    if report.mismatches:
        sys.exit(EXIT_NEGATIVE)


COMMANDS: list[click.Command] = [schedule_group, preflight_cmd, run_cmd, resume_cmd, export_cmd,
                                 replay_cmd]

