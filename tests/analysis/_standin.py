"""A scripted stand-in for ``runner.policies.decide_static`` and the static grid.

Same call signature and return shape as the real thing, with decisions chosen so the paper's
Table 2 and Table 3 come out exactly (see the rules in ``decide``), for unit tests of the layer
above (``runner.analysis.run_static`` / ``analyse_static``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

CONDITIONS = ("C0", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8")
FAMILIES = ("lookup", "aggregation", "topk", "temporal", "hierarchy", "abstention")


@dataclass(frozen=True)
class Snap:
    snapshot_id: str
    task: Any
    condition: str
    gold_decision: str
    index: int  # the task's index among its split (scripting only)


def grid() -> list[Snap]:
    out = []
    for w in range(8):
        for f, fam in enumerate(FAMILIES):
            split = "dev" if w < 2 else "heldout"
            index = (w - 2) * 6 + f if split == "heldout" else w * 6 + f
            task = SimpleNamespace(
                task_id=f"w{w:02d}-{fam}", world_id=f"w{w:02d}", family=fam, split=split
            )
            for cond in CONDITIONS:
                gold = "complete" if cond == "C0" else "continue"
                out.append(Snap(f"{task.task_id}/{cond}", task, cond, gold, index))
    return out


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Attempt:
    retry: bool
    started_utc: str = "2026-01-01T00:00:00Z"

    def stable_json(self) -> dict[str, Any]:
        return {"retry": self.retry, "status": 200}

    def to_json(self) -> dict[str, Any]:
        return {**self.stable_json(), "started_utc": self.started_utc}


@dataclass(frozen=True)
class Result:
    ok: bool
    usage: Usage
    attempts: tuple[Attempt, ...]

    def cost_usd(self, prices: Any) -> float:
        return (
            self.usage.input_tokens * prices.input_per_mtok
            + self.usage.output_tokens * prices.output_per_mtok
        ) / 1e6


@dataclass(frozen=True)
class Decision:
    decision: str
    reasons: tuple[Any, ...] = ()
    model_calls: int = 0
    provider_result: Any = None


def _reason(code: str) -> Any:
    return SimpleNamespace(code=code, slot=None, detail="")


@dataclass
class Script:
    """Records every call; ``critic_calls_model`` / ``critic_reports_call`` break the invariant."""

    critic_calls_model: bool = False
    critic_reports_call: bool = False
    calls: list[tuple[str, str, frozenset[str]]] = field(default_factory=list)

    async def decide(
        self,
        arm: str,
        snap: Snap,
        provider: Any,
        *,
        ablate: frozenset[str] = frozenset(),
        generation: Any = None,
    ) -> Decision:
        self.calls.append((arm, snap.snapshot_id, ablate))
        c, i = snap.condition, snap.index
        if arm in ("completion_token", "self_check", "heuristic"):
            d = "continue" if c == "F1" else "complete"
            if arm == "self_check":
                return Decision(
                    d,
                    (_reason("self_check.x"),),
                    1,
                    Result(True, Usage(100, 10), (Attempt(False),)),
                )
            return Decision(d)
        if arm == "critic_core":
            if self.critic_calls_model:
                await provider.generate(None)
            if self.critic_reports_call:
                return Decision("complete", (), 1, None)
            return Decision("stuck" if c == "F8" else "complete")
        if arm == "full_trace":
            if c == "C0":
                d = "continue" if i % 2 == 0 else "complete"
            elif c == "F2" or (c == "F3" and i < 20):
                d = "complete"
            elif c == "F8" and i < 15:
                d = "stuck"
            else:
                d = "continue"
            retry = c == "F1" and i < 7
            attempts = (Attempt(False), Attempt(True)) if retry else (Attempt(False),)
            failed = c == "F1" and i == 35
            return Decision(
                d, (_reason("critic.x"),), 1, Result(not failed, Usage(1000, 50), attempts)
            )
        if arm == "postconditions":
            return Decision("complete" if c in ("C0", "F2", "F3", "F7", "F8") else "continue")
        assert arm == "ect", arm
        # ``ablate`` holds what one single-check ablation removes (reason codes or families).
        if c == "C0":
            return Decision("complete")
        unsafe = (
            (c == "F5" and "coverage.missing_slot" in ablate)
            or (c == "F4" and i % 3 == 0 and "scope.date_mismatch" in ablate)
            or (c == "F6" and "replay" in ablate)
        )
        if unsafe:
            return Decision("complete", ())
        if c == "F8" and "recovery" in ablate:
            return Decision("stuck", (_reason("policy.no_recovery"),))
        codes = {
            "F3": ("evidence.invalid", "replay.null_input"),
            "F4": ("scope.date_mismatch", "replay.mismatch"),
            "F5": ("coverage.missing_slot",),
            "F6": ("replay.mismatch",),
            "F7": ("evidence.unknown_receipt", "scope.cardinality"),
            "F8": ("policy.recovery_available",),
        }.get(c, ("coverage.missing_slot",))
        return Decision("continue", tuple(_reason(k) for k in codes if k not in ablate))
