"""Token prices: usage × a price table from the study spec (docs/providers.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runner.canonical import JsonRecord

if TYPE_CHECKING:
    from runner.providers._types import Usage

__all__ = ["PriceTable"]


@dataclass(frozen=True)
class PriceTable(JsonRecord):
    """US dollars per million input and output tokens."""

    input_per_mtok: float
    output_per_mtok: float

    _path = "price table"

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite non-negative number")

    def cost_usd(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok
        ) / 1_000_000
