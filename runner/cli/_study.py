"""`ect schedule|preflight|run|resume|export|replay|demo`: the closed-loop study commands."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from runner.cli._common import (
    EXIT_HALTED,
    EXIT_NEGATIVE,
    EXIT_REFUSED,
    EXIT_USAGE,
    die,
    map_errors,
)
from runner.cli._params import (
    DEFAULT_SPEC,
    FiniteFloatRange,
    check_store_dir,
    provider_options,
    study_file,
)

if TYPE_CHECKING:
    from runner.study import ProviderChoice, RunSettings, RunSummary

__all__ = ["COMMANDS"]

# The library is imported inside each command, never at module level: `import runner.cli` (and
# so `ect --help`) must not pay for numpy, scipy, httpx or google-genai (tests/cli/test_startup.py).


def _refused() -> dict[type[BaseException], int]:
    """Exit codes of the study's errors (see :func:`runner.cli._common.map_errors`)."""
    from runner.providers import ProviderConfigError
    from runner.store import StoreDamaged, StoreUsageError
    from runner.study import (
        ClusterUnreachable,
        Halted,
        IncompleteStore,
        LockError,
        LockMismatch,
        NoUsableNode,
        PreflightFailed,
        ProviderMismatch,
        ReplayRefused,
        SpecError,
        StoreInUse,
        StoreNotEmpty,
    )

    return {
        Halted: EXIT_HALTED,
        PreflightFailed: EXIT_REFUSED,
        ClusterUnreachable: EXIT_REFUSED,
        NoUsableNode: EXIT_REFUSED,
        LockMismatch: EXIT_REFUSED,
        LockError: EXIT_REFUSED,
        StoreNotEmpty: EXIT_REFUSED,
        ProviderMismatch: EXIT_REFUSED,
        StoreInUse: EXIT_REFUSED,
        IncompleteStore: EXIT_REFUSED,
        ReplayRefused: EXIT_REFUSED,
        SpecError: EXIT_USAGE,
        ProviderConfigError: EXIT_USAGE,
        # A file given as --store that is not a verifying run store: refused, as replay and
        # report do.
        StoreDamaged: EXIT_REFUSED,
        StoreUsageError: EXIT_USAGE,
    }


def _configure_logging(log_json: bool) -> None:
    import logging

    import structlog

    processors: list[Any] = [structlog.processors.add_log_level,
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


def _study_option(fn: Callable[..., Any]) -> Callable[..., Any]:
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
@map_errors(_refused)
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
@map_errors(_refused)
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


def _print_check(check: Any) -> None:
    mark = "ok  " if check.ok else "FAIL"
    click.echo(f"  [{mark}] {check.name}: {check.detail}", err=True)


@click.command("preflight")
@_study_option
@click.option("--store", "store", required=True, type=click.Path(dir_okay=False),
              help="The run store the study will write (absent, or a verified prefix).")
@_provider_options
@click.option("--sandbox-backend", default=None, type=click.Choice(["bwrap", "sandbox-exec"]),
              help="Override the platform's sandbox backend.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True,
              help="Print only the verdict line (and, on failure, the failed checks).")
@map_errors(_refused)
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


def _quiet_check(check: Any) -> None:
    if not check.ok:
        _print_check(check)


def _refuse_unwritable_dir(store_path: Path) -> None:
    """A store directory the run cannot write in (a read-only filesystem): a usage error (2)
    before the preflight, found by creating and removing a probe file there (`ect preflight`
    makes the same check its ``store`` check, exit 3)."""
    import os
    import secrets

    probe = store_path.parent / f".ect-run-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        probe.unlink()
    except OSError as e:
        die(f"--store {store_path}: cannot write in {store_path.parent}: "
            f"{e.strerror or type(e).__name__}", EXIT_USAGE)


def _refuse_used_store(store_path: Path) -> None:
    """``run`` on a store that already holds cells: refused before the preflight (the run would
    refuse it after), in the run's own words."""
    from runner.errors import StoreError
    from runner.store import Store
    from runner.study import StoreNotEmpty

    if not store_path.is_file():
        return
    try:
        with Store.open(store_path, readonly=True) as store:
            cells = store.count - 1
    except StoreError:
        return  # damage or a foreign file: the preflight names it
    if cells > 0:
        raise StoreNotEmpty(f"{store_path} already holds {cells} cells; "
                            f"continue it with `ect resume --store {store_path}`")


def _run(settings: RunSettings, *, resume: bool, as_json: bool, quiet: bool) -> RunSummary:
    from runner.cli._progress import CellProgress, PhaseNote
    from runner.study import (
        Halted,
        PreflightFailed,
        RunSummary,
        check_resume_provider,
        execute,
        load_spec,
        run_preflight,
    )

    load_spec(settings.spec_path)  # a malformed spec is a usage error (2), not a failed check
    if resume:
        check_resume_provider(settings)  # before the preflight, which would fail less clearly
    else:
        _refuse_used_store(settings.store_path)  # cheap refusals before the preflight's probes
    _refuse_unwritable_dir(settings.store_path)
    if settings.executor == "ray":
        import importlib.util

        from runner.study import ClusterUnreachable

        if importlib.util.find_spec("ray") is None:
            raise ClusterUnreachable("the ray executor needs Ray: pip install '.[ray]' in the "
                                     "ect-runner checkout")
    if not quiet:
        click.echo(f"preflight: {settings.spec_path} -> {settings.store_path} (lock, store, "
                   "sandbox and its denial probes)", err=True)
    note = PhaseNote("preflight", enabled=not quiet)

    def on_check(check: Any) -> None:
        note(check.name)
        if not check.ok:
            _print_check(check)

    try:
        report = run_preflight(settings.spec_path, settings.store_path, settings.provider,
                               sandbox_backend=settings.sandbox_backend,
                               on_check=None if quiet else on_check)
    finally:
        note.stop()
    if not report.passed:
        raise PreflightFailed(report)
    if not quiet:
        click.echo(f"preflight passed ({len(report.checks)} checks)", err=True)
    target = len(report.rows) if settings.limit is None else min(settings.limit, len(report.rows))
    if resume and report.committed_rows >= target:
        # Nothing to run: say so instead of reporting a "run" that committed nothing.
        summary = RunSummary(store=str(settings.store_path), total=target,
                             committed=report.committed_rows, provider=settings.provider.name)
        if as_json:
            click.echo(json.dumps(summary.to_json(), indent=2))  # noqa: TID251 - display only
        elif not quiet:
            click.echo(f"nothing to do: all {target} cells are already committed to "
                       f"{settings.store_path} (next: ect export, ect replay, ect report)",
                       err=True)
        return summary
    progress = CellProgress(enabled=not quiet)
    try:
        summary = execute(settings, resume=resume, preflight=report,
                          on_cell=progress.update, on_start=progress.start)
    except Halted as e:
        progress.stop()
        if as_json:
            click.echo(json.dumps(e.summary.to_json(), indent=2))  # noqa: TID251 - display only
        elif not quiet and (line := _failure_line(e.summary)) is not None:
            click.echo(line, err=True)
        raise
    finally:
        progress.stop()
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))  # noqa: TID251 - display only
    elif not quiet:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(summary.stop_reasons.items()))
        click.echo(f"{summary.committed_now} cells run, {summary.committed}/{summary.total} "
                   f"committed to {summary.store} in {summary.wall_s:.1f}s ({reasons})", err=True)
        if (line := _failure_line(summary)) is not None:
            click.echo(line, err=True)
    return summary


def throttle_options() -> list[Callable[..., Any]]:
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


def _run_options(fn: Callable[..., Any]) -> Callable[..., Any]:
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
                     type=click.Choice(["bwrap", "sandbox-exec"]),
                     help="Override the platform's sandbox backend."),
        click.option("--executor", default="local", show_default=True,
                     type=click.Choice(["local", "ray"]),
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
@map_errors(_refused)
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

    _configure_logging(log_json)
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
@_provider_options
@_run_options
@map_errors(_refused)
def resume_cmd(store: str, spec: str | None, provider_name: str, model: str | None,
               base_url: str | None, credential_file: str | None, credential_env: str | None,
               concurrency: int, limit: int | None, max_cost_usd: float | None,
               max_calls: int | None, requests_per_minute: int | None,
               tokens_per_minute: int | None, sandbox_backend: str | None, executor: str,
               ray_address: str | None, log_json: bool, quiet: bool, as_json: bool) -> None:
    """Continue an interrupted run from its verified prefix.

    Verifies the store in full and the lock against the files; refuses on any drift, naming
    it. Reports provider attempts that were made but whose cell never committed.
    """
    _configure_logging(log_json)
    from runner.errors import FormatError
    from runner.store import Store
    from runner.study import RunSettings, orphan_attempts

    with Store.open(store, readonly=True) as s:
        try:
            orphans = orphan_attempts(s)
        except FormatError:  # not a run's records: the preflight refuses the store, naming why
            orphans = []
    spec_path = _recorded_spec(store, spec)
    if orphans and not quiet:
        cells = sorted({a["cell_id"] for a in orphans})
        click.echo(f"{len(orphans)} provider attempt(s) were made for {len(cells)} cell(s) "
                   f"that never committed (first: {cells[0]}); those cells run again", err=True)
    settings = RunSettings(Path(spec_path), Path(store),
                           _choice(provider_name, model, base_url, credential_file,
                                   credential_env),
                           concurrency, limit, max_cost_usd, max_calls, sandbox_backend,
                           executor=executor, ray_address=_ray_address(executor, ray_address),
                           requests_per_minute=requests_per_minute,
                           tokens_per_minute=tokens_per_minute)
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
@map_errors(_refused)
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
@map_errors(_refused)
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

