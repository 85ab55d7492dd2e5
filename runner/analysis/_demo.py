"""``ect demo`` as one library call: the product's main job, offline, on the embedded simulated
provider (docs/study.md).

preflight -> the full closed-loop study (every tool call sandboxed, every cell committed to the
hash chain) -> store verification -> signed manifest (verified offline) -> closed-loop report ->
static study.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.analysis._driver import report_from_store, static_study
from runner.store import verify_store
from runner.study import (
    ProviderChoice,
    RunHooks,
    RunSettings,
    StaticSpec,
    export_study,
    load_spec,
    run_study,
    study_paths,
    verify_export,
)

__all__ = ["DemoHooks", "DemoResult", "run_demo"]


@dataclass(frozen=True)
class DemoHooks:
    """What a caller is told while :func:`run_demo` works (every hook optional).

    Attributes:
        run: the closed-loop run's hooks (see :class:`runner.study.RunHooks`).
        on_step: a step starts (its description, one line).
        on_done: a step finished (its result, one line).
        on_static_progress: static decisions done so far, of how many.
    """

    run: RunHooks = field(default_factory=RunHooks)
    on_step: Callable[[str], None] | None = None
    on_done: Callable[[str], None] | None = None
    on_static_progress: Callable[[int, int], None] | None = None


@dataclass(frozen=True)
class DemoResult:
    """Where a demo put everything and what its gates said.

    ``outputs`` are (name, path) pairs in the order they were written; ``gates`` maps
    ``h1``-``h4`` to each gate's outcome line (empty for a smoke run with ``limit``, which
    makes neither the manifest nor the reports: they need every cell).
    """

    out_dir: Path
    store: Path
    committed: int
    total: int
    outputs: tuple[tuple[str, Path], ...]
    gates: dict[str, str]

    @property
    def complete(self) -> bool:
        return self.committed == self.total


def default_out_dir(now: dt.datetime | None = None) -> Path:
    """``out/demo-<UTC time>``."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    return Path("out") / f"demo-{stamp}"


def check_demo_specs(spec: Path, static_spec: Path) -> None:
    """Both specs read before anything is created: a malformed one is a usage error and
    leaves no output directory behind (SpecError, SpecInvalid)."""
    load_spec(spec)
    StaticSpec.load(static_spec)


def run_demo(out_dir: Path, spec: Path, static_spec: Path, *, concurrency: int = 2,
             limit: int | None = None, requests_per_minute: int | None = None,
             tokens_per_minute: int | None = None,
             hooks: DemoHooks | None = None) -> DemoResult:
    """Run the whole offline study into ``out_dir`` (new or empty; a directory this call made
    is removed again if the preflight refuses, so a refusal leaves nothing behind).

    Raises what :func:`runner.study.run_study` raises (PreflightFailed, Halted, ...), and
    SpecError / SpecInvalid for a malformed spec before anything is written.
    """
    hooks = hooks or DemoHooks()

    def step(text: str) -> None:
        if hooks.on_step is not None:
            hooks.on_step(text)

    def done(text: str) -> None:
        if hooks.on_done is not None:
            hooks.on_done(text)

    check_demo_specs(spec, static_spec)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    store = out_dir / "v2.db"
    manifest = out_dir / "manifest.json"
    settings = RunSettings(spec, store, ProviderChoice("simulated"), concurrency, limit,
                           requests_per_minute=requests_per_minute,
                           tokens_per_minute=tokens_per_minute)
    try:
        summary = run_study(settings, hooks=hooks.run)
    except BaseException:
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()  # preflight refused: nothing was written, leave nothing behind
        raise
    step("verifying the store in full (chain, Merkle root, signatures, every body)")
    verified = verify_store(store, full=True)
    done(f"store verified: {verified.records} records, intact (full verification)")
    outputs: list[tuple[str, Path]] = [
        ("store", store), ("public key", store.with_name(store.name + ".key.pub"))]
    gates: dict[str, str] = {}
    if summary.committed == summary.total:
        step("signing the manifest")
        export_study(store, manifest, spec)
        verify_export(manifest, store)
        done("manifest signed and verified offline")
        outputs.append(("manifest", manifest))
        step("closed-loop report (Table 4, H2-H4, 10000 bootstrap replicates)")
        closed = report_from_store(store, study_paths(spec).schedule, out_dir / "report")
        outputs.append(("closed-loop report", out_dir / "report" / "report.html"))
        gates = {name.lower(): outcome for name, _, outcome in closed.gates()}
        done("closed loop: " + "; ".join(f"{name}: {outcome}"
                                         for name, _, outcome in closed.gates()))
        static = static_study(static_spec, out_dir / "static",
                              on_progress=hooks.on_static_progress)
        outputs.append(("static study", out_dir / "static" / "report.html"))
        gates["h1"] = static.h1.outcome
        done(f"static study: H1: {gates['h1']}")
    else:
        done(f"smoke run ({summary.committed}/{summary.total} cells): no manifest or "
             "report (they need every cell)")
    return DemoResult(out_dir=out_dir, store=store, committed=summary.committed,
                      total=summary.total, outputs=tuple(outputs), gates=gates)
