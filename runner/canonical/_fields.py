"""Strict readers for the fields of JSON records (the study's rows, outcomes and cell records).

Each reader takes the parsed value and the path it was found at, and returns the value typed or
raises :class:`RecordFormatError` naming that path (``record.result.outcome.turns: expected an
integer, got boolean``). ``bool`` is never accepted where a number is expected, and an object
must carry exactly the fields its type names: unknown and missing fields are both refused.

JSON numbers keep their Python type (an ``int`` stays an ``int``), so a value read and written
again has the same canonical bytes and the same digest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeAlias

from runner.canonical._digest import is_digest
from runner.errors import ExitCategory, FormatError

__all__ = [
    "JsonObject",
    "JsonValue",
    "RecordFormatError",
    "read_bool",
    "read_digest",
    "read_int",
    "read_json_object",
    "read_list",
    "read_number",
    "read_object",
    "read_opt_digest",
    "read_opt_object",
    "read_opt_str",
    "read_str",
]

JsonObject = dict[str, Any]
"""A parsed JSON object whose values are not (yet) typed: model-proposed certificates, tool
responses and provider attempt records travel inside the study's records as such."""

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""Any JSON value, checked all the way down (unlike :data:`JsonObject`, whose values are
``Any``): what a typed record's ``to_json`` returns, so the type checker refuses a value that
is not JSON (a set, a tuple, a dataclass, a path) in the record's wire form."""


class RecordFormatError(FormatError):
    """A record is not the shape its type requires; ``str(err)`` names the offending path."""

    exit_category = ExitCategory.USAGE

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def read_object(value: object, path: str, fields: tuple[str, ...] | frozenset[str]) -> JsonObject:
    """``value`` as an object holding exactly ``fields``."""
    if not isinstance(value, dict):
        raise RecordFormatError(path, f"expected an object, got {_kind(value)}")
    if value.keys() != set(fields):
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise RecordFormatError(path, f"unknown field {str(unknown[0])[:60]!r}")
        missing = sorted(set(fields) - set(value))
        raise RecordFormatError(path, f"missing field {missing[0]!r}")
    return value


def read_opt_object(value: object, path: str) -> JsonObject | None:
    """``value`` as any object (its fields unchecked), or ``None``."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordFormatError(path, f"expected an object or null, got {_kind(value)}")
    return value


def read_str(value: object, path: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise RecordFormatError(path, f"expected a string, got {_kind(value)}")
    if nonempty and not value:
        raise RecordFormatError(path, "must not be empty")
    return value


def read_json_object(value: object, path: str) -> JsonObject:
    """``value`` as any object (its fields are open content: tool arguments, a proposed
    certificate, ...), never ``None``."""
    obj = read_opt_object(value, path)
    if obj is None:
        raise RecordFormatError(path, "expected an object, got null")
    return obj


def read_opt_str(value: object, path: str) -> str | None:
    return None if value is None else read_str(value, path)


def read_int(value: object, path: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordFormatError(path, f"expected an integer, got {_kind(value)}")
    if minimum is not None and value < minimum:
        raise RecordFormatError(path, f"must be >= {minimum}")
    return value


def read_number(value: object, path: str) -> int | float:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RecordFormatError(path, "number is not finite")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordFormatError(path, f"expected a number, got {_kind(value)}")
    return value


def read_bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise RecordFormatError(path, f"expected a boolean, got {_kind(value)}")
    return value


def read_list(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise RecordFormatError(path, f"expected an array, got {_kind(value)}")
    return value


def read_digest(value: object, path: str) -> str:
    if not is_digest(value):
        raise RecordFormatError(path, "expected a 'sha256:<64 lowercase hex>' digest")
    assert isinstance(value, str)
    return value


def read_opt_digest(value: object, path: str) -> str | None:
    return None if value is None else read_digest(value, path)
