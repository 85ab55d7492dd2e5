"""The one record mechanism: a frozen dataclass that declares its fields once, writes itself as
JSON and reads itself back strictly (docs/formats.md §1).

Every stored, wire and report record of the runner (schedule rows, cell records, attempts, the
lock, the analysis's results, ...) is a frozen dataclass deriving from :class:`JsonRecord`.
``to_json`` writes each field under its own name, records nested in records, tuples as arrays;
``from_json`` reads a document back by the fields' types with the strict field readers of
:mod:`runner.canonical._fields`: a value that is not an object, an unknown or missing key, or a
value of the wrong type is refused with an error naming its path
(``record.result.outcome.turns: expected an integer, got boolean``).

A field's declaration may carry metadata (``dataclasses.field(metadata=spec(...))``):

- ``key``: its JSON key when it is not the field's name; a dotted key (``"stop.reason"``)
  writes the field into a nested object that the fields sharing the prefix fill in turn, and
  is read back from that object strictly (exactly those keys).
- ``omit``: left out when it is ``None`` (and may be absent when read; a ``null`` is refused).
- ``flat``: a record field (``X`` or ``X | None``) whose keys are written into the parent's
  object (a part several records share, or one of two shapes of a row).
- ``read``: the reader ``(value, path) -> value`` when the type alone does not say it;
  ``write``: its writer ``value -> JSON``.
- ``rounded(n)`` (a writer): a float written rounded to ``n`` decimals (``None`` as ``null``),
  as a report states a figure; ``sorted_map`` (a writer): a mapping written with its keys
  sorted (a ``Counter`` of failures by kind).
- a tag: a field declared ``field(default=..., init=False)`` (``kind = "finish"``) is written
  like any other and, read back, must be that string or boolean (``expected 'finish', got
  'escalate'``); it is not passed to the constructor.
- :func:`derived` (a declaration, not metadata): a key computed from the other fields, written
  at its position among them: ``failed: int = derived(lambda r: sum(r.by_class.values()))``
  is a read-only attribute (a property) written where it is declared (under ``key``, through
  ``write``, as any field); read back, its value must be of its type and equal what the record
  read computes (``record.failed: expected 3, got 4``); it is not passed to the constructor.
  A class declaring one is a dataclass without ``slots=True`` (the property is its attribute);
  mypy wants the fields after it to have defaults or be keyword-only (``kw_only=True``).
- ``skip``: not part of the JSON (a provider's native object, raw bytes kept apart); reading
  leaves it at its default or takes it from the caller.

A field whose type names what is imported for the type checker only (``if TYPE_CHECKING:``)
is written by its value (a record's ``to_json``, a tuple as an array) and cannot be read.

A reader may also ride on the type: ``Annotated[str, read_digest]`` (:data:`Digest`,
:data:`NonEmptyStr`, :func:`at_least`), so ``Digest | None`` and ``tuple[Digest, ...]`` read as
they say. ``Literal`` values, ``StrEnum`` members, records and open JSON (``JsonObject``,
``Mapping[str, Any]``, ``Any``) are read by their type too.

A record class may set ``_path`` (the default path of :meth:`JsonRecord.from_json`) and override
:meth:`JsonRecord._check` (invariants between fields, checked after reading, errors naming the path);
a ``TypeError``/``ValueError`` of its constructor is reported at the record's path.

JSON numbers keep their Python type in both directions (an ``int`` stays an ``int``), so a
document read and written again has the same canonical bytes and digest. A ``frozenset`` is
written as a sorted array.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal, Self

from runner.canonical._fields import (
    JsonObject,
    RecordFormatError,
    _kind,
    read_bool,
    read_digest,
    read_int,
    read_json_object,
    read_list,
    read_number,
    read_str,
)

__all__ = ["FLAT", "OMIT", "Count", "Digest", "JsonRecord", "NonEmptyStr", "at_least", "derived",
           "key", "rounded", "sorted_map", "spec"]

Reader = Callable[[Any, str], Any]
Writer = Callable[[Any], Any]


def _nonempty(value: object, path: str) -> str:
    return read_str(value, path, nonempty=True)


def at_least(minimum: int) -> Reader:
    """The reader of an integer ``>= minimum`` (``Annotated[int, at_least(0)]``)."""
    def read(value: object, path: str) -> int:
        return read_int(value, path, minimum=minimum)
    return read


def rounded(digits: int) -> Writer:
    """The writer of a float rounded to ``digits`` decimals (``None`` written as ``null``)."""
    def write(value: float | None) -> float | None:
        return None if value is None else round(value, digits)
    return write


def sorted_map(value: Mapping[str, Any]) -> dict[str, Any]:
    """The writer of a mapping with its keys sorted (its values as they are)."""
    return dict(sorted(value.items()))


Digest = Annotated[str, read_digest]
"""A ``sha256:<64 lowercase hex>`` digest."""
NonEmptyStr = Annotated[str, _nonempty]
"""A string that is not empty."""
Count = Annotated[int, at_least(0)]
"""An integer ``>= 0``."""

OMIT: dict[str, bool] = {"omit": True}
"""Field metadata: leave the field out of the JSON when it is ``None``."""

FLAT: dict[str, bool] = {"flat": True}
"""Field metadata of a record field (``X`` or ``X | None``): its keys are written into the
parent's object (none when it is ``None``)."""


def key(name: str) -> dict[str, str]:
    """Field metadata: the field's JSON key when it is not the field's name."""
    return {"key": name}


def spec(*, key: str | None = None, omit: bool = False, flat: bool = False,
         read: Reader | None = None, write: Writer | None = None,
         skip: bool = False) -> dict[str, Any]:
    """Field metadata (see the module docstring); ``field(metadata=spec(read=read_digest))``."""
    out: dict[str, Any] = {}
    if key is not None:
        out["key"] = key
    if omit:
        out["omit"] = True
    if flat:
        out["flat"] = True
    if read is not None:
        out["read"] = read
    if write is not None:
        out["write"] = write
    if skip:
        out["skip"] = True
    return out


def derived(compute: Callable[[Any], Any], *, key: str | None = None,
            write: Writer | None = None) -> Any:
    """A key computed from the other fields, declared at its position among them (see the module
    docstring): ``total: int = derived(lambda r: sum(r.counts.values()))``."""
    return dataclasses.field(default=property(compute), init=False, repr=False, compare=False,
                             metadata={**spec(key=key, write=write), "derived": True})


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    """One field as the reader and writer see it (computed once per class)."""

    keys: tuple[str, ...]  # the key path: ("stop", "reason") for key "stop.reason"
    name: str
    hint: object
    omit: bool  # may be absent (left out when None)
    flat: type[JsonRecord] | None
    read: Reader  # the declared reader, or the one the type says
    write: Writer | None
    tag: bool  # an init=False field: checked against its default, not passed to the class
    derived: bool  # a derived() field: read as its type, checked against what the record computes


class JsonRecord:
    """A frozen dataclass that is one JSON object; see the module docstring."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    _path: ClassVar[str] = "record"
    """The path ``from_json`` names in its errors when the caller names none."""

    _object_error: ClassVar[str] = "expected an object, got {kind}"
    """The error for a value that is not an object (``{kind}``: the JSON type it is)."""

    _format: ClassVar[str | None] = None
    """The document's ``format`` string (written first under ``"format"``, checked on read)."""

    _format_error: ClassVar[str] = "expected {want!r}"
    """The error for another ``format`` (``{got}``: what was found, shortened)."""

    _derived: ClassVar[tuple[str, ...]] = ()
    """Keys written after the fields from attributes computed from them (a digest, an id of a
    nested record): required when read, and checked by :meth:`_check`. A dotted key
    (``"stop.reason"``) is written first into its nested object from the attribute named by
    the key with ``_`` for ``.`` (``stop_reason``), and is required there when read."""

    def to_json(self) -> JsonObject:
        """The record as a JSON object (fields in declaration order; nested records too)."""
        writer = _WRITERS.get(type(self))
        if writer is None:
            writer = _WRITERS[type(self)] = _compile_writer(type(self))
        return writer(self)

    @classmethod
    def from_json(cls, obj: object, path: str | None = None) -> Self:
        """Read a record strictly: exactly its keys, each of its field's type."""
        return cls._read_json(obj, cls._path if path is None else path)

    @classmethod
    def _read_json(cls, obj: object, path: str, **given: Any) -> Self:
        """:meth:`from_json` at ``path``, ``given`` the values of ``skip`` fields."""
        kwargs = _read_fields(cls, obj, path)
        try:
            record = cls(**kwargs, **given)
        except (TypeError, ValueError) as e:
            raise RecordFormatError(path, str(e)) from None
        assert isinstance(obj, dict)  # _read_fields refused anything else
        derived = _DERIVED.get(cls)
        if derived is None:
            derived = _DERIVED[cls] = tuple(f for f in _fields(cls) if f.derived)
        if derived:
            _check_derived(record, derived, obj, path)
        record._check(obj, path)
        return record

    @classmethod
    def _object_of(cls, obj: object, path: str, allowed: tuple[str, ...],
                   required: tuple[str, ...]) -> Mapping[str, Any]:
        """``obj`` as an object holding only ``allowed`` keys and every ``required`` one (the
        first unknown and the first missing key in sorted order are named)."""
        if not isinstance(obj, dict):
            raise RecordFormatError(path, cls._object_error.format(kind=_kind(obj)))
        if len(obj) == len(required) and obj.keys() == set(required):
            return obj  # the common case: exactly the required keys
        unknown = sorted(set(obj) - set(allowed))
        if unknown:
            raise RecordFormatError(path, f"unknown field {str(unknown[0])[:60]!r}")
        missing = sorted(set(required) - set(obj))
        if missing:
            raise RecordFormatError(path, f"missing field {missing[0]!r}")
        return obj

    def _check(self, obj: JsonObject, path: str) -> None:
        """Invariants between fields, checked after reading ``obj`` (raise naming ``path``)."""


_CACHE: dict[type, tuple[_Field, ...]] = {}
_DERIVED: dict[type, tuple[_Field, ...]] = {}
_KEYS: dict[type, frozenset[str]] = {}


def _fields(cls: type) -> tuple[_Field, ...]:
    """The fields of ``cls`` as the reader and writer see them (computed once)."""
    got = _CACHE.get(cls)
    if got is None:
        out = []
        for f in dataclasses.fields(cls):
            m: Mapping[str, Any] = f.metadata
            if m.get("skip"):
                continue  # (its type may name what is imported for the type checker only)
            try:
                hint = _hint(cls, f.name)
            except NameError as e:  # a name imported for the type checker only
                hint = object  # written by its value; not read
                m = {**m, "read": _unreadable(f"{cls.__name__}.{f.name}", e)}
            flat = _flat_record(hint) if m.get("flat") else None
            optional = type(None) in typing.get_args(hint)
            if m.get("omit") and optional:  # present means not null: read as the other type
                rest = [a for a in typing.get_args(hint) if a is not type(None)]
                hint = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
            is_derived = bool(m.get("derived"))
            if is_derived and not isinstance(inspect.getattr_static(cls, f.name), property):
                raise TypeError(f"{cls.__name__}.{f.name}: a derived field needs a dataclass "
                                "without slots=True")
            tag = not f.init and not is_derived
            out.append(_Field(
                keys=tuple(str(m.get("key", f.name)).split(".")), name=f.name, hint=hint,
                omit=bool(m.get("omit")) or (flat is not None and optional), flat=flat,
                read=_tag_reader(f.default) if tag else m.get("read") or _reader(hint),
                write=m.get("write"), tag=tag or is_derived, derived=is_derived))
        got = _CACHE[cls] = tuple(out)
    return got


def _unreadable(name: str, error: NameError) -> Reader:
    """The reader of a field whose type is not known at run time: none (a programming error)."""
    def read(value: object, path: str) -> object:
        raise TypeError(f"{name}: no reader ({error})")
    return read


def _tag_reader(want: object) -> Reader:
    """The reader of a tag: the string or boolean ``want`` and nothing else."""
    if isinstance(want, bool):
        def read_flag(value: object, path: str) -> bool:
            if read_bool(value, path) is not want:
                raise RecordFormatError(path, f"expected {want}, got {value}")
            return want
        return read_flag
    if not isinstance(want, str):
        raise TypeError(f"a tag (an init=False field) must default to a string or a boolean, "
                        f"not {want!r}")

    def read(value: object, path: str) -> str:
        if read_str(value, path) != want:
            raise RecordFormatError(path, f"expected {want!r}, got {str(value)[:40]!r}")
        return want
    return read


def _check_derived(record: JsonRecord, derived: tuple[_Field, ...], obj: Mapping[str, Any],
                   path: str) -> None:
    """Each derived key of ``obj`` (read and type-checked already) equals what ``record``
    computes, as it would be written."""
    for f in derived:
        got: Any = obj
        for k in f.keys:
            got = got[k]
        value = getattr(record, f.name)
        want = f.write(value) if f.write is not None else _dump(value)
        if not _same_json(got, want):
            raise RecordFormatError(".".join((path, *f.keys)),
                                    f"expected {_shown(want)}, got {_shown(got)}")


def _shown(value: object) -> str:
    """A JSON value for an error message, shortened to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _same_json(a: object, b: object) -> bool:
    """Whether two JSON values are equal, type for type (``1`` is not ``1.0`` nor ``true``)."""
    if isinstance(b, tuple):
        b = list(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _hint(cls: type, name: str) -> object:
    """The type of field ``name`` of ``cls``, evaluated where it was declared."""
    for base in cls.__mro__:
        declared = inspect.get_annotations(base)
        if name in declared:
            namespace = vars(sys.modules[base.__module__])
            return typing.get_type_hints(
                type(base.__name__, (), {"__annotations__": {name: declared[name]},
                                         "__module__": base.__module__}),
                globalns=namespace, localns=dict(vars(base)), include_extras=True)[name]
    raise TypeError(f"{cls.__name__}.{name}: no annotation")  # a programming error


def _flat_record(hint: object) -> type[JsonRecord]:
    """The record type of a ``FLAT`` field (``X`` or ``X | None``)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    record = args[0]
    if len(args) != 1 or not (isinstance(record, type) and issubclass(record, JsonRecord)):
        raise TypeError(f"a FLAT field must be a record or None, not {hint!r}")
    return record


def _keys(cls: type) -> frozenset[str]:
    """Every top-level key an object of ``cls`` may hold (a FLAT field's keys included)."""
    got = _KEYS.get(cls)
    if got is None:
        keys: set[str] = set()
        for f in _fields(cls):
            keys.update(_keys(f.flat) if f.flat is not None else {f.keys[0]})
        got = _KEYS[cls] = frozenset(keys)
    return got


_SHAPE: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _shape(cls: type[JsonRecord]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The keys an object of ``cls`` may hold and those it must hold, in declaration order."""
    got = _SHAPE.get(cls)
    if got is None:
        fields = _fields(cls)
        head = ("format",) if cls._format is not None else ()
        required = head + tuple(f.keys[0] for f in fields if f.flat is None and not f.omit)
        allowed = head + tuple(dict.fromkeys(
            k for f in fields
            for k in (sorted(_keys(f.flat)) if f.flat is not None else (f.keys[0],))))
        derived = tuple(d.split(".")[0] for d in cls._derived)
        got = _SHAPE[cls] = (tuple(dict.fromkeys(allowed + derived)),
                             tuple(dict.fromkeys(required + derived)))
    return got


_SIMPLE: dict[type, Callable[[Mapping[str, Any], str], dict[str, Any]] | None] = {}


def _simple(cls: type[JsonRecord]) -> Callable[[Mapping[str, Any], str], dict[str, Any]] | None:
    """The field reader of ``cls`` as straight-line code when every field sits under its own
    key (no FLAT part, no dotted key), else None (compiled once)."""
    if cls not in _SIMPLE:
        fields = _fields(cls)
        if all(f.flat is None and len(f.keys) == 1 for f in fields):
            env: dict[str, Any] = {}
            lines = ["def read(top, path):"]
            for i, f in enumerate(fields):
                if f.tag:
                    env[f"r{i}"] = f.read
                    lines.append(f"    r{i}(top[{f.keys[0]!r}], path + {'.' + f.keys[0]!r})")
            lines.append("    return {")
            for i, f in enumerate(fields):
                if f.tag:
                    continue
                env[f"r{i}"] = f.read
                k = f.keys[0]
                got = f"r{i}(top[{k!r}], path + {'.' + k!r})"
                lines.append(f"        {f.name!r}: {got} if {k!r} in top else None," if f.omit
                             else f"        {f.name!r}: {got},")
            lines.append("    }")
            exec("\n".join(lines), env)  # the code built above from the class's own fields
            _SIMPLE[cls] = env["read"]
        else:
            _SIMPLE[cls] = None
    return _SIMPLE[cls]


def _read_fields(cls: type[JsonRecord], obj: object, path: str) -> dict[str, Any]:
    allowed, required = _shape(cls)
    top = cls._object_of(obj, path, allowed, required)
    if cls._format is not None and top["format"] != cls._format:
        got = str(top["format"])
        got = got if len(got) <= 60 else got[:57] + "..."
        raise RecordFormatError(f"{path}.format",
                                cls._format_error.format(want=cls._format, got=got))
    simple = _simple(cls)
    if simple is not None:  # the common case, read straight
        return simple(top, path)
    fields = _fields(cls)
    # the nested objects of dotted keys, each read strictly once
    nested: dict[tuple[str, ...], Mapping[str, Any]] = {}
    kwargs: dict[str, Any] = {}
    for f in fields:
        if f.flat is not None:
            own = {k: top[k] for k in _keys(f.flat) if k in top}
            kwargs[f.name] = f.flat.from_json(own, path) if own or not f.omit else None
            continue
        container = top
        for depth in range(1, len(f.keys)):
            prefix = f.keys[:depth]
            if prefix not in nested:
                inner = tuple(dict.fromkeys(
                    [g.keys[depth] for g in fields if g.keys[:depth] == prefix]
                    + [d[depth] for d in (tuple(d.split(".")) for d in cls._derived)
                       if len(d) > depth and d[:depth] == prefix]))
                nested[prefix] = cls._object_of(container[prefix[-1]],
                                                ".".join((path, *prefix)), inner, inner)
            container = nested[prefix]
        k = f.keys[-1]
        if k not in container:
            kwargs[f.name] = None  # an omittable field (a required one was refused above)
            continue
        at = f"{path}.{k}" if len(f.keys) == 1 else ".".join((path, *f.keys))
        value = f.read(container[k], at)
        if not f.tag:
            kwargs[f.name] = value
    return kwargs


_WRITERS: dict[type, Callable[[Any], JsonObject]] = {}


def _plain(hint: object) -> bool:
    """Whether a value of ``hint`` is its own JSON (a string, a number, a boolean, null)."""
    if typing.get_origin(hint) is Annotated:
        return _plain(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return all(_plain(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) is Literal:
        return True
    return hint in (str, int, float, bool, type(None), Any)  # Any: open JSON, written as is


def _compile_writer(cls: type[JsonRecord]) -> Callable[[Any], JsonObject]:
    """The ``to_json`` of ``cls`` as straight-line code (what a hand-written one would be)."""
    env: dict[str, Any] = {"_dump": _dump, "FORMAT": cls._format}
    lines = ["def to_json(self):",
             "    out = {}" if cls._format is None else "    out = {'format': FORMAT}"]
    made: set[tuple[str, ...]] = set()
    for i, f in enumerate(_fields(cls)):
        value = f"self.{f.name}"
        indent = "    "
        if f.omit:
            lines.append(f"    if {value} is not None:")
            indent = "        "
        if f.flat is not None:
            lines.append(f"{indent}out.update({value}.to_json())")
            continue
        if f.write is not None:
            env[f"w{i}"] = f.write
            expr = f"w{i}({value})"
        elif _plain(f.hint):
            expr = value
        elif isinstance(f.hint, type) and issubclass(f.hint, JsonRecord):
            expr = f"{value}.to_json()"
        else:
            expr = f"_dump({value})"
        target = "out"
        for depth in range(1, len(f.keys)):
            prefix = f.keys[:depth]
            if prefix not in made:
                made.add(prefix)
                lines.append(f"{indent}{target}.setdefault({prefix[-1]!r}, {{}})")
                for d in cls._derived:  # a derived key of this object, written first
                    if tuple(d.split("."))[:-1] == prefix:
                        lines.append(f"{indent}{target}[{prefix[-1]!r}][{d.split('.')[-1]!r}]"
                                     f" = _dump(self.{d.replace('.', '_')})")
            target = f"{target}[{prefix[-1]!r}]"
        lines.append(f"{indent}{target}[{f.keys[-1]!r}] = {expr}")
    for name in cls._derived:
        if "." not in name:
            lines.append(f"    out[{name!r}] = _dump(self.{name})")
        elif tuple(name.split("."))[:-1] not in made:  # no field writes into its object
            raise TypeError(f"{cls.__name__}: derived key {name!r} has no object of fields")
    lines.append("    return out")
    exec("\n".join(lines), env)  # the code built above from the class's own fields
    writer: Callable[[Any], JsonObject] = env["to_json"]
    return writer


def _reader(hint: object) -> Reader:
    """The reader of a value of type ``hint`` (its type looked at once, not on every read)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Annotated:
        found: Reader = next(a for a in hint.__metadata__ if callable(a))  # type: ignore[attr-defined]
        return found
    if hint in _SCALARS:
        return _SCALARS[hint]
    if origin in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
        inner = _reader(next(a for a in args if a is not type(None)))
        return lambda value, path: None if value is None else inner(value, path)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _reader(args[0])
        return lambda value, path: tuple(item(v, f"{path}[{i}]")
                                         for i, v in enumerate(read_list(value, path)))
    if isinstance(hint, type) and issubclass(hint, JsonRecord):
        return hint.from_json
    return lambda value, path: _read(hint, value, path)


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def _dump(value: object) -> object:
    if type(value) in _JSON_SCALARS:
        return value
    if isinstance(value, JsonRecord) or hasattr(value, "to_json"):
        return value.to_json()  # a record, or a value with its own JSON form
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_dump(v) for v in value]
    if isinstance(value, frozenset | set):  # a set has no order: written sorted
        return sorted(value)  # (sets of strings or numbers)
    if isinstance(value, Mapping):
        return {k: _dump(v) for k, v in value.items()}
    return value


_SCALARS: dict[object, Callable[[object, str], object]] = {
    int: read_int,
    float: read_number,
    str: read_str,
    bool: read_bool,
}


def _read(hint: object, value: object, path: str) -> object:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Annotated:
        reader = next(a for a in hint.__metadata__ if callable(a))  # type: ignore[attr-defined]
        return reader(value, path)
    if hint is Any:  # open JSON, as parsed
        return value
    if origin is Literal:
        raw = read_str(value, path)
        if raw not in args:
            want = " or ".join(repr(a) for a in args)
            raise RecordFormatError(path, f"expected {want}, got {raw[:40]!r}")
        return raw
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        choices = [a for a in args if a is not type(None)]
        if choices == [int, float] or choices == [float, int]:
            return read_number(value, path)
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
        return tuple(_read(a, v, f"{path}[{i}]")
                     for i, (a, v) in enumerate(zip(args, items, strict=True)))
    if origin is frozenset:
        return frozenset(_read(args[0], v, f"{path}[{i}]")
                         for i, v in enumerate(read_list(value, path)))
    if origin is list:
        return [_read(args[0], v, f"{path}[{i}]")
                for i, v in enumerate(read_list(value, path))]
    if origin is collections.Counter:  # counts by name
        obj = read_json_object(value, path)
        return collections.Counter({k: read_int(v, f"{path}.{k}", minimum=0)
                                    for k, v in obj.items()})
    if origin is dict or origin is Mapping:
        if args[1] is Any:  # open content (tool arguments, a certificate, ...)
            return read_json_object(value, path)
        obj = read_json_object(value, path)
        return {k: _read(args[1], v, f"{path}.{k}") for k, v in obj.items()}
    if isinstance(hint, type) and hasattr(hint, "from_json"):
        return hint.from_json(value, path)  # a record, or a value with its own JSON form
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        raw = read_str(value, path)
        try:
            return hint(raw)
        except ValueError:
            raise RecordFormatError(path, f"unknown value {raw[:40]!r}") from None
    raise TypeError(f"{path}: no reader for {hint!r}")  # a programming error, not input
