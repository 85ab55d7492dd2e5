"""Shared pieces of both analyses: provider labelling, number formatting, policy names."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from runner.analysis._record import Record
from runner.analysis._stats import BootstrapResult
from runner.errors import AnalysisError
from runner.policies import PIPELINES, STATIC_ARMS, PipelineEntry

__all__ = [
    "CLOSED_LOOP_POLICIES",
    "POLICY_LABELS",
    "STATIC_POLICIES",
    "BootstrapInfo",
    "ProviderInfo",
    "RateInterval",
    "rnd",
]

# The arms' order is the policies package's own (the paper's Table 2 and Table 4 orders).
STATIC_POLICIES: tuple[str, ...] = STATIC_ARMS
"""The seven static arms, in the paper's Table 2 order."""

CLOSED_LOOP_POLICIES: Mapping[str, PipelineEntry] = PIPELINES
"""The closed-loop pipelines (the pipeline table, live), in the paper's Table 4 order."""

# The static arms that are not pipelines; a pipeline's label is its entry's in the table (the
# static arms critic_core, full_trace and ect share their pipeline's name and label).
_STATIC_LABELS: dict[str, str] = {
    "completion_token": "Completion token",
    "self_check": "Self-check",
    "heuristic": "Heuristic",
    "postconditions": "Postcond. oracle (non-deployable)",
}


class _Labels(Mapping[str, str]):
    """Every policy's label: the static arms' above, each pipeline's from the table (live)."""

    def __getitem__(self, policy: str) -> str:
        entry = PIPELINES.get(policy)
        return entry.label if entry is not None else _STATIC_LABELS[policy]

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(_STATIC_LABELS), **dict.fromkeys(PIPELINES)})

    def __len__(self) -> int:
        return len({*_STATIC_LABELS, *PIPELINES})


POLICY_LABELS: Mapping[str, str] = _Labels()
"""Each policy's label in the tables and the report."""


@dataclass(frozen=True)
class ProviderInfo(Record):
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


@dataclass(frozen=True, slots=True, kw_only=True)
class RateInterval(Record):
    """A rate in percent with its task-cluster bootstrap interval."""

    rate_pct: float
    ci_pct: tuple[float, float]

    @classmethod
    def of(cls, res: BootstrapResult) -> RateInterval:
        return cls(rate_pct=rnd(res.estimate * 100),
                   ci_pct=(rnd(res.lo * 100), rnd(res.hi * 100)))


@dataclass(frozen=True, slots=True, kw_only=True)
class BootstrapInfo(Record):
    """How a paired difference's interval was drawn."""

    replicates: int
    clusters: int
    cluster: str
    interval: str
    confidence: float
    seed: int
    label: str

    @classmethod
    def of(cls, res: BootstrapResult, *, cluster: str) -> BootstrapInfo:
        return cls(replicates=res.replicates, clusters=res.n_clusters, cluster=cluster,
                   interval="percentile", confidence=res.confidence, seed=res.seed,
                   label=res.label)


def rnd(x: float, digits: int = 10) -> float:
    """Round to ``digits`` significant digits so results.json carries no float noise."""
    if not math.isfinite(x):
        raise AnalysisError(f"non-finite figure {x!r}")
    return float(f"{x:.{digits}g}") + 0.0  # + 0.0 turns -0.0 into 0.0
