"""A synthetic closed-loop study with outcomes chosen so every table can be counted by hand.

24 tasks t00..t23 (worlds w10..w13, six families), faults assigned two tasks each in the order
F1..F8, U1..U3, T1 (so t22, t23 carry T1 and leave the primary scope: 22 primary clusters),
two checkpoints, three seeds, four policies: 576 rows (numbered from 1, as runner.study
numbers them) in canonical order task -> checkpoint -> seed -> policy.

Outcome rules (primary scope, 22 tasks x 3 seeds = 66 incomplete and 66 clean rows per policy):

- critic_core: premature on every incomplete row; clean rows supported.
- controller: premature on incomplete seeds 0,1 of even tasks and seed 0 of odd tasks
  (11*2 + 11*1 = 33); supported on the other incomplete rows (33) and every clean row;
  recovery on seed 2 of even tasks (11), each then supported.
- full_trace: premature on incomplete seed 0 (22), recovery and support on seed 1 (22);
  clean: false continuation on seed 0 (22), supported otherwise (44).
- ect: never premature; recovery on seed 0 (22), then supported except t00 (21);
  supported on incomplete seeds 0,1 (44, less t00's seed 0 = 43) and every clean row (66).
- secondary: ect 2 turns, 1 tool call on incomplete rows, 1000+200 tokens, 2.0 s, $0.002;
  every other policy 1 turn, 0 calls, 500+100 tokens, 1.0 s, $0.001.
- T1 tasks (t22, t23): ect stops with needs_human and never completes; others premature.
"""

from __future__ import annotations

from typing import Any

from runner.loop import Outcome
from runner.study import ScheduleRow

FAULTS = ("F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "U1", "U2", "U3", "T1")
FAMILIES = ("lookup", "aggregation", "topk", "temporal", "hierarchy", "abstention")
POLICIES = ("critic_core", "controller", "full_trace", "ect")
SEEDS = (0, 1, 2)


def task_ids() -> list[str]:
    return [f"t{i:02d}" for i in range(24)]


ROWS = len(task_ids()) * 2 * len(SEEDS) * len(POLICIES)
"""The synthetic study's rows (the frozen study's shape: 576)."""


def schedule(faults: tuple[str, ...] = FAULTS) -> list[dict[str, Any]]:
    """The schedule rows as JSON objects (the shape of ``runner.study.ScheduleRow``)."""
    rows = []
    n = 0
    for i, task in enumerate(task_ids()):
        for checkpoint in ("clean", "incomplete"):
            for seed in SEEDS:
                for policy in POLICIES:
                    rows.append(
                        {
                            "row": n + 1,
                            "cell_id": f"{task}:{checkpoint}:s{seed}:{policy}",
                            "task_id": task,
                            "world_id": f"w1{i // 6}",
                            "family": FAMILIES[i % 6],
                            "checkpoint_id": f"{task}/{checkpoint}",
                            "checkpoint": checkpoint,
                            "fault": faults[i // 2] if checkpoint == "incomplete" else None,
                            "seed_index": seed,
                            "seed": seed,
                            "policy": policy,
                        }
                    )
                    n += 1
    return rows


def schedule_rows() -> list[ScheduleRow]:
    return [ScheduleRow.from_json(r) for r in schedule()]


def typed(outcome_objects: list[dict[str, Any]]) -> list[Outcome]:
    return [Outcome.from_json(o) for o in outcome_objects]


def _outcome(srow: dict[str, Any], fault_of: dict[str, str]) -> dict[str, Any]:
    task = srow["task_id"]
    i = int(task[1:])
    seed = srow["seed"]
    policy = srow["policy"]
    inc = srow["checkpoint"] == "incomplete"
    even = i % 2 == 0
    fault = fault_of[task]
    premature = supported = fc = recovery = then_supported = False
    stop = "goal_met"
    if fault == "T1":
        if policy == "ect":
            stop = "needs_human"
        else:
            premature = inc
            supported = not inc
    elif policy == "critic_core":
        premature = inc
        supported = not inc
    elif policy == "controller":
        if inc:
            premature = seed in ((0, 1) if even else (0,))
            supported = not premature
            recovery = then_supported = even and seed == 2
        else:
            supported = True
    elif policy == "full_trace":
        if inc:
            premature = seed == 0
            recovery = supported = then_supported = seed == 1
        else:
            fc = seed == 0
            supported = not fc
    else:  # ect
        if inc:
            recovery = seed == 0
            then_supported = recovery and task != "t00"
            supported = (seed == 1) or then_supported
        else:
            supported = True
    if not supported and not premature:
        stop = "step_budget" if stop == "goal_met" else stop
    ect = policy == "ect"
    return {
        "row": srow["row"],
        "cell_id": srow["cell_id"],
        "task_id": task,
        "world_id": srow["world_id"],
        "family": FAMILIES[i % 6],
        "checkpoint": srow["checkpoint"],
        "fault": fault if inc else None,
        "policy": policy,
        "seed": seed,
        "stop_reason": stop,
        "final_decision": "complete" if (premature or supported) else "continue",
        "premature_unsupported": premature,
        "supported_completion": supported,
        "clean_false_continuation": fc,
        "recoverable_stuck": inc and not supported and not premature,
        "successful_recovery": recovery,
        "recovered_then_supported": then_supported,
        "unsupported_claims": 1 if premature else 0,
        "turns": 2 if ect else 1,
        "tool_calls": 1 if (ect and inc) else 0,
        "input_tokens": 1000 if ect else 500,
        "output_tokens": 200 if ect else 100,
        "latency_s": 2.0 if ect else 1.0,
        "cost_usd": 0.002 if ect else 0.001,
        "postcondition_ok": supported,
    }


def outcomes(faults: tuple[str, ...] = FAULTS) -> list[dict[str, Any]]:
    fault_of = {t: faults[i // 2] for i, t in enumerate(task_ids())}
    return [_outcome(s, fault_of) for s in schedule()]
