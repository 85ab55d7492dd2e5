"""One call per command: ``static_study`` (``ect static``) and ``closed_loop_report``
(``ect report``). Each builds its inputs, runs the analysis and writes the outputs."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio

from runner.analysis._audit import VerifiedCompletion, verified_completions
from runner.analysis._closed import ClosedLoopResults, StoreInputs, analyse_closed_loop
from runner.analysis._common import ProviderInfo
from runner.analysis._errors import AllModelCallsFailed, ScheduleDisagrees, ScheduleUnreadable
from runner.analysis._load import load_outcomes_from_store
from runner.analysis._report import write_outputs
from runner.analysis._static import StaticResults, analyse_static
from runner.canonical import JsonObject, atomic_write, raw_digest
from runner.loop import Outcome
from runner.study import (
    CellRecord,
    FailureCounts,
    ScheduleError,
    ScheduleRow,
    StaticRun,
    StaticSpec,
    StratumReasons,
    read_schedule,
    reason_codes_by_stratum,
    run_static,
    static_provider,
)
from runner.worlds import Snapshot

__all__ = [
    "DEFAULT_REPORT_SEED",
    "closed_loop_report",
    "jsonl_bytes",
    "report_from_store",
    "static_study",
]

DEFAULT_REPORT_SEED = 2705
"""Bootstrap seed of ``ect report`` unless ``--seed`` says otherwise (the paper's seed)."""


def jsonl_bytes(rows: Sequence[JsonObject]) -> bytes:
    """One key-sorted JSON object per line (display/audit output, not a digest input)."""
    return b"".join(
        (json.dumps(r, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode()  # noqa: TID251
        for r in rows
    )


def static_study(
    spec_path: str | Path,
    out_dir: str | Path,
    *,
    provider: str | None = None,
    seed: int | None = None,
    model: str | None = None,
    base_url: str | None = None,
    credential_file: str | None = None,
    credential_env: str | None = None,
    snapshots: Sequence[Snapshot] | None = None,
    concurrency: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
) -> StaticResults:
    """Run the static study and write its outputs into ``out_dir``; returns its results.

    ``on_progress(done, total)`` is called after each decision (for progress output).

    Files: results.json, tables.md, report.html (byte-identical for equal spec, provider and
    seed), decisions.jsonl (every decision with reason codes and the provider label),
    attempts.jsonl (provider attempt records without wall-clock fields) and
    attempts.journal.jsonl (the same records with their UTC timestamps, latencies and attempt
    ids: the one file that differs between runs).

    Raises:
        AllModelCallsFailed: the study made model calls and every one failed (the outputs are
            written all the same, and attached to the error, but they are not measurements).
    """
    spec = StaticSpec.load(spec_path)
    prov = static_provider(
        provider or spec.provider_default,
        spec,
        model=model,
        base_url=base_url,
        credential_file=credential_file,
        credential_env=credential_env,
    )

    async def go() -> StaticRun:
        try:
            return await run_static(spec, prov, snapshots=snapshots, concurrency=concurrency,
                                    on_progress=on_progress)
        finally:
            close = getattr(prov, "aclose", None)
            if close is not None:
                await close()

    run = anyio.run(go)
    info = ProviderInfo(name=prov.name, model=prov.model, simulated=bool(prov.simulated))
    results = analyse_static(run.rows, spec=spec, provider=info, seed=seed)
    out = Path(out_dir)
    write_outputs(results, out)
    label = f"{info.name}/{info.model}" + (" (SIMULATED)" if info.simulated else "")
    for name, rows in (
        ("decisions.jsonl", [{"provider": label, **r.to_json()} for r in run.rows]),
        ("attempts.jsonl", run.attempts),
        ("attempts.journal.jsonl", run.journal),
    ):
        atomic_write(out / name, jsonl_bytes(rows))
    calls, failed = results.model_calls()
    if calls and failed == calls:
        raise AllModelCallsFailed(calls, results)
    return results


def closed_loop_report(
    outcomes: Sequence[Outcome],
    schedule_rows: Sequence[ScheduleRow],
    out_dir: str | Path,
    *,
    provider: ProviderInfo,
    seed: int,
    replicates: int = 10_000,
    inputs: StoreInputs | None = None,
    simulator: Mapping[str, float] | None = None,
    simulator_source: str = "not given to the analysis",
    reason_codes: Sequence[StratumReasons] | None = None,
    provider_failures: FailureCounts | None = None,
    verified: Sequence[VerifiedCompletion] | None = None,
) -> ClosedLoopResults:
    """Analyse closed-loop outcomes (refusing an incomplete inventory) and write the outputs."""
    results = analyse_closed_loop(
        outcomes, schedule_rows, provider=provider, seed=seed, replicates=replicates,
        inputs=inputs, simulator=simulator, simulator_source=simulator_source,
        reason_codes=reason_codes, provider_failures=provider_failures, verified=verified,
    )
    write_outputs(results, Path(out_dir))
    return results


def report_from_store(
    store_path: str | Path,
    schedule_path: str | Path,
    out_dir: str | Path,
    *,
    seed: int = DEFAULT_REPORT_SEED,
    replicates: int = 10_000,
) -> ClosedLoopResults:
    """``ect report``: verify the store, check the inventory against the schedule, analyse, write.

    Raises:
        InventoryIncomplete: a schedule row is missing, duplicated, or a record is unscheduled.
        ScheduleDisagrees: the schedule given is not the one the store was run for.
        StoreDamaged: the store does not verify.
        AnalysisError: a record disagrees with the schedule row it claims to have run.
    """
    loaded = load_outcomes_from_store(store_path)
    try:
        schedule = read_schedule(schedule_path)  # the one (strict) schedule reader
    except ScheduleError as e:
        raise ScheduleUnreadable(str(e)) from e
    if not schedule:
        raise ScheduleUnreadable(f"schedule {schedule_path} holds no rows")
    by_row = {r.row: r for r in schedule}
    for cell in loaded.cells:
        want = by_row.get(cell.row)
        problem = cell.mismatch(want) if want is not None else None
        if problem is not None:
            raise ScheduleDisagrees(f"store record: {problem}, not the schedule given")
    declared = loaded.header.schedule_rows
    if isinstance(declared, int) and declared != len(schedule):
        raise ScheduleDisagrees(
            f"the store was run for {declared} schedule rows, the schedule given has {len(schedule)}"
        )
    sched_sha = raw_digest(Path(schedule_path).read_bytes())
    simulator, source = loaded.simulator_parameters()
    return closed_loop_report(
        loaded.outcomes,
        schedule,
        out_dir,
        provider=loaded.provider,
        seed=seed,
        replicates=replicates,
        inputs=StoreInputs.from_json(
            {**loaded.inputs(), "schedule_sha256": sched_sha, "schedule_rows": len(schedule)},
            "inputs"),
        simulator=simulator,
        simulator_source=source,
        reason_codes=reason_codes_by_stratum(loaded.cells),
        provider_failures=_failure_counts(loaded.cells),
        verified=verified_completions(loaded.cells),
    )


def _failure_counts(cells: Sequence[CellRecord]) -> FailureCounts:
    """Provider failures of the committed cells by class, kind, role and pipeline."""
    counts = FailureCounts()
    for cell in cells:
        counts.add(cell)
    return counts
