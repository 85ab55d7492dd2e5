"""``run`` and ``resume`` as one library call each: the cheap refusals, the preflight, then
:func:`~runner.study.execute` (docs/study.md). The command line only prints what the hooks
tell it."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.errors import ExitCategory, StoreError, StudyError
from runner.study._execute import execute, refuse_if_locked, stop_file
from runner.study._preflight import (
    PreflightCheck,
    PreflightFailed,
    PreflightReport,
    write_probe,
)
from runner.study._ray import ClusterUnreachable
from runner.study._records import CellRecord
from runner.study._runheader import StoreNotEmpty, check_resume_provider
from runner.study._settings import RunSettings
from runner.study._spec import load_spec
from runner.study._summary import RunSummary

__all__ = ["RunHooks", "StopFilePresent", "StoreNotWritable", "run_study", "study_root"]


class StopFilePresent(StudyError):
    """A ``STOP`` file lies beside the store: the run would halt before its first cell, so it
    is refused before any preflight, naming the file and how to remove it."""

    exit_category = ExitCategory.HALTED


class StoreNotWritable(StudyError):
    """The directory of a new store cannot be written in (a read-only filesystem, no
    permission): a usage error, found before the preflight."""

    exit_category = ExitCategory.USAGE


@dataclass(frozen=True)
class RunHooks:
    """What a caller is told while :func:`run_study` works (every hook optional).

    Attributes:
        on_preflight: the preflight is about to run its checks (given the settings).
        on_check: one preflight check finished (passed or not).
        on_preflight_passed: every check passed; cells run next.
        on_nothing_to_do: ``resume`` found every cell committed; the summary is returned
            without running anything.
        on_start: the run holds the store and knows its totals.
        on_cell: one cell was committed.
        on_finished: the run ended without a halt (also after nothing to do).
    """

    on_preflight: Callable[[RunSettings], None] | None = None
    on_check: Callable[[PreflightCheck], None] | None = None
    on_preflight_passed: Callable[[PreflightReport], None] | None = None
    on_nothing_to_do: Callable[[RunSummary], None] | None = None
    on_start: Callable[[RunSummary], None] | None = None
    on_cell: Callable[[CellRecord, RunSummary], None] | None = None
    on_finished: Callable[[RunSummary], None] | None = None


def run_study(settings: RunSettings, *, resume: bool = False,
              hooks: RunHooks | None = None) -> RunSummary:
    """Run (``resume=False``) or continue (``resume=True``) the locked study.

    In order: the spec is read (a malformed one is a usage error, not a failed check); a run is
    refused on a store that already holds cells and a resume under another provider than the
    store's; the store's directory must be writable; the Ray executor needs Ray; the preflight
    must pass; then :func:`~runner.study.execute` runs every cell still to run.

    Raises:
        SpecError: the spec is malformed.
        StoreInUse: another run or resume holds the store's run lock (pid, host, since named).
        StopFilePresent: a ``STOP`` file lies beside the store (named, with how to remove it).
        StoreNotEmpty: ``run`` on a store that holds cells (continue it with resume).
        ProviderMismatch: ``resume`` under another provider than the store records.
        StoreNotWritable: the store's directory cannot be written in.
        ClusterUnreachable: the Ray executor without Ray installed.
        PreflightFailed: a preflight check failed (nothing was run).
        Halted: the run stopped cleanly at a cell boundary; ``e.summary`` says how far it got.
    """
    hooks = hooks or RunHooks()
    load_spec(settings.spec_path)
    # advice that works: a store another run holds, and a leftover STOP file, are named first
    refuse_if_locked(settings.store_path)
    stop = stop_file(settings.store_path)
    if stop.exists():
        raise StopFilePresent(
            f"{stop} exists: it halts every run writing in {stop.parent} before its first "
            f"cell, so nothing was run; remove it (rm {stop}) and run the command again")
    if resume:
        check_resume_provider(settings)  # before the preflight, which would fail less clearly
    else:
        _refuse_used_store(settings.store_path)  # cheap refusals before the preflight's probes
    _refuse_unwritable_dir(settings.store_path)
    if settings.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise ClusterUnreachable("the ray executor needs Ray: pip install '.[ray]' in the "
                                 "ect-runner checkout")
    if hooks.on_preflight is not None:
        hooks.on_preflight(settings)
    # looked up on the package when called: runner.study.run_preflight is the one name of the
    # preflight, whoever substitutes it (the tests that keep it out of cheap refusals do)
    import runner.study

    report = runner.study.run_preflight(settings.spec_path, settings.store_path,
                                        settings.provider, sandbox_backend=settings.sandbox_backend,
                                        on_check=hooks.on_check)
    if not report.passed:
        raise PreflightFailed(report)
    if hooks.on_preflight_passed is not None:
        hooks.on_preflight_passed(report)
    target = len(report.rows) if settings.limit is None else min(settings.limit, len(report.rows))
    if resume and report.committed_rows >= target:
        summary = RunSummary(store=str(settings.store_path), total=target,
                             committed=report.committed_rows, provider=settings.provider.name)
        if hooks.on_nothing_to_do is not None:
            hooks.on_nothing_to_do(summary)
    else:
        summary = execute(settings, resume=resume, preflight=report, on_cell=hooks.on_cell,
                          on_start=hooks.on_start)
    if hooks.on_finished is not None:
        hooks.on_finished(summary)
    return summary


def _refuse_used_store(store_path: Path) -> None:
    """``run`` on a store that already holds cells: refused before the preflight (the run would
    refuse it after), in the run's own words."""
    from runner.store import Store

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


def _refuse_unwritable_dir(store_path: Path) -> None:
    """A store directory the run cannot write in, found by the preflight's own probe
    (``ect preflight`` makes the same check its ``store`` check, a refusal)."""
    failed = write_probe(store_path.parent)
    if failed is not None:
        e = failed[1]
        raise StoreNotWritable(f"--store {store_path}: cannot write in {store_path.parent}: "
                               f"{e.strerror or type(e).__name__}")


def study_root() -> Path:
    """The folder holding the study's files (``schedules/``, ``sandbox_profiles/``,
    ``preflight/``): the checkout's, or the installed package's copy. Looked up when called,
    so the commands find the same folder as the rest of the library."""
    from runner import _data

    return _data.study_root()
