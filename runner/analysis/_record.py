"""The base of the analysis's typed results: a frozen dataclass that writes itself as JSON and
reads itself back strictly.

Every result of the analysis (Table 2, 3 and 4 rows, the gates, the strata, the paper-vs-run
rows, the whole ``results.json`` document) is a frozen dataclass deriving from :class:`Record`.
``to_json`` writes each field under its own name (or ``field(metadata={"key": ...})``), records
nested in records, tuples as arrays; ``from_json`` reads a document back by the fields' types
with the study's strict field readers (``runner.canonical``): an unknown or missing key, or a
value of the wrong type, is refused with an error naming its path
(``results.h2.ci_pp[1]: expected an integer, got string``). A field declared with
``metadata=OMIT`` is left out when it is ``None`` (and may be absent when read); a record field
declared with ``metadata=FLAT`` writes its own keys into its parent's object (a part several
records share, such as a paired comparison's counts, or one of two shapes of a row).

JSON numbers keep their Python type in both directions (an ``int`` stays an ``int``), so a
document read and written again has the same bytes.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import ClassVar, Self

from runner.canonical import (
    JsonObject,
    RecordFormatError,
    read_bool,
    read_int,
    read_list,
    read_number,
    read_str,
)

__all__ = ["FLAT", "OMIT", "Record", "key"]

OMIT: dict[str, bool] = {"omit": True}
"""Field metadata: leave the field out of the JSON when it is ``None``."""

FLAT: dict[str, bool] = {"flat": True}
"""Field metadata of a record field (``X`` or ``X | None``): its keys are written into the
parent's object (none when it is ``None``)."""


def key(name: str) -> dict[str, str]:
    """Field metadata: the field's JSON key when it is not the field's name."""
    return {"key": name}


class Record:
    """A frozen dataclass that is one JSON object of the analysis's results."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[object]]]

    def to_json(self) -> JsonObject:
        """The record as a JSON object (fields in declaration order; nested records too)."""
        out: JsonObject = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and (f.metadata.get("omit") or f.metadata.get("flat")):
                continue
            if f.metadata.get("flat") and isinstance(value, Record):
                out.update(value.to_json())
                continue
            out[f.metadata.get("key", f.name)] = _dump(value)
        return out

    @classmethod
    def from_json(cls, obj: object, path: str = "results") -> Self:
        """Read a record strictly: exactly its keys, each of its field's type."""
        if not isinstance(obj, dict):
            raise RecordFormatError(path, "expected an object")
        unknown = sorted(set(obj) - _keys(cls))
        if unknown:
            raise RecordFormatError(path, f"unknown field {str(unknown[0])[:60]!r}")
        kwargs: dict[str, object] = {}
        for k, name, hint, optional in _fields(cls):
            flat = _flat(hint)
            if flat is not None:
                own = {key: obj[key] for key in _keys(flat) if key in obj}
                kwargs[name] = flat.from_json(own, path) if own or not optional else None
                continue
            if k not in obj:
                if optional:
                    kwargs[name] = None
                    continue
                raise RecordFormatError(path, f"missing field {k!r}")
            kwargs[name] = _read(hint, obj[k], f"{path}.{k}")
        return cls(**kwargs)


_FIELDS: dict[type, tuple[tuple[str, str, object, bool], ...]] = {}
_FLAT: dict[type, frozenset[str]] = {}


def _fields(cls: type) -> tuple[tuple[str, str, object, bool], ...]:
    """``(key, field name, type, omittable)`` of each field of ``cls`` (computed once)."""
    if cls not in _FIELDS:
        hints = typing.get_type_hints(cls)
        _FIELDS[cls] = tuple(
            (f.metadata.get("key", f.name), f.name,
             _Flat(hints[f.name]) if f.metadata.get("flat") else hints[f.name],
             bool(f.metadata.get("omit"))
             or (bool(f.metadata.get("flat")) and type(None) in typing.get_args(hints[f.name])))
            for f in dataclasses.fields(cls)
        )
    return _FIELDS[cls]


@dataclasses.dataclass(frozen=True)
class _Flat:
    """The type of a ``FLAT`` field, marked so the reader reads it from the parent's keys."""

    hint: object


def _flat(hint: object) -> type[Record] | None:
    """The record type of a ``FLAT`` field (``X`` or ``X | None``), else None."""
    if not isinstance(hint, _Flat):
        return None
    args = [a for a in typing.get_args(hint.hint) if a is not type(None)] or [hint.hint]
    record = args[0]
    if len(args) != 1 or not (isinstance(record, type) and issubclass(record, Record)):
        raise TypeError(f"a FLAT field must be a record or None, not {hint.hint!r}")
    return record


def _keys(cls: type) -> frozenset[str]:
    """Every key an object of ``cls`` may hold (a FLAT field's keys included)."""
    if cls not in _FLAT:
        keys: set[str] = set()
        for k, _, hint, _ in _fields(cls):
            flat = _flat(hint)
            keys.update(_keys(flat) if flat is not None else {k})
        _FLAT[cls] = frozenset(keys)
    return _FLAT[cls]


def _dump(value: object) -> object:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, tuple | list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


_SCALARS: dict[object, typing.Callable[[object, str], object]] = {
    int: read_int,
    float: read_number,
    str: read_str,
    bool: read_bool,
}


def _read(hint: object, value: object, path: str) -> object:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        choices = [a for a in args if a is not type(None)]
        for a in choices[:-1]:
            try:
                return _read(a, value, path)
            except RecordFormatError:
                continue
        return _read(choices[-1], value, path)
    if hint in _SCALARS:
        return _SCALARS[hint](value, path)
    if origin is tuple:
        items = read_list(value, path)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_read(args[0], v, f"{path}[{i}]") for i, v in enumerate(items))
        if len(items) != len(args):
            raise RecordFormatError(path, f"expected {len(args)} items, got {len(items)}")
        return tuple(_read(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, items,
                                                                               strict=True)))
    if origin is list:
        return [_read(args[0], v, f"{path}[{i}]")
                for i, v in enumerate(read_list(value, path))]
    if origin is dict:
        if not isinstance(value, dict):
            raise RecordFormatError(path, "expected an object")
        return {k: _read(args[1], v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_json(value, path)
    raise TypeError(f"{path}: no reader for {hint!r}")  # a programming error, not input
