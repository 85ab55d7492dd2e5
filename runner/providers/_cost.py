"""Token prices: usage × a price table from the study spec (docs/providers.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runner.errors import FormatError

if TYPE_CHECKING:
    from runner.providers._types import Usage

__all__ = ["PriceTable"]


@dataclass(frozen=True)
class PriceTable:
    """US dollars per million input and output tokens."""

    input_per_mtok: float
    output_per_mtok: float

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

    def to_json(self) -> dict[str, Any]:
        return {"input_per_mtok": self.input_per_mtok, "output_per_mtok": self.output_per_mtok}

    @classmethod
    def from_json(cls, obj: Any) -> PriceTable:
        if not isinstance(obj, dict) or set(obj) != {"input_per_mtok", "output_per_mtok"}:
            raise FormatError("price table: expected exactly input_per_mtok and output_per_mtok")
        try:
            return cls(obj["input_per_mtok"], obj["output_per_mtok"])
        except (TypeError, ValueError) as e:
            raise FormatError(f"price table: {e}") from e
