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

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from runner.canonical import is_digest
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


def _format(obj: dict[str, Any], path: str, expected: str) -> None:
    if obj["format"] != expected:
        raise WireFormatError(
            f"{path}.format", f"unsupported format {_short(obj['format'])!r}, expected {expected!r}"
        )


def _str_tuple(obj: Any, path: str) -> tuple[str, ...]:
    items = _list(obj, path)
    if not items:
        raise WireFormatError(path, "must not be empty")
    return tuple(_nonempty_str(v, f"{path}[{i}]") for i, v in enumerate(items))


# --- descriptor and contract -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Descriptor:
    """The frozen task descriptor; its digest is the *descriptor digest* (docs/formats.md)."""

    task_id: str
    family: str
    world_id: str
    parameters: dict[str, Any]
    required_slots: tuple[str, ...]

    @classmethod
    def from_json(cls, obj: Any, path: str = "descriptor") -> Self:
        d = _fields(obj, path, ("task_id", "family", "world_id", "parameters", "required_slots"))
        params = d["parameters"]
        if not isinstance(params, dict):
            raise WireFormatError(f"{path}.parameters", f"expected an object, got {_tname(params)}")
        slots = _list(d["required_slots"], f"{path}.required_slots")
        if not slots:
            raise WireFormatError(f"{path}.required_slots", "must not be empty")
        names = tuple(_ident(s, f"{path}.required_slots[{i}]") for i, s in enumerate(slots))
        if len(set(names)) != len(names):
            raise WireFormatError(f"{path}.required_slots", "duplicate slot name")
        return cls(
            task_id=_ident(d["task_id"], f"{path}.task_id"),
            family=_ident(d["family"], f"{path}.family"),
            world_id=_ident(d["world_id"], f"{path}.world_id"),
            parameters=_json(params, f"{path}.parameters"),
            required_slots=names,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "family": self.family,
            "world_id": self.world_id,
            "parameters": _json(self.parameters, "descriptor.parameters"),
            "required_slots": list(self.required_slots),
        }


@dataclass(frozen=True, slots=True)
class Transform:
    """One op of the closed transform language with its exact params (docs/formats.md §7).

    ``from_json`` checks the shape only (``op`` a string, ``params`` an object); whether the
    op exists and the params are exactly right is checked by :func:`runner.ect.check_transform`
    (contracts check it at parse time; for certificates the verifier reports it as a reason).
    """

    op: str
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Any, path: str = "transform") -> Self:
        d = _fields(obj, path, ("op", "params"))
        op = _nonempty_str(d["op"], f"{path}.op")
        params = d["params"]
        if not isinstance(params, dict):
            raise WireFormatError(f"{path}.params", f"expected an object, got {_tname(params)}")
        return cls(op=op, params=_json(params, f"{path}.params"))

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "params": _json(self.params, "transform.params")}


@dataclass(frozen=True, slots=True)
class DateRange:
    """An inclusive range of ISO dates."""

    start: str
    end: str

    @classmethod
    def from_json(cls, obj: Any, path: str = "dates") -> Self:
        d = _fields(obj, path, ("start", "end"))
        start = _date(d["start"], f"{path}.start")
        end = _date(d["end"], f"{path}.end")
        if start > end:
            raise WireFormatError(path, "start is after end")
        return cls(start=start, end=end)

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end}

    def __contains__(self, day: object) -> bool:
        return isinstance(day, str) and self.start <= day <= self.end


@dataclass(frozen=True, slots=True)
class ContractScope:
    """Which receipts a slot may cite. ``None`` (key absent on the wire) does not constrain."""

    entity: tuple[str, ...] | None = None
    attribute: tuple[str, ...] | None = None
    level: tuple[str, ...] | None = None
    dates: DateRange | tuple[str, ...] | None = None

    @classmethod
    def from_json(cls, obj: Any, path: str = "scope") -> Self:
        d = _fields(obj, path, (), ("entity", "attribute", "level", "dates"))
        dates: DateRange | tuple[str, ...] | None = None
        if "dates" in d:
            raw = d["dates"]
            if isinstance(raw, list):
                if not raw:
                    raise WireFormatError(f"{path}.dates", "must not be empty")
                dates = tuple(_date(v, f"{path}.dates[{i}]") for i, v in enumerate(raw))
            elif isinstance(raw, dict):
                dates = DateRange.from_json(raw, f"{path}.dates")
            else:
                raise WireFormatError(
                    f"{path}.dates", f"expected an object or an array, got {_tname(raw)}"
                )
        return cls(
            entity=_str_tuple(d["entity"], f"{path}.entity") if "entity" in d else None,
            attribute=_str_tuple(d["attribute"], f"{path}.attribute") if "attribute" in d else None,
            level=_str_tuple(d["level"], f"{path}.level") if "level" in d else None,
            dates=dates,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.entity is not None:
            out["entity"] = list(self.entity)
        if self.attribute is not None:
            out["attribute"] = list(self.attribute)
        if self.level is not None:
            out["level"] = list(self.level)
        if isinstance(self.dates, DateRange):
            out["dates"] = self.dates.to_json()
        elif self.dates is not None:
            out["dates"] = list(self.dates)
        return out


@dataclass(frozen=True, slots=True)
class Cardinality:
    """How many distinct receipts a claim must cite (inclusive bounds)."""

    min: int
    max: int

    @classmethod
    def from_json(cls, obj: Any, path: str = "cardinality") -> Self:
        d = _fields(obj, path, ("min", "max"))
        lo = _int(d["min"], f"{path}.min", minimum=0)
        hi = _int(d["max"], f"{path}.max", minimum=0)
        if lo > hi:
            raise WireFormatError(path, "min is greater than max")
        return cls(min=lo, max=hi)

    def to_json(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max}


@dataclass(frozen=True, slots=True)
class SlotSpec:
    """The trusted requirements for one answer slot. JSON ``"tolerance": {"abs": x}``."""

    transforms: tuple[Transform, ...]
    scope: ContractScope
    cardinality: Cardinality | None
    nullable: bool
    tolerance_abs: int | float

    @classmethod
    def from_json(cls, obj: Any, path: str = "slot") -> Self:
        d = _fields(obj, path, ("transforms", "scope", "nullable", "tolerance"), ("cardinality",))
        raw_t = _list(d["transforms"], f"{path}.transforms")
        if not raw_t:
            raise WireFormatError(f"{path}.transforms", "must not be empty")
        transforms = []
        for i, t in enumerate(raw_t):
            tp = f"{path}.transforms[{i}]"
            tr = Transform.from_json(t, tp)
            try:
                check_params(tr.op, tr.params)
            except ReplayError as e:
                raise WireFormatError(tp, e.detail) from None
            transforms.append(tr)
        tol = _fields(d["tolerance"], f"{path}.tolerance", ("abs",))
        tol_abs = _number(tol["abs"], f"{path}.tolerance.abs")
        if tol_abs < 0:
            raise WireFormatError(f"{path}.tolerance.abs", "must be >= 0")
        card = d.get("cardinality")
        return cls(
            transforms=tuple(transforms),
            scope=ContractScope.from_json(d["scope"], f"{path}.scope"),
            cardinality=None
            if card is None
            else Cardinality.from_json(card, f"{path}.cardinality"),
            nullable=_bool(d["nullable"], f"{path}.nullable"),
            tolerance_abs=tol_abs,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "transforms": [t.to_json() for t in self.transforms],
            "scope": self.scope.to_json(),
            "nullable": self.nullable,
            "tolerance": {"abs": self.tolerance_abs},
        }
        if self.cardinality is not None:
            out["cardinality"] = self.cardinality.to_json()
        return out


@dataclass(frozen=True, slots=True)
class Contract:
    """Trusted requirements ``R_t`` (``format: ect.contract/1``).

    Invariants checked by ``from_json``: ``task_id`` equals the descriptor's, and ``slots`` has
    exactly one spec per required slot (no optional slots).
    """

    task_id: str
    descriptor: Descriptor
    slots: dict[str, SlotSpec]

    @classmethod
    def from_json(cls, obj: Any, path: str = "contract") -> Self:
        d = _fields(obj, path, ("format", "task_id", "descriptor", "slots"))
        _format(d, path, CONTRACT_FORMAT)
        task_id = _ident(d["task_id"], f"{path}.task_id")
        desc = Descriptor.from_json(d["descriptor"], f"{path}.descriptor")
        if desc.task_id != task_id:
            raise WireFormatError(f"{path}.descriptor.task_id", "differs from the contract task_id")
        raw = d["slots"]
        if not isinstance(raw, dict):
            raise WireFormatError(f"{path}.slots", f"expected an object, got {_tname(raw)}")
        slots = {}
        for name in desc.required_slots:
            if name not in raw:
                raise WireFormatError(f"{path}.slots", f"missing spec for required slot {name!r}")
        for name, spec in raw.items():
            if name not in desc.required_slots:
                raise WireFormatError(f"{path}.slots", f"slot {_short(name)!r} is not required")
            slots[name] = SlotSpec.from_json(spec, f"{path}.slots.{name}")
        # Slot order follows the descriptor's required_slots.
        ordered = {name: slots[name] for name in desc.required_slots}
        return cls(task_id=task_id, descriptor=desc, slots=ordered)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CONTRACT_FORMAT,
            "task_id": self.task_id,
            "descriptor": self.descriptor.to_json(),
            "slots": {name: spec.to_json() for name, spec in self.slots.items()},
        }


# --- receipts and ledger ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReceiptScope:
    """The structured scope of one receipt. ``(entity, attribute, level, date)`` is its key."""

    entity: str | None
    attribute: str | None
    level: str | None
    date: str | None

    @classmethod
    def from_json(cls, obj: Any, path: str = "scope") -> Self:
        d = _fields(obj, path, ("entity", "attribute", "level", "date"))
        day = d["date"]
        return cls(
            entity=_opt_str(d["entity"], f"{path}.entity"),
            attribute=_opt_str(d["attribute"], f"{path}.attribute"),
            level=_opt_str(d["level"], f"{path}.level"),
            date=None if day is None else _date(day, f"{path}.date"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "entity": self.entity,
            "attribute": self.attribute,
            "level": self.level,
            "date": self.date,
        }

    @property
    def key(self) -> tuple[str | None, str | None, str | None, str | None]:
        return (self.entity, self.attribute, self.level, self.date)


_RECEIPT_FIELDS = (
    "receipt_id",
    "task_id",
    "call_id",
    "tool_id",
    "args_sha256",
    "response_sha256",
    "source_path",
    "value",
    "value_sha256",
    "exec_status",
    "validation",
    "scope",
)


@dataclass(frozen=True, slots=True)
class Receipt:
    """One typed piece of evidence normalised from one tool response by the trusted adapter."""

    receipt_id: str
    task_id: str
    call_id: str
    tool_id: str
    args_sha256: str
    response_sha256: str
    source_path: str
    value: Value
    value_sha256: str
    exec_status: Literal["ok", "error"]
    validation: Literal["valid", "invalid"]
    scope: ReceiptScope

    @classmethod
    def from_json(cls, obj: Any, path: str = "receipt") -> Self:
        d = _fields(obj, path, _RECEIPT_FIELDS)
        return cls(
            receipt_id=_ident(d["receipt_id"], f"{path}.receipt_id"),
            task_id=_ident(d["task_id"], f"{path}.task_id"),
            call_id=_ident(d["call_id"], f"{path}.call_id"),
            tool_id=_ident(d["tool_id"], f"{path}.tool_id"),
            args_sha256=_digest_str(d["args_sha256"], f"{path}.args_sha256"),
            response_sha256=_digest_str(d["response_sha256"], f"{path}.response_sha256"),
            source_path=_str(d["source_path"], f"{path}.source_path"),
            value=check_value(d["value"], f"{path}.value"),
            value_sha256=_digest_str(d["value_sha256"], f"{path}.value_sha256"),
            exec_status=_enum(d["exec_status"], f"{path}.exec_status", ("ok", "error")),  # type: ignore[arg-type]
            validation=_enum(d["validation"], f"{path}.validation", ("valid", "invalid")),  # type: ignore[arg-type]
            scope=ReceiptScope.from_json(d["scope"], f"{path}.scope"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "receipt_id": self.receipt_id,
            "task_id": self.task_id,
            "call_id": self.call_id,
            "tool_id": self.tool_id,
            "args_sha256": self.args_sha256,
            "response_sha256": self.response_sha256,
            "source_path": self.source_path,
            "value": list(self.value) if isinstance(self.value, list) else self.value,
            "value_sha256": self.value_sha256,
            "exec_status": self.exec_status,
            "validation": self.validation,
            "scope": self.scope.to_json(),
        }


@dataclass(frozen=True, slots=True)
class Ledger:
    """The evidence ledger ``E_t`` (``format: ect.ledger/1``). Receipt order carries no meaning."""

    task_id: str
    receipts: tuple[Receipt, ...]

    @classmethod
    def from_json(cls, obj: Any, path: str = "ledger") -> Self:
        d = _fields(obj, path, ("format", "task_id", "receipts"))
        _format(d, path, LEDGER_FORMAT)
        raw = _list(d["receipts"], f"{path}.receipts")
        return cls(
            task_id=_ident(d["task_id"], f"{path}.task_id"),
            receipts=tuple(
                Receipt.from_json(r, f"{path}.receipts[{i}]") for i, r in enumerate(raw)
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "format": LEDGER_FORMAT,
            "task_id": self.task_id,
            "receipts": [r.to_json() for r in self.receipts],
        }


# --- certificate -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """``(slot, value, evidence ids, transform)`` proposed by the agent."""

    slot: str
    value: Value
    evidence: tuple[str, ...]
    transform: Transform

    @classmethod
    def from_json(cls, obj: Any, path: str = "claim") -> Self:
        d = _fields(obj, path, ("slot", "value", "evidence", "transform"))
        ev = _list(d["evidence"], f"{path}.evidence")
        return cls(
            slot=_ident(d["slot"], f"{path}.slot"),
            value=check_value(d["value"], f"{path}.value"),
            evidence=tuple(_ident(r, f"{path}.evidence[{i}]") for i, r in enumerate(ev)),
            transform=Transform.from_json(d["transform"], f"{path}.transform"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "value": list(self.value) if isinstance(self.value, list) else self.value,
            "evidence": list(self.evidence),
            "transform": self.transform.to_json(),
        }


@dataclass(frozen=True, slots=True)
class Certificate:
    """The terminal certificate ``C_t`` (``format: ect.certificate/1``); extra fields forbidden."""

    task_id: str
    descriptor_digest: str
    ledger_digest: str
    claims: tuple[Claim, ...]

    @classmethod
    def from_json(cls, obj: Any, path: str = "certificate") -> Self:
        d = _fields(
            obj, path, ("format", "task_id", "descriptor_digest", "ledger_digest", "claims")
        )
        _format(d, path, CERTIFICATE_FORMAT)
        raw = _list(d["claims"], f"{path}.claims")
        return cls(
            task_id=_ident(d["task_id"], f"{path}.task_id"),
            descriptor_digest=_digest_str(d["descriptor_digest"], f"{path}.descriptor_digest"),
            ledger_digest=_digest_str(d["ledger_digest"], f"{path}.ledger_digest"),
            claims=tuple(Claim.from_json(c, f"{path}.claims[{i}]") for i, c in enumerate(raw)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CERTIFICATE_FORMAT,
            "task_id": self.task_id,
            "descriptor_digest": self.descriptor_digest,
            "ledger_digest": self.ledger_digest,
            "claims": [c.to_json() for c in self.claims],
        }
