"""runner.canonical: RFC 8785 golden vectors, domain-separated digests, strict parsing."""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.canonical import (
    DOMAINS,
    MAX_DEPTH,
    canonical_bytes,
    digest,
    digest_bytes,
    is_digest,
    load_strict_file,
    loads_strict,
)
from runner.errors import FormatError

# --- RFC 8785 golden vectors ----------------------------------------------------------------

# RFC 8785 §3.2.2 / §3.2.4 example (the "numbers, string, literals" object).
RFC_INPUT = (
    '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
    ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
    ' "literals": [null, true, false]}'
)
RFC_OUTPUT = (
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
).encode()

# RFC 8785 §3.2.3: property sorting by UTF-16 code units.
SORT_INPUT = {
    "\u20ac": "Euro Sign",
    "\r": "Carriage Return",
    "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One",
    "\U0001f600": "Emoji: Grinning Face",
    "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis",
}
SORT_ORDER = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]

# RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
NUMBERS = [
    (0x0000000000000000, "0"),
    (0x8000000000000000, "0"),
    (0x0000000000000001, "5e-324"),
    (0x8000000000000001, "-5e-324"),
    (0x7FEFFFFFFFFFFFFF, "1.7976931348623157e+308"),
    (0xFFEFFFFFFFFFFFFF, "-1.7976931348623157e+308"),
    (0x4340000000000000, "9007199254740992"),
    (0xC340000000000000, "-9007199254740992"),
    (0x4430000000000000, "295147905179352830000"),
    (0x44B52D02C7E14AF5, "9.999999999999997e+22"),
    (0x44B52D02C7E14AF6, "1e+23"),
    (0x44B52D02C7E14AF7, "1.0000000000000001e+23"),
    (0x444B1AE4D6E2EF4E, "999999999999999700000"),
    (0x444B1AE4D6E2EF4F, "999999999999999900000"),
    (0x444B1AE4D6E2EF50, "1e+21"),
    (0x3EB0C6F7A0B5ED8C, "9.999999999999997e-7"),
    (0x3EB0C6F7A0B5ED8D, "0.000001"),
    (0x41B3DE4355555553, "333333333.3333332"),
    (0x41B3DE4355555554, "333333333.33333325"),
    (0x41B3DE4355555555, "333333333.3333333"),
    (0x41B3DE4355555556, "333333333.3333334"),
    (0x41B3DE4355555557, "333333333.33333343"),
    (0xBECBF647612F3696, "-0.0000033333333333333333"),
    (0x43143FF3C1CB0959, "1424953923781206.2"),
]


def test_rfc8785_example_object() -> None:
    assert canonical_bytes(loads_strict(RFC_INPUT)) == RFC_OUTPUT


def test_rfc8785_property_sorting() -> None:
    out = canonical_bytes(SORT_INPUT).decode("utf-8")
    positions = [out.index(f'"{k}"' if k != "\r" else '"\\r"') for k in SORT_ORDER]
    assert positions == sorted(positions)


@pytest.mark.parametrize(("bits", "text"), NUMBERS, ids=[hex(b) for b, _ in NUMBERS])
def test_rfc8785_numbers(bits: int, text: str) -> None:
    value = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
    assert canonical_bytes(value) == text.encode()


@pytest.mark.parametrize(
    "bad",
    [
        float("nan"),
        float("inf"),
        -float("inf"),
        2**53,
        -(2**53),
        {1: "int key"},
        b"bytes",
        {"\ud800": 1},
        "\udfff",
        object(),
    ],
)
def test_canonical_bytes_rejects_unrepresentable(bad: object) -> None:
    with pytest.raises(FormatError):
        canonical_bytes(bad)


def test_integers_and_whitespace() -> None:
    assert canonical_bytes({"b": [1, -0, 2**53 - 1], "a": {"y": None, "x": True}}) == (
        b'{"a":{"x":true,"y":null},"b":[1,0,9007199254740991]}'
    )
    assert canonical_bytes(1.0) == canonical_bytes(1) == b"1"
    assert canonical_bytes("\u2028\x7f\x1f") == '"\u2028\x7f\\u001f"'.encode()


# --- digests --------------------------------------------------------------------------------


def test_digest_is_domain_newline_jcs() -> None:
    obj = {"b": 1, "a": [True, None, "x"]}
    expected = hashlib.sha256(b"ect/value/v1\n" + canonical_bytes(obj)).hexdigest()
    assert digest("ect/value/v1", obj) == "sha256:" + expected
    assert digest_bytes("ect/value/v1", canonical_bytes(obj)) == "sha256:" + expected


def test_domains_separate_digests() -> None:
    obj = {"task_id": "t", "receipts": []}
    digests = {digest(d, obj) for d in DOMAINS}  # type: ignore[arg-type]
    assert len(digests) == len(DOMAINS) == 10
    assert all(is_digest(d) for d in digests)


def test_unknown_domain_is_refused() -> None:
    with pytest.raises(ValueError):
        digest("ect/other/v1", {})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        digest_bytes("ect/value/v1 ", b"{}")


def test_digest_ignores_key_order_and_float_form() -> None:
    assert digest("ect/args/v1", {"a": 1, "b": 2}) == digest("ect/args/v1", {"b": 2, "a": 1.0})


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("sha256:" + "0" * 64, True),
        ("sha256:" + "A" * 64, False),
        ("sha256:" + "0" * 63, False),
        ("sha256:" + "0" * 64 + "\n", False),
        ("sha1:" + "0" * 64, False),
        (None, False),
    ],
)
def test_is_digest(value: object, ok: bool) -> None:
    assert is_digest(value) is ok


@settings(max_examples=60, deadline=None)
@given(
    st.recursive(
        st.one_of(
            st.none(), st.booleans(), st.integers(-(2**53) + 1, 2**53 - 1), st.text(max_size=6)
        ),
        lambda c: st.one_of(
            st.lists(c, max_size=4), st.dictionaries(st.text(max_size=4), c, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_canonical_round_trips_through_strict_parser(obj: object) -> None:
    try:
        encoded = canonical_bytes(obj)
    except FormatError:
        return  # lone surrogates in generated text are refused, as they must be
    assert loads_strict(encoded) == obj
    assert canonical_bytes(loads_strict(encoded)) == encoded


# --- strict parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"a": 1, "a": 2}', "duplicate key"),
        ('{"a": {"b": 1, "b": 1}}', "duplicate key"),
        ("[NaN]", "NaN"),
        ("[Infinity]", "Infinity"),
        ("[-Infinity]", "Infinity"),
        ("[1e400]", "not finite"),
        ("[-1e400]", "not finite"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nesting"),
        ('{"a": [1, 2', "invalid JSON"),
        ("", "invalid JSON"),
        ("[1] [2]", "invalid JSON"),
        ("\ufeff{}", "byte order mark"),
        ("[" + "9" * 5000 + "]", "invalid JSON"),
    ],
)
def test_loads_strict_rejects(text: str, fragment: str) -> None:
    with pytest.raises(FormatError) as info:
        loads_strict(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_loads_strict_rejects_bad_utf8() -> None:
    with pytest.raises(FormatError, match="not UTF-8"):
        loads_strict(b'{"a": "\xff"}')


def test_loads_strict_accepts_depth_limit_and_brackets_in_strings() -> None:
    assert loads_strict("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert loads_strict('{"a": "[[[[{{{{\\"]]]"}') == {"a": '[[[[{{{{"]]]'}


def test_load_strict_file(tmp_path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b'{"a": [1, 2.5, "z"]}')
    assert load_strict_file(path) == {"a": [1, 2.5, "z"]}
    with pytest.raises(FileNotFoundError):
        load_strict_file(tmp_path / "absent.json")
