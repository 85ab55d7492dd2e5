"""Typed, frozen wire objects of ECT with strict ``from_json`` / ``to_json`` (docs/formats.md).

Every ``from_json`` fails closed: unknown fields, missing fields and wrong types raise
:class:`WireFormatError` naming the path (``certificate.claims[1].transform.params: ...``).
``bool`` is never accepted where a number is expected. Claimed and receipt *values* are
``int | float | str | None`` or a flat list of those; integers must lie in the IEEE-754 safe
range (|n| <= 2**53 - 1) and floats must be finite, so every value has an RFC 8785 encoding.

The field names and the ``format`` strings below are part of the wire format
(``ect.contract/1``, ``ect.ledger/1``, ``ect.certificate/1``): renaming one is a format change.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Self

from runner.canonical import JsonObject, JsonRecord, RecordFormatError, is_digest
from runner.canonical import spec as field_spec
from runner.ect._errors import ReplayError, WireFormatError
from runner.ect._ops import check_params, is_iso_date

__all__ = [
    "CERTIFICATE_FORMAT",
    "CONTRACT_FORMAT",
    "LEDGER_FORMAT",
    "Cardinality",
    "Certificate",
    "Claim",
    "Contract",
    "ContractScope",
    "DateRange",
    "Descriptor",
    "Ledger",
    "Receipt",
    "ReceiptScope",
    "SlotSpec",
    "Transform",
    "Value",
    "check_value",
]

CONTRACT_FORMAT = "ect.contract/1"
LEDGER_FORMAT = "ect.ledger/1"
CERTIFICATE_FORMAT = "ect.certificate/1"

MAX_SAFE_INT = 2**53 - 1
# Identifiers (task, receipt, call, tool, slot, family, world ids) are printable ASCII so that
# "sorted by id" means the same thing in every language.
_ID_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}\Z")

Scalar = int | float | str | None
Value = Scalar | list[Scalar]


# --- field helpers ---------------------------------------------------------------------------


def _fields(
    obj: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    if type(obj) is dict and len(obj) == len(required) and not optional:
        # Fast path (the common case): exactly the required keys.
        if obj.keys() == set(required):
            return obj
    if not isinstance(obj, dict):
        raise WireFormatError(path, f"expected an object, got {_tname(obj)}")
    for key in obj:
        if key not in required and key not in optional:
            raise WireFormatError(path, f"unknown field {_short(key)!r}")
    for key in required:
        if key not in obj:
            raise WireFormatError(path, f"missing field {key!r}")
    return obj


def _tname(obj: Any) -> str:
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "boolean"
    if isinstance(obj, int | float):
        return "number"
    if isinstance(obj, str):
        return "string"
    if isinstance(obj, list | tuple):
        return "array"
    if isinstance(obj, dict):
        return "object"
    return type(obj).__name__


def _short(s: Any) -> str:
    text = str(s)
    return text if len(text) <= 60 else text[:57] + "..."


def _str(obj: Any, path: str) -> str:
    if not isinstance(obj, str):
        raise WireFormatError(path, f"expected a string, got {_tname(obj)}")
    try:
        obj.encode("utf-8")
    except UnicodeEncodeError:
        raise WireFormatError(path, "string is not valid Unicode (lone surrogate)") from None
    return obj


def _nonempty_str(obj: Any, path: str) -> str:
    s = _str(obj, path)
    if not s:
        raise WireFormatError(path, "must not be empty")
    return s


def _opt_str(obj: Any, path: str) -> str | None:
    return None if obj is None else _nonempty_str(obj, path)


def _ident(obj: Any, path: str) -> str:
    if type(obj) is str and _ID_RE.match(obj) is not None:
        return obj  # an ASCII identifier needs no further check
    s = _str(obj, path)
    if _ID_RE.match(s) is None:
        raise WireFormatError(path, f"invalid identifier {_short(s)!r}")
    return s


def _digest_str(obj: Any, path: str) -> str:
    if type(obj) is str and is_digest(obj):
        return obj
    s = _str(obj, path)
    if not is_digest(s):
        raise WireFormatError(path, "expected a 'sha256:<64 lowercase hex>' digest")
    return s


def _date(obj: Any, path: str) -> str:
    s = _str(obj, path)
    if not is_iso_date(s):
        raise WireFormatError(path, f"expected an ISO date YYYY-MM-DD, got {_short(s)!r}")
    return s


def _int(obj: Any, path: str, *, minimum: int | None = None) -> int:
    if isinstance(obj, bool) or not isinstance(obj, int):
        raise WireFormatError(path, f"expected an integer, got {_tname(obj)}")
    if not -MAX_SAFE_INT <= obj <= MAX_SAFE_INT:
        raise WireFormatError(path, "integer outside the IEEE-754 safe range")
    if minimum is not None and obj < minimum:
        raise WireFormatError(path, f"must be >= {minimum}")
    return obj


def _number(obj: Any, path: str) -> int | float:
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise WireFormatError(path, "number is not finite")
        return obj
    return _int(obj, path)


def _bool(obj: Any, path: str) -> bool:
    if not isinstance(obj, bool):
        raise WireFormatError(path, f"expected a boolean, got {_tname(obj)}")
    return obj


def _list(obj: Any, path: str) -> list[Any]:
    if not isinstance(obj, list):
        raise WireFormatError(path, f"expected an array, got {_tname(obj)}")
    return obj


def _enum(obj: Any, path: str, allowed: tuple[str, ...]) -> str:
    if type(obj) is str and obj in allowed:
        return obj
    s = _str(obj, path)
    if s not in allowed:
        raise WireFormatError(path, f"expected one of {list(allowed)}, got {_short(s)!r}")
    return s


def _scalar(obj: Any, path: str) -> Scalar:
    if obj is None:
        return None
    if type(obj) is int and -MAX_SAFE_INT <= obj <= MAX_SAFE_INT:
        return obj
    if isinstance(obj, str):
        return _str(obj, path)
    if isinstance(obj, int | float) and not isinstance(obj, bool):
        return _number(obj, path)
    raise WireFormatError(path, f"expected a number, string or null, got {_tname(obj)}")


def check_value(obj: Any, path: str = "value") -> Value:
    """Validate a claim/receipt value: a scalar or a flat list of scalars. Returns a copy."""
    if isinstance(obj, list):
        return [_scalar(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    return _scalar(obj, path)


def _json(obj: Any, path: str, depth: int = 0) -> Any:
    """Validate (and deep-copy) a free-form JSON value: descriptor parameters, transform params."""
    if depth > 32:
        raise WireFormatError(path, "nested deeper than 32")
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            key = _str(k, f"{path}: key")
            out[key] = _json(v, f"{path}.{_short(key)}", depth + 1)
        return out
    if isinstance(obj, list):
        return [_json(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(obj)]
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, int | float):
        return _number(obj, path)
    if isinstance(obj, str):
        return _str(obj, path)
    raise WireFormatError(path, f"not a JSON value ({type(obj).__name__})")


def _str_tuple(obj: Any, path: str) -> tuple[str, ...]:
    items = _list(obj, path)
    if not items:
        raise WireFormatError(path, "must not be empty")
    return tuple(_nonempty_str(v, f"{path}[{i}]") for i, v in enumerate(items))


# --- the wire record ------------------------------------------------------------------------


class _Wire(JsonRecord):
    """A wire object: :class:`runner.canonical.JsonRecord` with the wire's own errors
    (:class:`WireFormatError`; the first unknown key in the object's order, the first missing
    one in the declaration's)."""

    __slots__ = ()

    @classmethod
    def _object_of(cls, obj: object, path: str, allowed: tuple[str, ...],
                   required: tuple[str, ...]) -> Mapping[str, Any]:
        return _fields(obj, path, required, _optional(allowed, required))

    @classmethod
    def _read_json(cls, obj: object, path: str, **given: Any) -> Self:
        try:
            return super()._read_json(obj, path, **given)
        except RecordFormatError as e:
            raise WireFormatError(e.path, e.problem) from None


@functools.cache
def _optional(allowed: tuple[str, ...], required: tuple[str, ...]) -> tuple[str, ...]:
    """The keys allowed but not required."""
    return tuple(k for k in allowed if k not in required)


def _object(obj: Any, path: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise WireFormatError(path, f"expected an object, got {_tname(obj)}")
    checked: dict[str, Any] = _json(obj, path)
    return checked


def _nonneg(obj: Any, path: str) -> int:
    return _int(obj, path, minimum=0)


def _tolerance(obj: Any, path: str) -> int | float:
    tol = _number(obj, path)
    if tol < 0:
        raise WireFormatError(path, "must be >= 0")
    return tol


def _slot_names(obj: Any, path: str) -> tuple[str, ...]:
    slots = _list(obj, path)
    if not slots:
        raise WireFormatError(path, "must not be empty")
    names = tuple(_ident(s, f"{path}[{i}]") for i, s in enumerate(slots))
    if len(set(names)) != len(names):
        raise WireFormatError(path, "duplicate slot name")
    return names


def _transforms(obj: Any, path: str) -> tuple[Transform, ...]:
    raw = _list(obj, path)
    if not raw:
        raise WireFormatError(path, "must not be empty")
    out = []
    for i, t in enumerate(raw):
        tr = Transform.from_json(t, f"{path}[{i}]")
        try:
            check_params(tr.op, tr.params)
        except ReplayError as e:
            raise WireFormatError(f"{path}[{i}]", e.detail) from None
        out.append(tr)
    return tuple(out)


def _dates(obj: Any, path: str) -> DateRange | tuple[str, ...]:
    if isinstance(obj, list):
        if not obj:
            raise WireFormatError(path, "must not be empty")
        return tuple(_date(v, f"{path}[{i}]") for i, v in enumerate(obj))
    if isinstance(obj, dict):
        return DateRange.from_json(obj, path)
    raise WireFormatError(path, f"expected an object or an array, got {_tname(obj)}")


def _exec_status(obj: Any, path: str) -> str:
    return _enum(obj, path, ("ok", "error"))


def _validation(obj: Any, path: str) -> str:
    return _enum(obj, path, ("valid", "invalid"))


Ident = Annotated[str, _ident]
WireDigest = Annotated[str, _digest_str]
Date = Annotated[str, _date]
NonEmpty = Annotated[str, _nonempty_str]
StrList = Annotated[tuple[str, ...], _str_tuple]
Checked = Annotated[Value, check_value]


# --- descriptor and contract -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Descriptor(_Wire):
    """The frozen task descriptor; its digest is the *descriptor digest* (docs/formats.md)."""

    _path = "descriptor"

    task_id: Ident
    family: Ident
    world_id: Ident
    parameters: Annotated[dict[str, Any], _object] = field(metadata=field_spec(
        write=lambda v: _json(v, "descriptor.parameters")))
    required_slots: Annotated[tuple[str, ...], _slot_names]


@dataclass(frozen=True, slots=True)
class Transform(_Wire):
    """One op of the closed transform language with its exact params (docs/formats.md §7).

    ``from_json`` checks the shape only (``op`` a string, ``params`` an object); whether the
    op exists and the params are exactly right is checked by :func:`runner.ect.check_transform`
    (contracts check it at parse time; for certificates the verifier reports it as a reason).
    """

    _path = "transform"

    op: NonEmpty
    params: Annotated[dict[str, Any], _object] = field(default_factory=dict, metadata=field_spec(
        write=lambda v: _json(v, "transform.params")))


@dataclass(frozen=True, slots=True)
class DateRange(_Wire):
    """An inclusive range of ISO dates."""

    _path = "dates"

    start: Date
    end: Date

    def _check(self, obj: JsonObject, path: str) -> None:
        if self.start > self.end:
            raise WireFormatError(path, "start is after end")

    def __contains__(self, day: object) -> bool:
        return isinstance(day, str) and self.start <= day <= self.end


_OPT: dict[str, bool] = {"omit": True}


@dataclass(frozen=True, slots=True)
class ContractScope(_Wire):
    """Which receipts a slot may cite. ``None`` (key absent on the wire) does not constrain."""

    _path = "scope"

    entity: StrList | None = field(default=None, metadata=_OPT)
    attribute: StrList | None = field(default=None, metadata=_OPT)
    level: StrList | None = field(default=None, metadata=_OPT)
    dates: Annotated[DateRange | tuple[str, ...], _dates] | None = field(default=None,
                                                                        metadata=_OPT)


@dataclass(frozen=True, slots=True)
class Cardinality(_Wire):
    """How many distinct receipts a claim must cite (inclusive bounds)."""

    _path = "cardinality"

    min: Annotated[int, _nonneg]
    max: Annotated[int, _nonneg]

    def _check(self, obj: JsonObject, path: str) -> None:
        if self.min > self.max:
            raise WireFormatError(path, "min is greater than max")


@dataclass(frozen=True, slots=True)
class SlotSpec(_Wire):
    """The trusted requirements for one answer slot. JSON ``"tolerance": {"abs": x}``."""

    _path = "slot"

    transforms: Annotated[tuple[Transform, ...], _transforms]
    scope: ContractScope
    cardinality: Cardinality | None = field(metadata=_OPT)
    nullable: bool = field(metadata=field_spec(read=_bool))
    tolerance_abs: Annotated[int | float, _tolerance] = field(
        metadata=field_spec(key="tolerance.abs"))


@dataclass(frozen=True, slots=True)
class Contract(_Wire):
    """Trusted requirements ``R_t`` (``format: ect.contract/1``).

    Invariants checked by ``from_json``: ``task_id`` equals the descriptor's, and ``slots`` has
    exactly one spec per required slot (no optional slots), in the descriptor's order.
    """

    _path = "contract"
    _format = CONTRACT_FORMAT
    _format_error = "unsupported format {got!r}, expected {want!r}"

    task_id: Ident
    descriptor: Descriptor
    slots: dict[Ident, SlotSpec] = field(metadata=field_spec(read=lambda v, p: v))

    def _check(self, obj: JsonObject, path: str) -> None:
        desc = self.descriptor
        if desc.task_id != self.task_id:
            raise WireFormatError(f"{path}.descriptor.task_id", "differs from the contract task_id")
        raw = self.slots
        if not isinstance(raw, dict):
            raise WireFormatError(f"{path}.slots", f"expected an object, got {_tname(raw)}")
        for name in desc.required_slots:
            if name not in raw:
                raise WireFormatError(f"{path}.slots", f"missing spec for required slot {name!r}")
        for name in raw:
            if name not in desc.required_slots:
                raise WireFormatError(f"{path}.slots", f"slot {_short(name)!r} is not required")
        read = {name: SlotSpec.from_json(spec, f"{path}.slots.{name}")
                for name, spec in raw.items()}
        # Slot order follows the descriptor's required_slots.
        object.__setattr__(self, "slots", {name: read[name] for name in desc.required_slots})


# --- receipts and ledger ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReceiptScope(_Wire):
    """The structured scope of one receipt. ``(entity, attribute, level, date)`` is its key."""

    _path = "scope"

    entity: NonEmpty | None
    attribute: NonEmpty | None
    level: NonEmpty | None
    date: Date | None

    @property
    def key(self) -> tuple[str | None, str | None, str | None, str | None]:
        return (self.entity, self.attribute, self.level, self.date)


@dataclass(frozen=True, slots=True)
class Receipt(_Wire):
    """One typed piece of evidence normalised from one tool response by the trusted adapter."""

    _path = "receipt"

    receipt_id: Ident
    task_id: Ident
    call_id: Ident
    tool_id: Ident
    args_sha256: WireDigest
    response_sha256: WireDigest
    source_path: Annotated[str, _str]
    value: Checked
    value_sha256: WireDigest
    exec_status: Annotated[Literal["ok", "error"], _exec_status]
    validation: Annotated[Literal["valid", "invalid"], _validation]
    scope: ReceiptScope


@dataclass(frozen=True, slots=True)
class Ledger(_Wire):
    """The evidence ledger ``E_t`` (``format: ect.ledger/1``). Receipt order carries no meaning."""

    _path = "ledger"
    _format = LEDGER_FORMAT
    _format_error = "unsupported format {got!r}, expected {want!r}"

    task_id: Ident
    receipts: tuple[Receipt, ...]


# --- certificate -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim(_Wire):
    """``(slot, value, evidence ids, transform)`` proposed by the agent."""

    _path = "claim"

    slot: Ident
    value: Checked
    evidence: tuple[Ident, ...]
    transform: Transform


@dataclass(frozen=True, slots=True)
class Certificate(_Wire):
    """The terminal certificate ``C_t`` (``format: ect.certificate/1``); extra fields forbidden."""

    _path = "certificate"
    _format = CERTIFICATE_FORMAT
    _format_error = "unsupported format {got!r}, expected {want!r}"

    task_id: Ident
    descriptor_digest: WireDigest
    ledger_digest: WireDigest
    claims: tuple[Claim, ...]
