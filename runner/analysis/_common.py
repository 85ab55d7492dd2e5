"""Shared pieces of both analyses: provider labelling, number formatting, policy names."""

from __future__ import annotations

import math
from dataclasses import dataclass

from runner.canonical import JsonObject
from runner.errors import AnalysisError
from runner.policies import PIPELINES, STATIC_ARMS

__all__ = [
    "CLOSED_LOOP_POLICIES",
    "POLICY_LABELS",
    "STATIC_POLICIES",
    "ProviderInfo",
    "rnd",
]

# The arms' order is the policies package's own (the paper's Table 2 and Table 4 orders).
STATIC_POLICIES: tuple[str, ...] = STATIC_ARMS
"""The seven static arms, in the paper's Table 2 order."""

CLOSED_LOOP_POLICIES: tuple[str, ...] = PIPELINES
"""The four closed-loop pipelines, in the paper's Table 4 order."""

POLICY_LABELS: dict[str, str] = {
    "completion_token": "Completion token",
    "self_check": "Self-check",
    "heuristic": "Heuristic",
    "critic_core": "Critic core",
    "controller": "Controller",
    "full_trace": "Full-trace critic",
    "postconditions": "Postcond. oracle (non-deployable)",
    "ect": "ECT",
}


@dataclass(frozen=True)
class ProviderInfo:
    """Which model provider produced the decisions a report describes."""

    name: str
    model: str
    simulated: bool

    def __post_init__(self) -> None:
        if not self.name or not self.model:
            raise AnalysisError("provider name and model must be non-empty")

    def describe(self) -> str:
        """One line for every output's header; says SIMULATED plainly when it was."""
        if self.simulated:
            return (
                f"provider: {self.name} (model {self.model}) - SIMULATED: decisions come from "
                "the deterministic simulated provider, not from a real language model"
            )
        return f"provider: {self.name} (model {self.model}) - real model responses"

    def to_json(self) -> JsonObject:
        return {"name": self.name, "model": self.model, "simulated": self.simulated}


def rnd(x: float, digits: int = 10) -> float:
    """Round to ``digits`` significant digits so results.json carries no float noise."""
    if not math.isfinite(x):
        raise AnalysisError(f"non-finite figure {x!r}")
    return float(f"{x:.{digits}g}") + 0.0  # + 0.0 turns -0.0 into 0.0
