"""Analysing the static study: Table 2, Table 3 (ablations), H1, and the breakdowns.

``runner.study.run_static`` decides the snapshots; ``analyse_static`` turns its decision rows
(:class:`runner.study.StaticDecisionRow`) into figures, one function per table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from runner.analysis._common import STATIC_POLICIES, ProviderInfo, rnd
from runner.analysis._honesty import (
    STATIC_SIMULATOR_NOTE,
    choices_json,
    flat_parameters,
    simulator_json,
    static_gate_text,
)
from runner.analysis._paper import PAPER_NOTE, static_paper_vs_run
from runner.analysis._stats import (
    cluster_bootstrap_diff,
    cluster_bootstrap_mean,
    macro_f1,
    mcnemar_exact,
)
from runner.canonical import JsonObject
from runner.errors import AnalysisError
from runner.study import TABLE3_ABLATIONS, CheckAblation, StaticDecisionRow, StaticSpec
from runner.worlds import STATIC_CONDITIONS

__all__ = ["analyse_static"]

# -------------------------------------------------------------------------- the analysis


def _table2_row(rows: Sequence[StaticDecisionRow]) -> JsonObject:
    faults = [r for r in rows if r.condition != "C0"]
    clean = [r for r in rows if r.condition == "C0"]
    return {
        "unsafe": sum(1 for r in faults if r.decision == "complete"),
        "unsafe_den": len(faults),
        "clean_noncomplete": sum(1 for r in clean if r.decision != "complete"),
        "clean_den": len(clean),
        "stuck": sum(1 for r in faults if r.decision == "stuck"),
        "stuck_den": len(faults),
        "macro_f1": rnd(macro_f1([r.gold for r in rows], [r.decision for r in rows])),
        "model_calls": sum(r.model_calls for r in rows),
        "attempts": sum(r.attempts for r in rows),
        "retries": sum(r.retries for r in rows),
        "provider_failures": sum(1 for r in rows if r.provider_failure),
        "unparseable": sum(1 for r in rows if "critic.unparseable" in r.reasons),
        "input_tokens": sum(r.input_tokens for r in rows),
        "output_tokens": sum(r.output_tokens for r in rows),
        "cost_usd": rnd(sum(r.cost_usd for r in rows)),
    }


def _per_condition(rows: Sequence[StaticDecisionRow]) -> JsonObject:
    out: JsonObject = {}
    for cond in STATIC_CONDITIONS:
        sel = [r for r in rows if r.condition == cond]
        counts = Counter(r.decision for r in sel)
        out[cond] = {
            "n": len(sel),
            "complete": counts.get("complete", 0),
            "continue": counts.get("continue", 0),
            "stuck": counts.get("stuck", 0),
        }
    return out


def _h1(by_arm: Mapping[str, list[StaticDecisionRow]], spec: StaticSpec, seed: int
        ) -> JsonObject:
    """H1: per held-out task, "any unsafe complete among its fault snapshots", ECT vs critic
    core (exact McNemar), with task- and world-cluster bootstrap intervals."""
    reps = spec.replicates

    def unsafe_rows(arm: str) -> list[StaticDecisionRow]:
        return [r for r in by_arm[arm] if r.condition != "C0"]

    ect_f, critic_f = unsafe_rows("ect"), unsafe_rows("critic_core")
    tasks = sorted({r.task_id for r in ect_f})
    if tasks != sorted({r.task_id for r in critic_f}):
        raise AnalysisError("ECT and critic core decided different held-out tasks")

    def indicator(frows: Sequence[StaticDecisionRow]) -> list[bool]:
        hit = {r.task_id for r in frows if r.decision == "complete"}
        return [t in hit for t in tasks]

    mc = mcnemar_exact(indicator(ect_f), indicator(critic_f))

    def boot(cluster_key: str, label: str) -> Any:
        return cluster_bootstrap_diff(
            [getattr(r, cluster_key) for r in ect_f],
            [float(r.decision == "complete") for r in ect_f],
            [getattr(r, cluster_key) for r in critic_f],
            [float(r.decision == "complete") for r in critic_f],
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
        "ect_unsafe": sum(1 for r in ect_f if r.decision == "complete"),
        "critic_unsafe": sum(1 for r in critic_f if r.decision == "complete"),
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

    return h1


def _per_family(by_arm: Mapping[str, list[StaticDecisionRow]], arms: Sequence[str],
                held: Sequence[StaticDecisionRow]) -> JsonObject:
    """Per arm and task family: unsafe completes among the fault snapshots."""
    families = sorted({r.family for r in held})
    return {
        a: {
            fam: {
                "unsafe": sum(
                    1
                    for r in by_arm[a]
                    if r.family == fam and r.condition != "C0" and r.decision == "complete"
                ),
                "faults": sum(
                    1 for r in by_arm[a] if r.family == fam and r.condition != "C0"
                ),
            }
            for fam in families
        }
        for a in arms
    }


def _ect_reason_families(ect_held: Sequence[StaticDecisionRow]) -> JsonObject:
    """Per condition: how often each reason family appears in ECT's held-out decisions."""
    return {
        cond: dict(
            sorted(
                Counter(
                    f for r in ect_held if r.condition == cond for f in r.reason_families
                ).items()
            )
        )
        for cond in STATIC_CONDITIONS
    }


def _fires(check: CheckAblation, row: StaticDecisionRow) -> bool:
    """Whether ``check`` fired on full ECT's decision ``row`` (one of its reasons is there)."""
    if check.removes == ("recovery",):
        return "policy.recovery_available" in row.reasons
    return any(code in check.removes or code.split(".", 1)[0] in check.removes
               for code in row.reasons)


def _counts(rows: Sequence[StaticDecisionRow]) -> tuple[int, int]:
    return (sum(1 for r in rows if r.decision == "complete"),
            sum(1 for r in rows if r.decision == "stuck"))


def _table3_row(check: CheckAblation, abl: Sequence[StaticDecisionRow],
                ect_held: Sequence[StaticDecisionRow]) -> JsonObject:
    """One single-check ablation: the matched fault's U and S under ablation minus full ECT,
    the residual containment of each case, and where the check fires at all."""
    entry: JsonObject = {
        "check": check.name,
        "label": check.paper_check,
        "removes": list(check.removes),
        "measure": check.measure,
        "matched": check.matched,
        "paper_target": check.paper_target,
        "paper_fault": check.paper_fault,
        "fires_heldout": sum(1 for r in ect_held if _fires(check, r)),
        "fires_by_condition": dict(sorted(Counter(
            r.condition for r in ect_held if _fires(check, r)).items())),
    }
    entry["fires_on_no_snapshot"] = entry["fires_heldout"] == 0
    if check.fault is None:
        before = {r.snapshot_id: r.decision for r in ect_held if r.condition != "C0"}
        changed = sum(
            1 for r in abl if r.condition != "C0" and before[r.snapshot_id] != r.decision
        )
        entry.update(
            target_fault=None,
            fault_label=None,
            note=f"no matched fault in the frozen grid; {changed} of "
            f"{len(before)} held-out fault decisions changed",
            changed_decisions=changed,
        )
        return entry
    tgt_ect = [r for r in ect_held if r.condition == check.fault]
    tgt_abl = [r for r in abl if r.condition == check.fault]
    (u_ect, s_ect), (u_abl, s_abl) = _counts(tgt_ect), _counts(tgt_abl)
    counted = "complete" if check.measure == "U" else "stuck"
    contained = [r for r in tgt_abl if r.decision != counted]
    entry.update(
        target_fault=check.fault,
        fault_label=check.paper_target,
        den=len(tgt_abl),
        ect=u_ect if check.measure == "U" else s_ect,
        ablated=u_abl if check.measure == "U" else s_abl,
        effect=(u_abl - u_ect) if check.measure == "U" else (s_abl - s_ect),
        ect_U=u_ect, ablated_U=u_abl, effect_U=u_abl - u_ect,
        ect_S=s_ect, ablated_S=s_abl, effect_S=s_abl - s_ect,
        fires_on_target=sum(1 for r in tgt_ect if _fires(check, r)),
        ablated_reason_families=dict(sorted(
            Counter(f for r in tgt_abl for f in r.reason_families).items())),
        residual={
            "contained": len(contained),
            "not_contained": len(tgt_abl) - len(contained),
            "codes": dict(sorted(Counter(c for r in contained for c in r.reasons).items())),
            "cases": [
                {"snapshot_id": r.snapshot_id, "decision": r.decision, "codes": list(r.reasons)}
                for r in sorted(contained, key=lambda r: r.snapshot_id)
            ],
        },
    )
    return entry


def _table3(rows: Sequence[StaticDecisionRow], ect_held: Sequence[StaticDecisionRow]
            ) -> list[JsonObject]:
    """Table 3: each prespecified single-check ablation of ECT against full ECT."""
    table3 = []
    for check in TABLE3_ABLATIONS:
        abl = [
            r for r in rows if r.ablate == check.name and r.split == "heldout" and r.arm == "ect"
        ]
        if not abl:
            raise AnalysisError(f"no held-out decisions for the {check.name!r} ablation")
        table3.append(_table3_row(check, abl, ect_held))
    return table3


def _intervals(by_arm: Mapping[str, list[StaticDecisionRow]], arms: Sequence[str],
               spec: StaticSpec, seed: int) -> JsonObject:
    """Per arm: U, C and S rates with task-cluster bootstrap intervals (for the plots)."""
    reps = spec.replicates
    intervals: JsonObject = {}
    for a in arms:
        faults = [r for r in by_arm[a] if r.condition != "C0"]
        clean = [r for r in by_arm[a] if r.condition == "C0"]
        intervals[a] = {}
        for key, sel, wanted, positive in (
            ("U", faults, "complete", True),
            ("C", clean, "complete", False),
            ("S", faults, "stuck", True),
        ):
            res = cluster_bootstrap_mean(
                [r.task_id for r in sel],
                [float((r.decision == wanted) == positive) for r in sel],
                replicates=reps,
                seed=seed,
                label=f"rate/{a}/{key}",
                confidence=spec.confidence,
            )
            intervals[a][key] = {
                "rate_pct": rnd(res.estimate * 100),
                "ci_pct": [rnd(res.lo * 100), rnd(res.hi * 100)],
            }

    return intervals


def analyse_static(
    rows: Sequence[StaticDecisionRow],
    *,
    spec: StaticSpec,
    provider: ProviderInfo,
    seed: int | None = None,
) -> JsonObject:
    """Table 2, Table 3, H1 and the plot intervals from the decision rows of ``run_static``."""
    seed = spec.seed if seed is None else seed
    reps = spec.replicates
    base = [r for r in rows if r.ablate == ""]
    held = [r for r in base if r.split == "heldout"]
    arms = [a for a in STATIC_POLICIES if any(r.arm == a for r in held)]
    for need in ("ect", "critic_core"):
        if need not in arms:
            raise AnalysisError(f"static analysis needs held-out decisions of arm {need!r}")
    by_arm = {a: [r for r in held if r.arm == a] for a in arms}
    sizes = {a: len(v) for a, v in by_arm.items()}
    if len(set(sizes.values())) != 1:
        raise AnalysisError(f"arms decided different numbers of held-out snapshots: {sizes}")

    table2 = {a: _table2_row(by_arm[a]) for a in arms}
    per_fault = {a: _per_condition(by_arm[a]) for a in arms}
    dev = [r for r in base if r.split == "dev"]
    dev_table = {
        a: _table2_row([r for r in dev if r.arm == a])
        for a in arms
        if any(r.arm == a for r in dev)
    }

    h1 = _h1(by_arm, spec, seed)
    per_family = _per_family(by_arm, arms, held)
    ect_reasons = _ect_reason_families(by_arm["ect"])
    table3 = _table3(rows, by_arm["ect"])
    intervals = _intervals(by_arm, arms, spec, seed)
    # H1 compares ECT and the critic core, neither of which calls a model: no simulator
    # parameter enters it (they shape only the self-check and full-trace arms).
    h1["depends_on_simulator"] = False
    h1["outcome"] = static_gate_text(bool(h1["passed"]), provider.simulated)

    results: JsonObject = {
        "format": "ect.analysis.static/1",
        "provider": provider.to_json(),
        "provider_line": provider.describe(),
        "inputs": {
            "spec": spec.to_json(),
            "spec_sha256": spec.sha256,
            "seed": seed,
            "replicates": reps,
            "snapshots": len({r.snapshot_id for r in base}),
            "heldout_snapshots": sizes[arms[0]],
            "heldout_tasks": len({r.task_id for r in held}),
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
        "simulator": (
            simulator_json(flat_parameters({"critic": spec.critic}),
                           f"the static spec ({spec.sha256}), table [simulated.critic]",
                           STATIC_SIMULATOR_NOTE)
            if provider.simulated else None
        ),
        "choices": choices_json(),
    }
    results["paper_vs_run"] = {"note": PAPER_NOTE, "rows": static_paper_vs_run(results)}
    return results
