"""Exact replay of the closed transform language over cited receipts (docs/formats.md §7).

Arithmetic is exact: every number is lifted to a :class:`fractions.Fraction` (a float converts
exactly), sums, means, differences and ratios are computed as rationals, and the result is
written back as an ``int`` when it is integral (and within the JSON-safe range) and otherwise as
the correctly rounded ``float``. A claimed number matches when it equals that value or lies
within the slot's absolute tolerance of the exact rational (see
:func:`runner.ect._values.values_match`). So
integers stay integers, the order of summation never matters, and ``mean([1, 2]) == 1.5``.

Every op that orders entities breaks ties by the smallest entity id (code point order); a
``null`` receipt value fed to any op except ``all_null`` is ``replay.null_input``. Every cited
receipt must take part in the computation (``replay.unused_input`` otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from runner.ect._errors import ReplayError
from runner.ect._ops import check_params
from runner.ect._wire import MAX_SAFE_INT, Receipt, Scalar, Transform, Value

__all__ = ["check_transform", "replay", "replay_exact"]


def check_transform(transform: Transform) -> None:
    """Raise :class:`ReplayError` (``transform.unknown_op`` / ``transform.bad_params``) unless
    ``transform`` is an op of the closed language with exactly its parameters."""
    check_params(transform.op, transform.params)


# --- helpers ---------------------------------------------------------------------------------


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _frac(r: Receipt) -> Fraction:
    v = r.value
    if not _is_number(v):
        raise ReplayError(
            "replay.type_error",
            f"receipt {r.receipt_id} value is not a number ({type(v).__name__})",
        )
    return Fraction(v)  # type: ignore[arg-type]


def _out(x: Fraction) -> int | float:
    if x.denominator == 1 and -MAX_SAFE_INT <= x.numerator <= MAX_SAFE_INT:
        return int(x.numerator)
    return float(x)


def _entity(r: Receipt) -> str:
    if r.scope.entity is None:
        raise ReplayError("replay.type_error", f"receipt {r.receipt_id} has no entity")
    return r.scope.entity


def _by_entity(receipts: Sequence[Receipt]) -> list[tuple[str, Fraction]]:
    seen: dict[str, str] = {}
    out = []
    for r in receipts:
        ent = _entity(r)
        if ent in seen:
            raise ReplayError(
                "replay.ambiguous_input",
                f"receipts {seen[ent]} and {r.receipt_id} both give entity {ent!r}",
            )
        seen[ent] = r.receipt_id
        out.append((ent, _frac(r)))
    return out


def _rank(pairs: list[tuple[str, Fraction]], order: str) -> list[Scalar]:
    # Value order asc/desc; ties always by the smallest id first.
    if order == "desc":
        pairs = sorted(pairs, key=lambda p: (-p[1], p[0]))
    else:
        pairs = sorted(pairs, key=lambda p: (p[1], p[0]))
    return [p[0] for p in pairs]


def _nonempty(op: str, receipts: Sequence[Receipt]) -> None:
    if not receipts:
        raise ReplayError("replay.empty_input", f"{op} needs at least one receipt")


def _one_dated(receipts: Sequence[Receipt], day: str, name: str) -> Receipt:
    hits = [r for r in receipts if r.scope.date == day]
    if not hits:
        raise ReplayError("replay.missing_input", f"no cited receipt dated {day} (param {name!r})")
    if len(hits) > 1:
        ids = ", ".join(r.receipt_id for r in hits)
        raise ReplayError("replay.ambiguous_input", f"several receipts dated {day}: {ids}")
    return hits[0]


def _unused(receipts: Sequence[Receipt], used: set[str]) -> None:
    extra = [r.receipt_id for r in receipts if r.receipt_id not in used]
    if extra:
        raise ReplayError(
            "replay.unused_input",
            f"cited receipt(s) take no part in the replay: {', '.join(extra)}",
        )


# --- the ops ---------------------------------------------------------------------------------
# Each returns (value, exact) where exact is the rational for numeric results, else None.

_Result = tuple[Value, Fraction | None]


def _identity(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    if len(rs) != 1:
        raise ReplayError("replay.arity", f"identity needs exactly one receipt, got {len(rs)}")
    v = rs[0].value
    if _is_number(v):
        return v, Fraction(v)  # type: ignore[arg-type]
    return (list(v) if isinstance(v, list) else v), None


def _collect(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    for r in rs:
        if isinstance(r.value, list):
            raise ReplayError(
                "replay.type_error", f"collect: receipt {r.receipt_id} value is a list"
            )
    ordered = sorted(rs, key=lambda r: (r.scope.date or "", r.scope.entity or "", r.receipt_id))
    return [r.value for r in ordered], None  # type: ignore[misc]


def _sum(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    values = [r.value for r in rs]
    if all(type(v) is int for v in values):
        total = Fraction(sum(values))  # type: ignore[arg-type]  # integers: exact already
    else:
        total = sum((_frac(r) for r in rs), Fraction(0))
    return _out(total), total


def _mean(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    _nonempty("mean", rs)
    m = sum((_frac(r) for r in rs), Fraction(0)) / len(rs)
    return _out(m), m


def _count(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    return len(rs), Fraction(len(rs))


def _min(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    _nonempty("min", rs)
    m = min(_frac(r) for r in rs)
    return _out(m), m


def _max(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    _nonempty("max", rs)
    m = max(_frac(r) for r in rs)
    return _out(m), m


def _argmax(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    _nonempty("argmax", rs)
    return _rank(_by_entity(rs), "desc")[0], None


def _argmin(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    _nonempty("argmin", rs)
    return _rank(_by_entity(rs), "asc")[0], None


def _diff_ratio(rs: Sequence[Receipt], p: dict[str, Any], op: str) -> _Result:
    ra = _one_dated(rs, p["a"], "a")
    rb = _one_dated(rs, p["b"], "b")
    _unused(rs, {ra.receipt_id, rb.receipt_id})
    a, b = _frac(ra), _frac(rb)
    if op == "diff":
        x = a - b
    else:
        if b == 0:
            raise ReplayError("replay.division_by_zero", f"ratio: value at {p['b']} is zero")
        x = a / b
    return _out(x), x


def _diff(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    return _diff_ratio(rs, p, "diff")


def _ratio(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    return _diff_ratio(rs, p, "ratio")


def _sort(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    return _rank(_by_entity(rs), p["order"]), None


def _union(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    items: list[Any] = []
    for r in rs:
        items.extend(r.value if isinstance(r.value, list) else [r.value])
    if any(v is None for v in items):
        raise ReplayError("replay.null_input", "union: a cited list holds null")
    if all(isinstance(v, str) for v in items):
        return sorted(set(items)), None
    if all(_is_number(v) for v in items):
        return [_out(x) for x in sorted({Fraction(v) for v in items})], None
    raise ReplayError("replay.type_error", "union: values mix numbers and strings")


def _top_k(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    ranked = _rank(_by_entity(rs), p["order"])
    if len(ranked) < p["k"]:
        raise ReplayError(
            "replay.arity", f"top_k needs at least k={p['k']} entities, got {len(ranked)}"
        )
    return ranked[: p["k"]], None


def _grouped_sum_top_k(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    parent_of: dict[str, str] = {}
    metrics: list[Receipt] = []
    for r in rs:
        if r.scope.attribute != "parent":
            metrics.append(r)
            continue
        child = _entity(r)
        if not isinstance(r.value, str) or not r.value:
            raise ReplayError(
                "replay.type_error", f"membership receipt {r.receipt_id} value is not an entity id"
            )
        if child in parent_of:
            raise ReplayError(
                "replay.ambiguous_input", f"entity {child!r} has more than one membership receipt"
            )
        parent_of[child] = r.value
    groups: dict[str, Fraction] = {}
    used_children: set[str] = set()
    for r in metrics:
        child = _entity(r)
        if child not in parent_of:
            raise ReplayError(
                "replay.missing_input",
                f"no membership receipt for entity {child!r} ({r.receipt_id})",
            )
        used_children.add(child)
        parent = parent_of[child]
        groups[parent] = groups.get(parent, Fraction(0)) + _frac(r)
    idle = sorted(set(parent_of) - used_children)
    if idle:
        raise ReplayError(
            "replay.unused_input", f"membership receipt(s) for entities without metrics: {idle}"
        )
    ranked = _rank(list(groups.items()), p["order"])
    if len(ranked) < p["k"]:
        raise ReplayError(
            "replay.arity", f"grouped_sum_top_k needs at least k={p['k']} groups, got {len(ranked)}"
        )
    return ranked[: p["k"]], None


def _all_null(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    _nonempty("all_null", rs)
    bad = [r.receipt_id for r in rs if r.value is not None]
    if bad:
        raise ReplayError("replay.not_null", f"all_null: receipt(s) with a value: {', '.join(bad)}")
    return None, None


def _window_sum_diff(rs: Sequence[Receipt], p: dict[str, Any]) -> _Result:
    wa, wb = p["a"], p["b"]
    in_a = [r for r in rs if r.scope.date is not None and wa["start"] <= r.scope.date <= wa["end"]]
    in_b = [r for r in rs if r.scope.date is not None and wb["start"] <= r.scope.date <= wb["end"]]
    if not in_a:
        raise ReplayError("replay.missing_input", "window_sum_diff: no cited receipt in window 'a'")
    if not in_b:
        raise ReplayError("replay.missing_input", "window_sum_diff: no cited receipt in window 'b'")
    _unused(rs, {r.receipt_id for r in in_a} | {r.receipt_id for r in in_b})
    x = sum((_frac(r) for r in in_a), Fraction(0)) - sum((_frac(r) for r in in_b), Fraction(0))
    return _out(x), x


_OPS = {
    "identity": _identity,
    "collect": _collect,
    "sum": _sum,
    "mean": _mean,
    "count": _count,
    "min": _min,
    "max": _max,
    "argmax": _argmax,
    "argmin": _argmin,
    "diff": _diff,
    "ratio": _ratio,
    "sort": _sort,
    "union": _union,
    "top_k": _top_k,
    "grouped_sum_top_k": _grouped_sum_top_k,
    "all_null": _all_null,
    "window_sum_diff": _window_sum_diff,
}


def replay_exact(
    transform: Transform, receipts: Sequence[Receipt]
) -> tuple[Value, Fraction | None]:
    """Like :func:`replay`, also returning the exact rational of a numeric result."""
    check_params(transform.op, transform.params)
    if transform.op != "all_null":
        for r in receipts:
            if r.value is None:
                raise ReplayError("replay.null_input", f"receipt {r.receipt_id} value is null")
    return _OPS[transform.op](receipts, transform.params)


def replay(transform: Transform, receipts: Sequence[Receipt]) -> Value:
    """Recompute a claim's value from the cited receipts, exactly.

    Raises:
        ReplayError: with ``code`` a ``transform.*`` or ``replay.*`` reason code.
    """
    return replay_exact(transform, receipts)[0]


