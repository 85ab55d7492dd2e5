"""The one comparison of a claimed value with the value it should be (docs/formats.md).

``tolerance.abs`` applies to numbers only; lists and strings compare exactly. The verifier's
replay check (:mod:`runner.ect._verifier`), the study's outcome scoring against the gold answer
(:mod:`runner.loop`) and the static postconditions arm (:mod:`runner.policies`) all call
:func:`values_match`, so they cannot disagree about what "equal within tolerance" means. It is
the wire format's definition of equality, not the verifier's decision: scoring still never
calls the verifier.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TypeGuard

__all__ = ["values_match"]


def _number(v: object) -> TypeGuard[int | float]:
    """A finite JSON number (a boolean is never one)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def values_match(
    claimed: object, replayed: object, exact: Fraction | None = None, tolerance: int | float = 0
) -> bool:
    """Whether a claimed value matches a replayed (or gold) one (docs/formats.md §3,
    ``tolerance.abs``).

    The one comparison of a claimed value with the value it should be: the verifier's replay
    check, the study's scoring against gold and the static postconditions arm all call it.
    ``tolerance.abs`` applies to numbers only: numbers match when numerically equal, or within
    ``tolerance`` of the exact rational result ``exact`` (default: ``replayed`` itself; computed
    exactly, no float rounding). Everything else (strings, booleans, null, lists, objects) must
    be equal as JSON values, which is what equal canonical (RFC 8785) encodings mean: a list
    matches only a list of the same length whose elements are equal exactly, with no tolerance.
    A boolean is never a number; a non-finite number (JSON has none) matches nothing.
    """
    if _number(claimed) and _number(replayed):
        c = Fraction(claimed)
        if c == Fraction(replayed):
            return True
        target = exact if exact is not None else Fraction(replayed)
        return abs(c - target) <= Fraction(tolerance)
    return _same_json(claimed, replayed)


def _same_json(a: object, b: object) -> bool:
    """Equal as JSON values (equal canonical encodings), without encoding: total, so a value
    the canonical form cannot hold (an integer beyond 2**53) is simply unequal or equal."""
    if _is_number(a) or _is_number(b):
        return _number(a) and _number(b) and Fraction(a) == Fraction(b)
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return False
