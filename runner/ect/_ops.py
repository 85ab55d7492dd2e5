"""The closed transform language's vocabulary: op names and exact parameter schemas
(docs/formats.md §7).

This module knows nothing about receipts; it only says which ``(op, params)`` pairs are
well formed. Replay lives in :mod:`runner.ect._transforms`.
"""

from __future__ import annotations

import re
from datetime import date
from functools import lru_cache
from typing import Any

from runner.ect._errors import ReplayError

__all__ = ["OPS", "check_params", "is_iso_date"]

_DATE_RE = re.compile(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")

# op -> the exact set of parameter names it takes. Part of the wire format (ect.contract/1).
OPS: dict[str, frozenset[str]] = {
    "identity": frozenset(),
    "collect": frozenset(),
    "sum": frozenset(),
    "mean": frozenset(),
    "count": frozenset(),
    "min": frozenset(),
    "max": frozenset(),
    "argmax": frozenset(),
    "argmin": frozenset(),
    "diff": frozenset({"a", "b"}),
    "ratio": frozenset({"a", "b"}),
    "sort": frozenset({"order"}),
    "union": frozenset(),
    "top_k": frozenset({"k", "order"}),
    "grouped_sum_top_k": frozenset({"k", "order"}),
    "all_null": frozenset(),
    "window_sum_diff": frozenset({"a", "b"}),
}


def is_iso_date(value: object) -> bool:
    """True for a ``YYYY-MM-DD`` string naming a real calendar date."""
    if not isinstance(value, str):
        return False
    return _is_iso_date(value)


@lru_cache(maxsize=4096)
def _is_iso_date(value: str) -> bool:
    if _DATE_RE.match(value) is None:
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _bad(op: str, problem: str) -> ReplayError:
    return ReplayError("transform.bad_params", f"op {op!r}: {problem}")


def _window(op: str, name: str, w: Any) -> tuple[str, str]:
    if not isinstance(w, dict) or set(w) != {"start", "end"}:
        raise _bad(op, f"param {name!r} must be an object with exactly 'start' and 'end'")
    start, end = w["start"], w["end"]
    if not (is_iso_date(start) and is_iso_date(end)):
        raise _bad(op, f"param {name!r} start/end must be ISO dates")
    if start > end:
        raise _bad(op, f"param {name!r} start is after end")
    return start, end


def check_params(op: object, params: object) -> None:
    """Check that ``op`` is in the closed language and ``params`` are exactly its parameters.

    Raises:
        ReplayError: code ``transform.unknown_op`` or ``transform.bad_params``.
    """
    if not isinstance(op, str) or op not in OPS:
        raise ReplayError("transform.unknown_op", f"op {op!r} is not in the closed language")
    if not isinstance(params, dict):
        raise _bad(op, "params must be an object")
    expected = OPS[op]
    keys = set(params)
    if keys != expected:
        extra = sorted(keys - expected)
        missing = sorted(expected - keys)
        parts = []
        if extra:
            parts.append(f"unknown param(s) {extra}")
        if missing:
            parts.append(f"missing param(s) {missing}")
        raise _bad(op, "; ".join(parts))
    if op in ("diff", "ratio"):
        a, b = params["a"], params["b"]
        if not (is_iso_date(a) and is_iso_date(b)):
            raise _bad(op, "params 'a' and 'b' must be ISO dates")
        if a == b:
            raise _bad(op, "params 'a' and 'b' must differ")
    elif op == "window_sum_diff":
        a0, a1 = _window(op, "a", params["a"])
        b0, b1 = _window(op, "b", params["b"])
        if not (a1 < b0 or b1 < a0):
            raise _bad(op, "windows 'a' and 'b' overlap")
    if "order" in expected and params["order"] not in ("asc", "desc"):
        raise _bad(op, "param 'order' must be 'asc' or 'desc'")
    if "k" in expected:
        k = params["k"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise _bad(op, "param 'k' must be an integer >= 1")
