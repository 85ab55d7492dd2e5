"""One call per command: ``static_study`` (``ect static``) and ``closed_loop_report``
(``ect report``). Each builds its inputs, runs the analysis and writes the outputs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from runner.analysis._closed import analyse_closed_loop
from runner.analysis._common import ProviderInfo
from runner.analysis._errors import ScheduleDisagrees
from runner.analysis._load import load_outcomes_from_store, read_schedule_rows
from runner.analysis._report import write_outputs
from runner.analysis._static import PROVIDERS, StaticRun, StaticSpec, analyse_static, run_static
from runner.errors import AnalysisError

__all__ = [
    "DEFAULT_REPORT_SEED",
    "build_provider",
    "closed_loop_report",
    "jsonl_bytes",
    "report_from_store",
    "static_study",
]

DEFAULT_REPORT_SEED = 2705
"""Bootstrap seed of ``ect report`` unless ``--seed`` says otherwise (the paper's seed)."""


def jsonl_bytes(rows: Sequence[dict[str, Any]]) -> bytes:
    """One key-sorted JSON object per line (display/audit output, not a digest input)."""
    return b"".join(
        (json.dumps(r, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode()  # noqa: TID251
        for r in rows
    )


def build_provider(
    name: str,
    spec: StaticSpec,
    *,
    model: str | None = None,
    base_url: str | None = None,
    credential_file: str | None = None,
    credential_env: str | None = None,
) -> Any:
    """The provider for the model-backed static arms; the simulated one needs no credential."""
    from runner.providers import (
        GeminiProvider,
        OpenAICompatProvider,
        SimulatedProvider,
        load_credential,
    )

    if name not in PROVIDERS:
        raise AnalysisError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")
    if name == "simulated":
        if credential_file or credential_env:
            raise AnalysisError("the simulated provider takes no credential")
        from runner.policies import CriticBehaviour, PlannerBehaviour, simulated_responder

        responder = simulated_responder(PlannerBehaviour(), CriticBehaviour.from_json(spec.critic))
        return SimulatedProvider(responder, model=model or spec.simulated_model)
    if name == "gemini":
        return GeminiProvider(
            load_credential(credential_file, credential_env),
            model=model or spec.gemini_model,
            base_url=base_url,
            timeout_s=spec.timeout_s,
        )
    cred = (
        load_credential(credential_file, credential_env)
        if (credential_file or credential_env)
        else None
    )
    return OpenAICompatProvider(
        base_url or spec.openai_base_url,
        credential=cred,
        model=model or spec.openai_model,
        timeout_s=spec.timeout_s,
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
    snapshots: Sequence[Any] | None = None,
    concurrency: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the static study and write its outputs into ``out_dir``; returns results.json's dict.

    ``on_progress(done, total)`` is called after each decision (for progress output).

    Files: results.json, tables.md, report.html (byte-identical for equal spec, provider and
    seed), decisions.jsonl (every decision with reason codes and the provider label),
    attempts.jsonl (provider attempt records without wall-clock fields) and
    attempts.journal.jsonl (the same records with their UTC timestamps, latencies and attempt
    ids: the one file that differs between runs).
    """
    spec = StaticSpec.load(spec_path)
    prov = build_provider(
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
        ("decisions.jsonl", [{"provider": label, **r} for r in run.rows]),
        ("attempts.jsonl", run.attempts),
        ("attempts.journal.jsonl", run.journal),
    ):
        (out / name).write_bytes(jsonl_bytes(rows))
    return results


def closed_loop_report(
    outcomes: Sequence[dict[str, Any]],
    schedule_rows: Sequence[dict[str, Any]],
    out_dir: str | Path,
    *,
    provider: ProviderInfo,
    seed: int,
    replicates: int = 10_000,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Analyse closed-loop outcomes (refusing an incomplete inventory) and write the outputs."""
    results = analyse_closed_loop(
        outcomes, schedule_rows, provider=provider, seed=seed, replicates=replicates, inputs=inputs
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
) -> dict[str, Any]:
    """``ect report``: verify the store, check the inventory against the schedule, analyse, write.

    Raises:
        InventoryIncomplete: a schedule row is missing, duplicated, or a record is unscheduled.
        ScheduleDisagrees: the schedule given is not the one the store was run for.
        StoreDamaged: the store does not verify.
        AnalysisError: a record disagrees with the schedule row it claims to have run.
    """
    loaded = load_outcomes_from_store(store_path)
    schedule = read_schedule_rows(schedule_path)
    by_row = {r.get("row"): r for r in schedule}
    for row, recorded in sorted(loaded.recorded_schedule_rows.items()):
        if row in by_row and recorded != by_row[row]:
            raise ScheduleDisagrees(
                f"store record for row {row} ran a different schedule row than the schedule given"
            )
    declared = loaded.header.get("schedule_rows")
    if isinstance(declared, int) and declared != len(schedule):
        raise ScheduleDisagrees(
            f"the store was run for {declared} schedule rows, the schedule given has {len(schedule)}"
        )
    sched_sha = "sha256:" + hashlib.sha256(Path(schedule_path).read_bytes()).hexdigest()
    return closed_loop_report(
        loaded.outcomes,
        schedule,
        out_dir,
        provider=loaded.provider,
        seed=seed,
        replicates=replicates,
        inputs={**loaded.inputs(), "schedule_sha256": sched_sha, "schedule_rows": len(schedule)},
    )
