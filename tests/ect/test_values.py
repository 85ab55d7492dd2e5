"""The one comparison of a claimed value with the value it should be (docs/formats.md §3:
``tolerance.abs`` applies to numbers only; lists and strings compare exactly)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.canonical import canonical_bytes
from runner.ect import values_match

SAFE = 2**53 - 1  # the canonical form's integer domain


@pytest.mark.parametrize(("claimed", "reference", "tolerance", "expected"), [
    (6, 5, 1, True),          # numbers: within the absolute tolerance
    (7, 5, 1, False),
    (5.0, 5, 0, True),        # numerically equal
    (0.1 + 0.2, 0.3, 0, False),
    ([6, 700], [5, 700], 1, False),   # lists: exactly, whatever the tolerance
    ([5, 700], [5, 700], 1, True),
    ([5.0], [5], 0, True),    # ...as JSON values: 5.0 and 5 are the same number
    ([5], [5, 5], 0, False),
    ("6", 5, 10, False),      # a string is never a number
    ("a", "a", 0, True),
    (True, 1, 1, False),      # a boolean is never a number
    ([True], [1], 0, False),
    (False, False, 0, True),
    (None, None, 0, True),
    (None, 0, 1, False),
    ({"a": [1, "x"]}, {"a": [1.0, "x"]}, 0, True),
    ({"a": 1}, {"a": 1, "b": 2}, 0, False),
    ([2**60 + 1], [2**60], 0, False),  # beyond the canonical form's integers: still an answer
    (float("nan"), float("nan"), 1, False),  # JSON has no non-finite numbers
    (float("inf"), float("inf"), 0, False),
])
def test_semantics(claimed: Any, reference: Any, tolerance: int, expected: bool) -> None:
    assert values_match(claimed, reference, tolerance=tolerance) is expected


def test_tolerance_is_around_the_exact_result() -> None:
    exact = Fraction(27265, 41250)  # replay's exact rational; 27265 / 41250 is its rounding
    assert values_match(0.661, 27265 / 41250, exact, 0.001)
    assert not values_match(0.662, 27265 / 41250, exact, 0.0001)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json, _json)
def test_without_tolerance_it_is_equality_of_canonical_encodings(a: Any, b: Any) -> None:
    # So the verifier's replay check, which compared canonical bytes, decides as before.
    assert values_match(a, b) is (canonical_bytes(a) == canonical_bytes(b))
    assert values_match(a, a)
