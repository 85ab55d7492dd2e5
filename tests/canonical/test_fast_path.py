"""The standard-library fast path of canonical_bytes must give exactly rfc8785's bytes."""

from __future__ import annotations

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.canonical import canonical_bytes
from runner.errors import FormatError

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
_values = st.recursive(
    _scalars,
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(), c, max_size=4)),
    max_leaves=30,
)


def _reference(obj: object) -> bytes | None:
    try:
        return rfc8785.dumps(obj)
    except rfc8785.CanonicalizationError:
        return None


def _ours(obj: object) -> bytes | None:
    try:
        return canonical_bytes(obj)
    except FormatError:
        return None


@settings(max_examples=400, deadline=None, derandomize=True)
@given(_values)
def test_fast_path_equals_rfc8785(obj: object) -> None:
    assert _ours(obj) == _reference(obj)


def test_fast_path_edge_cases_equal_rfc8785() -> None:
    cases = [
        {"\u007f": "\u0000\u001f\u2028\u2029\"\\/"},
        {"b": 1, "a": [True, False, None], "": {"é": "\ue000"}},
        {"\ue000": 1, "\uffff": 2, "\U0001f600": 3, "z": 4},  # UTF-16 order differs here
        [2**53 - 1, -(2**53 - 1)],
        ["\ud800"],  # a lone surrogate: both refuse
        [2**53],  # outside the safe range: both refuse
    ]
    for obj in cases:
        assert _ours(obj) == _reference(obj), obj
