"""One call per command: ``static_study`` (``ect static``) and ``closed_loop_report``
(``ect report``). Each builds its inputs, runs the analysis and writes the outputs."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio

from runner.analysis._audit import VerifiedCompletion, verified_completions
from runner.analysis._closed import analyse_closed_loop
from runner.analysis._closed_results import (
    ClosedLoopResults,
    PlanRow,
    PlanVsActual,
    ProviderAccounting,
    StoreInputs,
)
from runner.analysis._common import ProviderInfo
from runner.analysis._errors import (
    AllModelCallsFailed,
    PlanUnreadable,
    ScheduleDisagrees,
    ScheduleUnreadable,
)
from runner.analysis._load import load_outcomes_from_store
from runner.analysis._report import render_outputs, write_files, write_outputs
from runner.analysis._static import StaticResults, analyse_static
from runner.canonical import JsonObject, raw_digest
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
    label = f"{info.name}/{info.model}" + (" (SIMULATED)" if info.simulated else "")
    # one output: on a full disk none of the six files is left half of a study behind
    write_files(Path(out_dir), {
        **render_outputs(results),
        "decisions.jsonl": jsonl_bytes([{"provider": label, **r.to_json()} for r in run.rows]),
        "attempts.jsonl": jsonl_bytes(run.attempts),
        "attempts.journal.jsonl": jsonl_bytes(run.journal),
    })
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
    provider_accounting: ProviderAccounting | None = None,
    plan_vs_actual: PlanVsActual | None = None,
    verified: Sequence[VerifiedCompletion] | None = None,
) -> ClosedLoopResults:
    """Analyse closed-loop outcomes (refusing an incomplete inventory) and write the outputs."""
    results = analyse_closed_loop(
        outcomes, schedule_rows, provider=provider, seed=seed, replicates=replicates,
        inputs=inputs, simulator=simulator, simulator_source=simulator_source,
        reason_codes=reason_codes, provider_failures=provider_failures, verified=verified,
        provider_accounting=provider_accounting, plan_vs_actual=plan_vs_actual,
    )
    write_outputs(results, Path(out_dir))
    return results


def report_from_store(
    store_path: str | Path,
    schedule_path: str | Path | None,
    out_dir: str | Path,
    *,
    seed: int = DEFAULT_REPORT_SEED,
    replicates: int = 10_000,
    plan: JsonObject | None = None,
) -> ClosedLoopResults:
    """``ect report``: verify the store, check the inventory against the schedule, analyse, write.

    ``schedule_path`` ``None`` means the schedule of the spec the store's header records (found
    from the working directory or the study's folder, :func:`runner.study.spec_for_store`).

    Raises:
        SpecError: no schedule given and the header's spec is found nowhere.
        InventoryIncomplete: a schedule row is missing, duplicated, or a record is unscheduled.
        ScheduleDisagrees: the schedule given is not the one the store was run for.
        StoreDamaged: the store does not verify.
        AnalysisError: a record disagrees with the schedule row it claims to have run.
    """
    loaded = load_outcomes_from_store(store_path)
    if schedule_path is None:
        from runner.study import spec_for_store, study_paths

        schedule_path = study_paths(spec_for_store(store_path, option="--schedule")).schedule
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
        provider_accounting=_accounting(store_path, loaded.cells, loaded.provider.simulated),
        plan_vs_actual=(_plan_vs_actual(plan, store_path, loaded.cells)
                        if plan is not None else None),
        verified=verified_completions(loaded.cells),
    )


def _plan_vs_actual(plan: JsonObject, store_path: str | Path,
                    cells: Sequence[CellRecord]) -> PlanVsActual:
    """The plan's requests, tokens and cost beside the run's: every journaled attempt (or the
    committed cells' attempts for a store without a journal), the committed cells' tokens and
    the billed cost (the committed cells' cost without a journal).

    Raises:
        PlanUnreadable: ``plan`` is not an ``ect plan --json`` document.
    """
    from runner.store import Store
    from runner.study import store_accounting

    def rng(name: str) -> tuple[float, float, float]:
        r = plan.get(name)
        vals = [r.get(k) for k in ("min", "expected", "max")] if isinstance(r, dict) else []
        if len(vals) != 3 or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                     for v in vals):
            raise PlanUnreadable(f"plan: {name} must be {{min, expected, max}} numbers "
                                 "(give the output of ect plan --json)")
        return float(vals[0]), float(vals[1]), float(vals[2])  # type: ignore[arg-type]

    n = plan.get("cells")
    if not isinstance(n, int) or isinstance(n, bool):
        raise PlanUnreadable("plan: cells must be an integer (give the output of ect plan --json)")
    figures = {k: rng(k) for k in ("requests", "input_tokens", "output_tokens", "cost_usd")}
    with Store.open(Path(store_path), readonly=True) as store:
        acc = store_accounting(store, {c.cell_id for c in cells})
    attempts = (acc.attempts if acc is not None
                else sum(len(call.attempts) for c in cells for call in c.audit.calls))
    cost = (acc.billed_usd if acc is not None
            else sum(c.result.outcome.cost_usd for c in cells))
    actual = {"requests": float(attempts),
              "input_tokens": float(sum(c.result.input_tokens for c in cells)),
              "output_tokens": float(sum(c.result.output_tokens for c in cells)),
              "cost_usd": round(cost, 9)}
    return PlanVsActual(cells=n, pilot=plan.get("pilot") is not None,
                        rows=tuple(PlanRow(k, *figures[k], actual[k]) for k in figures))


def _accounting(store_path: str | Path, cells: Sequence[CellRecord],
                simulated: bool) -> ProviderAccounting | None:
    """The store's attempt accounting for the report: for a real provider always, for the
    simulated one only when it records a retry, a failed attempt or a halt (so an undisturbed
    simulated run's report is unchanged); None for a store whose journal does not say."""
    from runner.store import Store
    from runner.study import store_accounting

    with Store.open(Path(store_path), readonly=True) as store:
        acc = store_accounting(store, {c.cell_id for c in cells})
    if acc is None or (simulated and not acc.retries and not acc.failed_attempts
                       and not acc.halts):
        return None
    return ProviderAccounting.of(acc, sum(c.result.outcome.cost_usd for c in cells))


def _failure_counts(cells: Sequence[CellRecord]) -> FailureCounts:
    """Provider failures of the committed cells by class, kind, role and pipeline."""
    counts = FailureCounts()
    for cell in cells:
        counts.add(cell)
    return counts
