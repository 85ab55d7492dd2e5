"""The closed transform language (docs/formats.md §7): each op on normal, tie and empty inputs."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from runner.ect import (
    OPS,
    ReplayError,
    Transform,
    check_transform,
    replay,
    replay_exact,
    values_match,
)
from tests.ect.builders import receipt

D1, D2, D3, D4 = "2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"


def R(
    n: int, value: Any, entity: str | None = "S01", date: str | None = D1, attribute: str = "units"
):
    return receipt(f"r-{n:04d}", value, entity=entity, date=date, attribute=attribute)


def T(op: str, **params: Any) -> Transform:
    return Transform(op, params)


def stores(*pairs: tuple[str, Any]) -> list:
    return [R(i + 1, v, entity=e) for i, (e, v) in enumerate(pairs)]


def days(*values: Any, entity: str = "S01") -> list:
    ds = [D1, D2, D3, D4]
    return [R(i + 1, v, entity=entity, date=ds[i]) for i, v in enumerate(values)]


def code_of(transform: Transform, receipts: list) -> str:
    with pytest.raises(ReplayError) as info:
        replay(transform, receipts)
    return info.value.code


# (op, params, normal inputs, normal result, tie inputs, tie result, empty result or error code)
CASES: list[tuple[str, dict[str, Any], Any, Any, Any, Any, Any]] = [
    ("identity", {}, [R(1, 7)], 7, [R(1, [2, 2])], [2, 2], "replay.arity"),
    ("collect", {}, days(3, 1, 2), [3, 1, 2], stores(("S02", 5), ("S01", 5)), [5, 5], []),
    ("sum", {}, days(3, 1, 2), 6, days(2, 2), 4, 0),
    ("mean", {}, days(1, 2), 1.5, days(4, 4), 4, "replay.empty_input"),
    ("count", {}, days(1, 2, 9), 3, days(1, 1), 2, 0),
    ("min", {}, days(3, 1, 2), 1, days(1, 1.0), 1, "replay.empty_input"),
    ("max", {}, days(3, 1, 2), 3, days(3, 3), 3, "replay.empty_input"),
    (
        "argmax",
        {},
        stores(("S01", 1), ("S02", 9)),
        "S02",
        stores(("S03", 9), ("S02", 9)),
        "S02",
        "replay.empty_input",
    ),
    (
        "argmin",
        {},
        stores(("S01", 1), ("S02", 9)),
        "S01",
        stores(("S03", 1), ("S02", 1)),
        "S02",
        "replay.empty_input",
    ),
    ("diff", {"a": D2, "b": D1}, days(10, 4), -6, days(4, 4), 0, "replay.missing_input"),
    ("ratio", {"a": D2, "b": D1}, days(8, 4), 0.5, days(4, 4), 1, "replay.missing_input"),
    (
        "sort",
        {"order": "asc"},
        stores(("S01", 3), ("S02", 1)),
        ["S02", "S01"],
        stores(("S03", 1), ("S02", 1), ("S01", 0)),
        ["S01", "S02", "S03"],
        [],
    ),
    (
        "sort",
        {"order": "desc"},
        stores(("S01", 3), ("S02", 1)),
        ["S01", "S02"],
        stores(("S03", 1), ("S02", 1), ("S01", 0)),
        ["S02", "S03", "S01"],
        [],
    ),
    (
        "union",
        {},
        [R(1, ["b", "a"]), R(2, "c", date=D2)],
        ["a", "b", "c"],
        [R(1, [2, 1]), R(2, 2.0, date=D2)],
        [1, 2],
        [],
    ),
    (
        "top_k",
        {"k": 2, "order": "desc"},
        stores(("S01", 3), ("S02", 1), ("S03", 2)),
        ["S01", "S03"],
        stores(("S03", 5), ("S01", 5), ("S02", 5)),
        ["S01", "S02"],
        "replay.arity",
    ),
    (
        "top_k",
        {"k": 1, "order": "asc"},
        stores(("S01", 3), ("S02", 1)),
        ["S02"],
        stores(("S09", 1), ("S02", 1)),
        ["S02"],
        "replay.arity",
    ),
    (
        "all_null",
        {},
        [R(1, None), R(2, None, date=D2)],
        None,
        [R(1, None)],
        None,
        "replay.empty_input",
    ),
    (
        "window_sum_diff",
        {"a": {"start": D3, "end": D4}, "b": {"start": D1, "end": D2}},
        days(1, 2, 10, 20),
        27,
        days(5, 5, 5, 5),
        0,
        "replay.missing_input",
    ),
]


def _check(transform: Transform, inputs: list, expected: Any) -> None:
    got = replay(transform, inputs)
    assert got == expected
    assert type(got) is type(expected)  # integers stay integers; non-integral results are floats


@pytest.mark.parametrize(("op", "params", "normal", "result", "tie", "tie_result", "empty"), CASES)
def test_op_normal_tie_empty(op, params, normal, result, tie, tie_result, empty) -> None:
    t = T(op, **params)
    _check(t, normal, result)
    _check(t, tie, tie_result)
    if isinstance(empty, str) and empty.startswith("replay."):
        assert code_of(t, []) == empty
    else:
        _check(t, [], empty)


def test_cases_cover_every_op() -> None:
    assert {c[0] for c in CASES} | {"grouped_sum_top_k"} == set(OPS)


def _membership(n: int, child: str, parent: Any) -> Any:
    return R(n, parent, entity=child, date=None, attribute="parent")


def test_grouped_sum_top_k_normal_tie_empty() -> None:
    t = T("grouped_sum_top_k", k=2, order="desc")
    base = [
        _membership(1, "S01", "R1"),
        _membership(2, "S02", "R1"),
        _membership(3, "S03", "R2"),
        _membership(4, "S04", "R3"),
        R(5, 10, entity="S01"),
        R(6, 5, entity="S02"),
        R(7, 12, entity="S03"),
        R(8, 14, entity="S04"),
    ]
    assert replay(t, base) == ["R1", "R3"]  # 15, 14, 12
    tie = [*base[:7], R(8, 15, entity="S04")]  # R1 = R3 = 15: smallest id first
    assert replay(t, tie) == ["R1", "R3"]
    assert replay(T("grouped_sum_top_k", k=3, order="asc"), base) == ["R2", "R3", "R1"]
    assert code_of(t, []) == "replay.arity"
    assert code_of(t, [*base, R(9, 1, entity="S09")]) == "replay.missing_input"
    assert code_of(t, [*base, _membership(9, "S05", "R4")]) == "replay.unused_input"
    assert code_of(t, [*base, _membership(9, "S01", "R2")]) == "replay.ambiguous_input"
    assert code_of(t, [_membership(1, "S01", 5), R(2, 1)]) == "replay.type_error"
    assert code_of(t, [_membership(1, "S01", None), R(2, 1)]) == "replay.null_input"


@pytest.mark.parametrize("op", sorted(set(OPS) - {"all_null"}))
def test_null_input_is_rejected_by_every_op_but_all_null(op: str) -> None:
    params: dict[str, Any] = {
        "diff": {"a": D2, "b": D1},
        "ratio": {"a": D2, "b": D1},
        "sort": {"order": "asc"},
        "top_k": {"k": 1, "order": "asc"},
        "grouped_sum_top_k": {"k": 1, "order": "asc"},
        "window_sum_diff": {"a": {"start": D2, "end": D2}, "b": {"start": D1, "end": D1}},
    }.get(op, {})
    assert (
        code_of(T(op, **params), days(None, 4)[:1] if op == "identity" else days(1, None))
        == "replay.null_input"
    )


@pytest.mark.parametrize(
    ("op", "params", "code"),
    [
        ("eval", {}, "transform.unknown_op"),
        ("sum", {"x": 1}, "transform.bad_params"),
        ("diff", {"a": D1}, "transform.bad_params"),
        ("diff", {"a": D1, "b": D1}, "transform.bad_params"),
        ("diff", {"a": "yesterday", "b": D1}, "transform.bad_params"),
        ("sort", {"order": "up"}, "transform.bad_params"),
        ("top_k", {"k": 0, "order": "asc"}, "transform.bad_params"),
        ("top_k", {"k": True, "order": "asc"}, "transform.bad_params"),
        ("top_k", {"k": 1.0, "order": "asc"}, "transform.bad_params"),
        (
            "window_sum_diff",
            {"a": {"start": D1, "end": D2}, "b": {"start": D2, "end": D3}},
            "transform.bad_params",
        ),
        (
            "window_sum_diff",
            {"a": {"start": D2, "end": D1}, "b": {"start": D3, "end": D4}},
            "transform.bad_params",
        ),
        ("window_sum_diff", {"a": [D1, D2], "b": {"start": D3, "end": D4}}, "transform.bad_params"),
    ],
)
def test_params_are_validated_exactly(op: str, params: dict[str, Any], code: str) -> None:
    with pytest.raises(ReplayError) as info:
        check_transform(T(op, **params))
    assert info.value.code == code
    assert code_of(T(op, **params), days(1, 2)) == code


def test_exact_arithmetic() -> None:
    value, exact = replay_exact(T("mean"), days(1, 1, 2))
    assert exact == Fraction(4, 3) and value == 4 / 3
    assert replay(T("sum"), days(0.1, 0.2)) == float(Fraction(0.1) + Fraction(0.2))
    assert replay(T("ratio", a=D2, b=D1), days(3, 9)) == 3
    assert replay(T("sum"), days(2**52, 2**52)) == float(2**53)  # outside the safe int range
    assert values_match(0.661, 27265 / 41250, Fraction(27265, 41250), 0.001)
    assert not values_match(0.662, 27265 / 41250, Fraction(27265, 41250), 0.0001)
    assert values_match(3.0, 3, Fraction(3), 0)
    assert not values_match("3", 3, Fraction(3), 10)
    assert values_match(["a"], ["a"], None, 0) and not values_match(["a"], ["b"], None, 100)
    assert values_match(None, None, None, 0) and not values_match(None, 0, Fraction(0), 1)


@pytest.mark.parametrize(
    ("transform", "inputs", "code"),
    [
        (T("sum"), days(1, "2"), "replay.type_error"),
        (T("sum"), [R(1, [1, 2])], "replay.type_error"),
        (T("collect"), [R(1, [1, 2])], "replay.type_error"),
        (T("union"), [R(1, ["a", 1])], "replay.type_error"),
        (T("union"), [R(1, ["a", None])], "replay.null_input"),
        (T("argmax"), [R(1, 3, entity=None)], "replay.type_error"),
        (T("ratio", a=D2, b=D1), days(0, 5), "replay.division_by_zero"),
        (
            T("diff", a=D2, b=D1),
            [*days(1, 2), R(9, 3, entity="S02", date=D2)],
            "replay.ambiguous_input",
        ),
        (T("diff", a=D2, b=D1), days(1, 2, 3), "replay.unused_input"),
        (
            T("window_sum_diff", a={"start": D2, "end": D2}, b={"start": D1, "end": D1}),
            days(1, 2, 3),
            "replay.unused_input",
        ),
        (T("all_null"), [R(1, None), R(2, 0, date=D2)], "replay.not_null"),
        (T("top_k", k=3, order="asc"), stores(("S01", 1), ("S02", 2)), "replay.arity"),
        (T("sort", order="asc"), days(1, 2), "replay.ambiguous_input"),
    ],
)
def test_replay_failures(transform: Transform, inputs: list, code: str) -> None:
    assert code_of(transform, inputs) == code


def test_replay_is_independent_of_receipt_order() -> None:
    rs = stores(("S03", 5), ("S01", 5), ("S02", 7), ("S04", 1))
    for t in (
        T("sum"),
        T("sort", order="desc"),
        T("top_k", k=2, order="asc"),
        T("argmax"),
        T("collect"),
    ):
        assert replay(t, rs) == replay(t, list(reversed(rs)))
