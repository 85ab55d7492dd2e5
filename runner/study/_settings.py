"""What a run is started with: :class:`RunSettings` (the store, the provider, concurrency,
ceilings, executor) and the pacing of its provider attempts, :class:`ThrottleSettings`
(docs/study.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runner.canonical import JsonRecord
from runner.providers import Throttle
from runner.study._preflight import ProviderChoice
from runner.study._spec import StudySpec

if TYPE_CHECKING:

    pass

__all__ = ["RunSettings", "ThrottleSettings", "throttle_settings"]


@dataclass(frozen=True)
class RunSettings:
    spec_path: Path
    store_path: Path
    provider: ProviderChoice = field(default_factory=ProviderChoice)
    concurrency: int = 1
    limit: int | None = None
    max_cost_usd: float | None = None
    max_calls: int | None = None
    sandbox_backend: str | None = None
    # A signed checkpoint after every committed cell: deleting committed cells is then always
    # detectable against the external checkpoint (docs/store.md), at ~1 ms a cell.
    checkpoint_every: int = 1
    # Where sandboxed tool calls run: "local" (this machine) or "ray" (a Ray cluster at
    # ray_address, default $RAY_ADDRESS or "auto"); never part of a cell's result.
    executor: str = "local"
    ray_address: str | None = None
    # The throttle (None: the spec's [provider] default; 0: off). Pacing changes no result.
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


@dataclass(frozen=True, slots=True)
class ThrottleSettings(JsonRecord):
    """The pacing of a run's provider attempts; ``None`` means no limit. The run header and the
    run summary record it (:meth:`to_json`); it changes no result, so it is not in the lock."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    def throttle(self) -> Throttle:
        """A fresh limiter with these limits."""
        return Throttle(self.requests_per_minute, self.tokens_per_minute)


def throttle_settings(settings: RunSettings, spec: StudySpec) -> ThrottleSettings:
    """The run's throttle: the settings' values, else the spec's [provider] defaults
    (0 in the settings turns a spec default off); ``None`` means no limit."""
    rpm = (spec.provider.requests_per_minute if settings.requests_per_minute is None
           else settings.requests_per_minute or None)
    tpm = (spec.provider.tokens_per_minute if settings.tokens_per_minute is None
           else settings.tokens_per_minute or None)
    return ThrottleSettings(rpm, tpm)
