"""A counter-based sha256 stream: deterministic across processes, platforms and Python versions.

``random.Random`` is avoided on purpose: its algorithms for ``randint``/``shuffle`` are not
promised to stay the same across Python versions, and a world must be byte-identical forever.
Every draw is ``sha256(seed || u64be(counter))``; a stream is named by labels, so adding a new
draw in one place never shifts the numbers drawn somewhere else.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["Stream"]

T = TypeVar("T")


class Stream:
    """Deterministic integer draws from ``sha256`` of the labels and a counter."""

    __slots__ = ("_counter", "_seed")

    def __init__(self, *labels: str) -> None:
        self._seed = hashlib.sha256("\x1f".join(("ect.world/1", *labels)).encode("utf-8")).digest()
        self._counter = 0

    def u64(self) -> int:
        block = hashlib.sha256(self._seed + self._counter.to_bytes(8, "big")).digest()
        self._counter += 1
        return int.from_bytes(block[:8], "big")

    def randint(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]`` (modulo bias below 2**-40 for the spans used here)."""
        if hi < lo:
            raise ValueError("empty range")
        return lo + self.u64() % (hi - lo + 1)

    def chance(self, numerator: int, denominator: int) -> bool:
        return self.u64() % denominator < numerator

    def choice(self, items: Sequence[T]) -> T:
        return items[self.randint(0, len(items) - 1)]

    def shuffled(self, items: Sequence[T]) -> list[T]:
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = self.randint(0, i)
            out[i], out[j] = out[j], out[i]
        return out
