"""The static study: 7 policies x 432 snapshots, Table 2, Table 3 (ablations) and H1.

``run_static`` decides every snapshot of ``runner.worlds.static_grid()`` with every arm of
``runner.policies.STATIC_ARMS`` (and ECT once per prespecified single-check ablation), through
``runner.policies.decide_static``; the model-backed arms go through the provider given (the
simulated provider by default). ``analyse_static`` turns the decision rows into figures.

The critic core's fast-path invariant is enforced twice: the policy raises
``CriticCoreInvariantBroken`` when it would need its model, and the provider handed to the
critic core here is a tripwire whose ``generate`` aborts the run (``FastPathInvariantBroken``);
a decision reporting a model call or a provider result from the critic core aborts too.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from runner.analysis._common import STATIC_POLICIES, ProviderInfo, rnd
from runner.analysis._errors import FastPathInvariantBroken, SpecInvalid
from runner.analysis._stats import (
    cluster_bootstrap_diff,
    cluster_bootstrap_mean,
    macro_f1,
    mcnemar_exact,
)
from runner.canonical import MAX_TOML_BYTES, loads_toml, read_bounded
from runner.errors import AnalysisError, FormatError

__all__ = [
    "ABLATION_TABLE",
    "StaticRun",
    "StaticSpec",
    "analyse_static",
    "run_static",
]

SPEC_FORMAT = "ect.static-spec/1"
PROVIDERS = ("simulated", "gemini", "openai")
FAULTS = ("F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8")
FAULT_LABELS = {
    "F1": "false completion",
    "F2": "irrelevant evidence",
    "F3": "nested error",
    "F4": "scope mismatch",
    "F5": "partial coverage",
    "F6": "synthesis corruption",
    "F7": "forged reference",
    "F8": "stagnation",
}

# The prespecified single-check ablations (the paper's Table 3): what is removed from ECT,
# the matched fault whose containment it tests, and which count the effect is measured in
# (U: unsafe complete, S: stuck). ``None``: no matched fault in the frozen eight-fault grid.
ABLATION_TABLE: tuple[tuple[str, str, str | None, str], ...] = (
    ("coverage", "Claim coverage", "F5", "U"),
    ("scope", "Task/scope", "F4", "U"),
    ("evidence", "Outcome/validation", "F3", "U"),
    ("binding", "Ledger/reference", "F7", "U"),
    ("replay", "Value replay", "F6", "U"),
    ("transform", "Exact transform", None, "U"),
    ("recovery", "Recovery check", "F8", "S"),
)


# ------------------------------------------------------------------------------ the spec


def _get(table: Mapping[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if key not in table:
        raise SpecInvalid(f"static spec: missing {where}.{key}")
    value = table[key]
    if isinstance(value, bool) and typ is not bool:
        raise SpecInvalid(f"static spec: {where}.{key} must not be a boolean")
    if not isinstance(value, typ):
        raise SpecInvalid(f"static spec: {where}.{key} has the wrong type ({type(value).__name__})")
    return value


def _only(table: Mapping[str, Any], keys: set[str], where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise SpecInvalid(f"static spec: unknown key(s) in {where}: {', '.join(unknown)}")


@dataclass(frozen=True)
class StaticSpec:
    """``schedules/static.toml``, parsed strictly (unknown or missing keys are errors)."""

    seed: int
    replicates: int
    confidence: float
    provider_default: str
    simulated_model: str
    gemini_model: str
    openai_model: str
    openai_base_url: str
    timeout_s: float
    generation: dict[str, Any]
    critic: dict[str, float]
    price: dict[str, float]
    sha256: str

    @classmethod
    def load(cls, path: str | Path) -> StaticSpec:
        try:
            data = read_bounded(path, limit=MAX_TOML_BYTES, what="static spec")
        except OSError as e:
            raise SpecInvalid(f"cannot read static spec {path}: {e.strerror}") from e
        except FormatError as e:
            raise SpecInvalid(str(e)) from e
        return cls.parse(data)

    @classmethod
    def parse(cls, data: bytes) -> StaticSpec:
        try:
            doc = loads_toml(data, what="static spec")
        except FormatError as e:
            raise SpecInvalid(str(e)) from e
        _only(
            doc, {"format", "analysis", "provider", "generation", "simulated", "price"}, "top level"
        )
        if doc.get("format") != SPEC_FORMAT:
            raise SpecInvalid(f"static spec: format must be {SPEC_FORMAT!r}")
        an = _get(doc, "analysis", dict, "spec")
        _only(an, {"seed", "bootstrap_replicates", "confidence"}, "analysis")
        pv = _get(doc, "provider", dict, "spec")
        _only(
            pv,
            {
                "default",
                "simulated_model",
                "gemini_model",
                "openai_model",
                "openai_base_url",
                "timeout_s",
            },
            "provider",
        )
        gen = _get(doc, "generation", dict, "spec")
        _only(gen, {"temperature", "seed", "max_output_tokens", "top_p"}, "generation")
        sim = _get(doc, "simulated", dict, "spec")
        _only(sim, {"critic"}, "simulated")
        critic = _get(sim, "critic", dict, "simulated")
        price = _get(doc, "price", dict, "spec")
        _only(price, {"input_per_mtok", "output_per_mtok"}, "price")
        seed = _get(an, "seed", int, "analysis")
        reps = _get(an, "bootstrap_replicates", int, "analysis")
        conf = float(_get(an, "confidence", (int, float), "analysis"))
        if seed < 0 or reps < 1 or not 0 < conf < 1:
            raise SpecInvalid(
                "static spec: analysis needs seed >= 0, replicates >= 1, 0 < confidence < 1"
            )
        default = _get(pv, "default", str, "provider")
        if default not in PROVIDERS:
            raise SpecInvalid(
                f"static spec: provider.default must be one of {', '.join(PROVIDERS)}"
            )
        generation = {
            "temperature": float(_get(gen, "temperature", (int, float), "generation")),
            "seed": _get(gen, "seed", int, "generation"),
            "max_output_tokens": _get(gen, "max_output_tokens", int, "generation"),
            "top_p": float(gen["top_p"]) if "top_p" in gen else None,
        }
        for k, v in critic.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
                raise SpecInvalid(f"static spec: simulated.critic.{k} must be a number in [0, 1]")
        prices = {
            k: float(_get(price, k, (int, float), "price"))
            for k in ("input_per_mtok", "output_per_mtok")
        }
        if min(prices.values()) < 0:
            raise SpecInvalid("static spec: prices must be non-negative")
        return cls(
            seed=seed,
            replicates=reps,
            confidence=conf,
            provider_default=default,
            simulated_model=_get(pv, "simulated_model", str, "provider"),
            gemini_model=_get(pv, "gemini_model", str, "provider"),
            openai_model=_get(pv, "openai_model", str, "provider"),
            openai_base_url=_get(pv, "openai_base_url", str, "provider"),
            timeout_s=float(_get(pv, "timeout_s", (int, float), "provider")),
            generation=generation,
            critic={k: float(v) for k, v in sorted(critic.items())},
            price=prices,
            sha256="sha256:" + hashlib.sha256(data).hexdigest(),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "sha256": self.sha256,
            "seed": self.seed,
            "bootstrap_replicates": self.replicates,
            "confidence": self.confidence,
            "generation": dict(self.generation),
            "simulated_critic": dict(self.critic),
            "price_usd_per_mtok": dict(self.price),
        }


# ------------------------------------------------------------------------------- the run


class _Tripwire:
    """The provider handed to the critic core: any model call aborts the static study."""

    name = "critic-core-tripwire"
    model = "none"
    simulated = True

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: Any, *, observer: Any = None) -> Any:
        self.calls += 1
        raise FastPathInvariantBroken(
            "the critic core called its model on a static snapshot; the frozen static "
            "comparison requires its deterministic fast paths (run aborted)"
        )


Decide = Callable[..., Awaitable[Any]]


@dataclass
class StaticRun:
    """Decision rows (one per snapshot x arm, plus ECT ablations) and the provider audit."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    """Attempt records without wall-clock or random fields (deterministic)."""
    journal: list[dict[str, Any]] = field(default_factory=list)
    """Full attempt records, wall clock included (the audit journal; not byte-stable)."""


def _row(snapshot: Any, arm: str, ablate: str, decision: Any, cost: float) -> dict[str, Any]:
    result = decision.provider_result
    usage = result.usage if result is not None else None
    codes = sorted({r.code for r in decision.reasons})
    return {
        "snapshot_id": str(snapshot.snapshot_id),
        "task_id": snapshot.task.task_id,
        "world_id": snapshot.task.world_id,
        "family": snapshot.task.family,
        "split": snapshot.task.split,
        "condition": snapshot.condition,
        "gold": snapshot.gold_decision,
        "arm": arm,
        "ablate": ablate,
        "decision": decision.decision,
        "reasons": codes,
        "reason_families": sorted({c.split(".", 1)[0] for c in codes}),
        "model_calls": int(decision.model_calls),
        "attempts": len(result.attempts) if result is not None else 0,
        "retries": sum(1 for a in result.attempts if a.retry) if result is not None else 0,
        "provider_failure": bool(result is not None and not result.ok),
        "input_tokens": int(usage.input_tokens) if usage is not None else 0,
        "output_tokens": int(usage.output_tokens) if usage is not None else 0,
        "cost_usd": cost,
    }


async def run_static(
    spec: StaticSpec,
    provider: Any,
    *,
    snapshots: Sequence[Any] | None = None,
    decide: Decide | None = None,
    arms: Sequence[str] = STATIC_POLICIES,
    concurrency: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
) -> StaticRun:
    """Decide every snapshot with every arm, and with ECT under each ablation of Table 3.

    ``snapshots`` defaults to ``runner.worlds.static_grid()``, ``decide`` to
    ``runner.policies.decide_static`` (a stand-in with the same signature serves unit tests).
    ``concurrency`` > 1 keeps that many decisions in flight (useful with a remote provider);
    the rows come out in the same canonical order either way. ``on_progress(done, total)`` is
    called after each decision (for progress output).

    Raises:
        FastPathInvariantBroken: the critic core called (or reported calling) its model.
        CriticCoreInvariantBroken: raised by the policy for the same reason.
    """
    from runner.providers import GenerationConfig, PriceTable

    if snapshots is None:
        from runner.worlds import static_grid

        snapshots = static_grid()
    if decide is None:
        from runner.policies import decide_static

        decide = decide_static
    gen = GenerationConfig(**spec.generation)
    prices = PriceTable(**spec.price)
    plan: list[tuple[str, str]] = [(arm, "") for arm in arms]
    plan += [("ect", name) for name, *_ in ABLATION_TABLE]
    jobs = [(snapshot, arm, ablate) for snapshot in snapshots for arm, ablate in plan]
    decided: list[Any] = [None] * len(jobs)
    finished = [0]

    async def one(i: int) -> None:
        snapshot, arm, ablate = jobs[i]
        tripwire = _Tripwire() if arm == "critic_core" else None
        decision = await decide(
            arm,
            snapshot,
            tripwire if tripwire is not None else provider,
            ablate=frozenset({ablate}) if ablate else frozenset(),
            generation=gen,
        )
        if tripwire is not None and (
            tripwire.calls or decision.model_calls or decision.provider_result is not None
        ):
            raise FastPathInvariantBroken(
                f"the critic core reported a model call on snapshot {snapshot.snapshot_id}; "
                "the frozen static comparison is void (run aborted)"
            )
        decided[i] = decision
        if on_progress is not None:
            finished[0] += 1
            on_progress(finished[0], len(jobs))

    if concurrency < 1:
        raise AnalysisError(f"concurrency must be at least 1, got {concurrency}")
    if concurrency == 1:
        for i in range(len(jobs)):
            await one(i)
    else:
        limiter = anyio.CapacityLimiter(concurrency)

        async def limited(i: int) -> None:
            async with limiter:
                await one(i)

        async with anyio.create_task_group() as tg:
            for i in range(len(jobs)):
                tg.start_soon(limited, i)

    # Rows and attempts in canonical job order, however the decisions interleaved.
    run = StaticRun()
    for (snapshot, arm, ablate), decision in zip(jobs, decided, strict=True):
        result = decision.provider_result
        cost = result.cost_usd(prices) if result is not None else 0.0
        run.rows.append(_row(snapshot, arm, ablate, decision, cost))
        if result is not None:
            for a in result.attempts:
                where = {"snapshot_id": str(snapshot.snapshot_id), "arm": arm}
                run.attempts.append({**a.stable_json(), **where})
                run.journal.append({**a.to_json(), **where})
    return run


# -------------------------------------------------------------------------- the analysis


def _table2_row(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    faults = [r for r in rows if r["condition"] != "C0"]
    clean = [r for r in rows if r["condition"] == "C0"]
    return {
        "unsafe": sum(1 for r in faults if r["decision"] == "complete"),
        "unsafe_den": len(faults),
        "clean_noncomplete": sum(1 for r in clean if r["decision"] != "complete"),
        "clean_den": len(clean),
        "stuck": sum(1 for r in faults if r["decision"] == "stuck"),
        "stuck_den": len(faults),
        "macro_f1": rnd(macro_f1([r["gold"] for r in rows], [r["decision"] for r in rows])),
        "model_calls": sum(r["model_calls"] for r in rows),
        "attempts": sum(r["attempts"] for r in rows),
        "retries": sum(r["retries"] for r in rows),
        "provider_failures": sum(1 for r in rows if r["provider_failure"]),
        "unparseable": sum(1 for r in rows if "critic.unparseable" in r["reasons"]),
        "input_tokens": sum(r["input_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
        "cost_usd": rnd(sum(r["cost_usd"] for r in rows)),
    }


def _per_condition(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cond in ("C0", *FAULTS):
        sel = [r for r in rows if r["condition"] == cond]
        counts = Counter(r["decision"] for r in sel)
        out[cond] = {
            "n": len(sel),
            "complete": counts.get("complete", 0),
            "continue": counts.get("continue", 0),
            "stuck": counts.get("stuck", 0),
        }
    return out


def analyse_static(
    rows: Sequence[Mapping[str, Any]],
    *,
    spec: StaticSpec,
    provider: ProviderInfo,
    seed: int | None = None,
) -> dict[str, Any]:
    """Table 2, Table 3, H1 and the plot intervals from the decision rows of ``run_static``."""
    seed = spec.seed if seed is None else seed
    reps = spec.replicates
    base = [r for r in rows if r["ablate"] == ""]
    held = [r for r in base if r["split"] == "heldout"]
    arms = [a for a in STATIC_POLICIES if any(r["arm"] == a for r in held)]
    for need in ("ect", "critic_core"):
        if need not in arms:
            raise AnalysisError(f"static analysis needs held-out decisions of arm {need!r}")
    by_arm = {a: [r for r in held if r["arm"] == a] for a in arms}
    sizes = {a: len(v) for a, v in by_arm.items()}
    if len(set(sizes.values())) != 1:
        raise AnalysisError(f"arms decided different numbers of held-out snapshots: {sizes}")

    table2 = {a: _table2_row(by_arm[a]) for a in arms}
    per_fault = {a: _per_condition(by_arm[a]) for a in arms}
    dev = [r for r in base if r["split"] == "dev"]
    dev_table = {
        a: _table2_row([r for r in dev if r["arm"] == a])
        for a in arms
        if any(r["arm"] == a for r in dev)
    }

    # H1: per held-out task, "any unsafe complete among its fault snapshots", ECT vs critic core.
    def unsafe_rows(arm: str) -> list[Mapping[str, Any]]:
        return [r for r in by_arm[arm] if r["condition"] != "C0"]

    ect_f, critic_f = unsafe_rows("ect"), unsafe_rows("critic_core")
    tasks = sorted({r["task_id"] for r in ect_f})
    if tasks != sorted({r["task_id"] for r in critic_f}):
        raise AnalysisError("ECT and critic core decided different held-out tasks")

    def indicator(frows: Sequence[Mapping[str, Any]]) -> list[bool]:
        hit = {r["task_id"] for r in frows if r["decision"] == "complete"}
        return [t in hit for t in tasks]

    mc = mcnemar_exact(indicator(ect_f), indicator(critic_f))

    def boot(cluster_key: str, label: str) -> Any:
        return cluster_bootstrap_diff(
            [r[cluster_key] for r in ect_f],
            [float(r["decision"] == "complete") for r in ect_f],
            [r[cluster_key] for r in critic_f],
            [float(r["decision"] == "complete") for r in critic_f],
            replicates=reps,
            seed=seed,
            label=label,
            confidence=spec.confidence,
        )

    task_b = boot("task_id", "h1/task")
    world_b = boot("world_id", "h1/world")
    diff_pp, lo_pp, hi_pp = (rnd(x) for x in task_b.pp())
    h1 = {
        "tasks": len(tasks),
        "worlds": world_b.n_clusters,
        "fault_snapshots": len(ect_f),
        "ect_unsafe": sum(1 for r in ect_f if r["decision"] == "complete"),
        "critic_unsafe": sum(1 for r in critic_f if r["decision"] == "complete"),
        "ect_tasks_with_unsafe": sum(indicator(ect_f)),
        "critic_tasks_with_unsafe": sum(indicator(critic_f)),
        "b_ect": mc.b_x,
        "b_critic": mc.b_y,
        "mcnemar_p": rnd(mc.p_value),
        "diff_pp": diff_pp,
        "ci_pp": [lo_pp, hi_pp],
        "world_ci_pp": [rnd(world_b.lo * 100), rnd(world_b.hi * 100)],
        "replicates": reps,
        "confidence": spec.confidence,
        "seed": seed,
        "passed": bool(diff_pp < 0 and mc.p_value < 0.05 and hi_pp < 0),
        "rule": "ECT-minus-critic-core UCR < 0, exact McNemar p < .05, and the task-cluster "
        "95% interval wholly below 0",
    }

    families = sorted({r["family"] for r in held})
    per_family = {
        a: {
            fam: {
                "unsafe": sum(
                    1
                    for r in by_arm[a]
                    if r["family"] == fam and r["condition"] != "C0" and r["decision"] == "complete"
                ),
                "faults": sum(
                    1 for r in by_arm[a] if r["family"] == fam and r["condition"] != "C0"
                ),
            }
            for fam in families
        }
        for a in arms
    }
    ect_reasons = {
        cond: dict(
            sorted(
                Counter(
                    f for r in by_arm["ect"] if r["condition"] == cond for f in r["reason_families"]
                ).items()
            )
        )
        for cond in ("C0", *FAULTS)
    }

    table3 = []
    ect_held = by_arm["ect"]
    for name, label, fault, measure in ABLATION_TABLE:
        abl = [
            r for r in rows if r["ablate"] == name and r["split"] == "heldout" and r["arm"] == "ect"
        ]
        if not abl:
            raise AnalysisError(f"no held-out decisions for the {name!r} ablation")
        counted = "complete" if measure == "U" else "stuck"
        entry: dict[str, Any] = {
            "check": name,
            "label": label,
            "ablate": [name],
            "measure": measure,
        }
        if fault is None:
            before = {r["snapshot_id"]: r["decision"] for r in ect_held if r["condition"] != "C0"}
            changed = sum(
                1
                for r in abl
                if r["condition"] != "C0" and before[r["snapshot_id"]] != r["decision"]
            )
            entry.update(
                target_fault=None,
                fault_label=None,
                note=f"no matched fault in the frozen grid; {changed} of "
                f"{len(before)} held-out fault decisions changed",
                changed_decisions=changed,
            )
        else:
            tgt_ect = [r for r in ect_held if r["condition"] == fault]
            tgt_abl = [r for r in abl if r["condition"] == fault]
            n_ect = sum(1 for r in tgt_ect if r["decision"] == counted)
            n_abl = sum(1 for r in tgt_abl if r["decision"] == counted)
            fams = Counter(f for r in tgt_abl for f in r["reason_families"])
            entry.update(
                target_fault=fault,
                fault_label=FAULT_LABELS[fault],
                den=len(tgt_abl),
                ect=n_ect,
                ablated=n_abl,
                effect=n_abl - n_ect,
                ablated_reason_families=dict(sorted(fams.items())),
            )
        table3.append(entry)

    intervals: dict[str, Any] = {}
    for a in arms:
        faults = [r for r in by_arm[a] if r["condition"] != "C0"]
        clean = [r for r in by_arm[a] if r["condition"] == "C0"]
        intervals[a] = {}
        for key, sel, wanted, positive in (
            ("U", faults, "complete", True),
            ("C", clean, "complete", False),
            ("S", faults, "stuck", True),
        ):
            res = cluster_bootstrap_mean(
                [r["task_id"] for r in sel],
                [float((r["decision"] == wanted) == positive) for r in sel],
                replicates=reps,
                seed=seed,
                label=f"rate/{a}/{key}",
                confidence=spec.confidence,
            )
            intervals[a][key] = {
                "rate_pct": rnd(res.estimate * 100),
                "ci_pct": [rnd(res.lo * 100), rnd(res.hi * 100)],
            }

    return {
        "format": "ect.analysis.static/1",
        "provider": provider.to_json(),
        "provider_line": provider.describe(),
        "inputs": {
            "spec": spec.to_json(),
            "spec_sha256": spec.sha256,
            "seed": seed,
            "replicates": reps,
            "snapshots": len({r["snapshot_id"] for r in base}),
            "heldout_snapshots": sizes[arms[0]],
            "heldout_tasks": len({r["task_id"] for r in held}),
            "decisions": len(rows),
            "arms": arms,
            "cluster": "task_id (sensitivity: world_id)",
            "interval": "percentile",
        },
        "table2": table2,
        "table2_dev": dev_table,
        "table3": table3,
        "h1": h1,
        "per_fault": per_fault,
        "per_family": per_family,
        "ect_reason_families": ect_reasons,
        "intervals": intervals,
    }
