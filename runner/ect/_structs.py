"""The wire formats as msgspec structs: the compiled fast decoder and the JSON Schema source.

These structs are generated at import from the records of :mod:`runner.ect._wire` (and
:class:`~runner.ect.Reason`/:class:`~runner.ect.Decision`) with ``msgspec.defstruct``: each
record's fields (``dataclasses.fields`` and their metadata: keys, a dotted key as a nested struct,
omitted fields as ``UNSET``), and for each field the constraint its reader checks as far as a
JSON Schema states it (``_MEANING``: an identifier's pattern, a non-empty list, a bound). A field
is declared once, on the record. They serve two purposes:

* **Fast strict decoding** (:func:`fast_parse`): msgspec decodes bytes straight into these
  structs in C, refusing unknown fields, wrong types (``true`` is never a number), integers
  outside the IEEE-754 safe range, ``NaN``/``1e400``, bad UTF-8, lone surrogates and a BOM.
  What msgspec cannot check is then checked here in Python: duplicate keys (msgspec keeps the
  last one silently, so the number of key/value pairs it decoded is compared with the number of
  ``:`` separators outside string literals in the text), calendar dates, cross-field rules and
  the free-form ``parameters`` / ``params`` objects. The fast path only ever *accepts*: on any
  doubt it returns ``None`` and the caller runs the reference parser
  (:func:`runner.canonical.loads_strict` + ``from_json``), whose result and error message are
  then exactly today's. So for every accepted input the typed object equals the reference
  parser's (pinned by a differential property test), and every rejection reads as before.
* **JSON Schema** (:func:`json_schemas`): msgspec generates 2020-12 schemas from the same
  structs, so the published schema and the decoder have one source of truth.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from runner.canonical import MAX_INPUT_BYTES, JsonRecord
from runner.ect import _wire as w
from runner.ect._errors import ReplayError, WireFormatError
from runner.ect._ops import OPS, check_params, is_iso_date
from runner.ect._reasons import REASON_CODES, _read_code
from runner.ect._reasons import Decision as _DecisionRecord
from runner.ect._reasons import Reason as _ReasonRecord

__all__ = ["SCHEMA_TYPES", "TWINS", "fast_parse", "json_schemas"]

_MAX = w.MAX_SAFE_INT
# Python patterns anchor with \A and \Z (``$`` would accept a trailing newline); the schema
# generator rewrites them to ECMA-262 ``^`` / ``$``, which mean the same there.
_ID_PATTERN = r"\A[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}\Z"
_DIGEST_PATTERN = r"\Asha256:[0-9a-f]{64}\Z"
_DATE_PATTERN = r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z"

Ident = Annotated[str, Meta(pattern=_ID_PATTERN, description="identifier")]
Digest = Annotated[str, Meta(pattern=_DIGEST_PATTERN, description="sha256:<64 lowercase hex>")]
IsoDate = Annotated[str, Meta(pattern=_DATE_PATTERN, description="ISO calendar date YYYY-MM-DD")]
NonEmpty = Annotated[str, Meta(min_length=1)]
SafeInt = Annotated[int, Meta(ge=-_MAX, le=_MAX)]
Count = Annotated[int, Meta(ge=0, le=_MAX)]
Scalar = SafeInt | float | str | None
Value = SafeInt | float | str | None | list[Scalar]
NonEmptyNames = Annotated[list[NonEmpty], Meta(min_length=1)]


class _Strict(Struct, forbid_unknown_fields=True, omit_defaults=True):
    pass


ReasonCode: Any = Literal[tuple(REASON_CODES)]

# What each wire reader checks, as far as a msgspec type (and so a JSON Schema) states it; a
# reader not listed checks nothing beyond its type (a ``Literal`` it annotates, open JSON).
# Entries that name a record take the resolver of records to structs.
_MEANING: dict[Any, Callable[[Any], Any]] = {
    w._ident: lambda s: Ident,
    w._digest_str: lambda s: Digest,
    w._date: lambda s: IsoDate,
    w._nonempty_str: lambda s: NonEmpty,
    w._str_tuple: lambda s: NonEmptyNames,
    w.check_value: lambda s: Value,
    w._bool: lambda s: bool,
    w._nonneg: lambda s: Count,
    w._tolerance: lambda s: Annotated[int, Meta(ge=0, le=_MAX)] | Annotated[float, Meta(ge=0)],
    w._slot_names: lambda s: Annotated[list[Ident], Meta(min_length=1)],
    w._transforms: lambda s: Annotated[list[s(w.Transform)], Meta(min_length=1)],  # type: ignore[misc]
    w._dates: lambda s: s(w.DateRange) | Annotated[list[IsoDate], Meta(min_length=1)],
    _read_code: lambda s: ReasonCode,
}
# On the hot path (the twins) identifiers, digests, dates and non-empty strings are decoded as
# plain strings: a ledger holds ~8 pattern-checked strings per receipt, and one regex over all
# of them joined by newlines (which none may contain) is several times cheaper than one call
# each; :func:`_ledger` and :func:`_certificate` check them so.
_FAST: dict[Any, Any] = {
    w._ident: str, w._digest_str: str, w._date: str, w._nonempty_str: str,
}

# The schema's description of each struct (its prose; the fields come from the records).
_DOCS = {
    "Descriptor": "The frozen task descriptor; its digest is the descriptor digest.",
    "Transform": "One op of the closed transform language with its exact params.",
    "DateRange": "An inclusive range of ISO dates (start <= end).",
    "ContractScope": "Which receipts a slot may cite; an absent key does not constrain.",
    "Cardinality": "Inclusive bounds on the number of distinct cited receipts (min <= max).",
    "Tolerance": "Absolute tolerance for numeric claims.",
    "SlotSpec": "The trusted requirements for one answer slot.",
    "Contract": "Trusted requirements R_t (ect.contract/1).",
    "ReceiptScope": "The structured scope of one receipt; (entity, attribute, level, date) is its key.",
    "Receipt": "One typed piece of evidence normalised from one tool response by the trusted adapter.",
    "Ledger": "The evidence ledger E_t (ect.ledger/1).",
    "Claim": "(slot, value, evidence ids, transform) proposed by the agent.",
    "Certificate": "The terminal certificate C_t (ect.certificate/1); extra fields are forbidden.",
    "Reason": "One failing check.",
    "Decision": "The verifier's answer (what ``ect verify`` prints).",
}


def _struct_type(hint: Any, structs: Callable[[type], Any], fast: bool) -> Any:
    """The msgspec type of a record field's type ``hint``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        reader = next(a for a in hint.__metadata__ if callable(a))
        return _reader_type(reader, args[0], structs, fast)
    if origin in (types.UnionType, typing.Union):
        return typing.Union[tuple(_struct_type(a, structs, fast) for a in args)]  # noqa: UP007
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return list[_struct_type(args[0], structs, fast)]  # type: ignore[misc]
    if origin is dict:
        return dict[_struct_type(args[0], structs, fast),  # type: ignore[misc]
                    _struct_type(args[1], structs, fast)]
    if isinstance(hint, type) and issubclass(hint, JsonRecord):
        return structs(hint)
    return hint  # str, bool, None, a Literal, open JSON


def _reader_type(reader: Any, hint: Any, structs: Callable[[type], Any], fast: bool) -> Any:
    if fast and reader in _FAST:
        return _FAST[reader]
    if reader in _MEANING:
        return _MEANING[reader](structs)
    return _struct_type(hint, structs, fast)


def _generate(record: type[JsonRecord], structs: Callable[[type], Any], *, name: str,
              fast: bool = False) -> type[Struct]:
    """The msgspec struct of a wire record: its fields (keys, omitted ones as ``UNSET``, tags
    and the ``format`` as literals, a dotted key as a nested struct), required ones first."""
    hints = typing.get_type_hints(record, include_extras=True)
    required: list[tuple[str, Any]] = []
    optional: list[tuple[str, Any, Any]] = []
    fmt = getattr(record, "_format", None)
    if fmt is not None:
        required.append(("format", Literal[fmt]))
    nested: dict[str, list[tuple[str, Any]]] = {}
    for f in dataclasses.fields(record):
        meta = f.metadata
        if meta.get("skip"):
            continue
        if not f.init:  # a tag: its value, and only it
            required.append((f.name, Literal[f.default]))
            continue
        hint = hints[f.name]
        if meta.get("read") is not None:
            hint = Annotated[hint, meta["read"]]
        keys = str(meta.get("key", f.name)).split(".")
        if meta.get("omit"):
            inner = [a for a in typing.get_args(hint) if a is not type(None)]
            hint = inner[0] if len(inner) == 1 else hint
            optional.append((keys[0], _struct_type(hint, structs, fast) | UnsetType, UNSET))
        elif len(keys) == 2:
            if keys[0] not in nested:
                nested[keys[0]] = []
                required.append((keys[0], keys[0]))  # filled in below
            nested[keys[0]].append((keys[1], _struct_type(hint, structs, fast)))
        else:
            required.append((keys[0], _struct_type(hint, structs, fast)))
    fields: list[Any] = []
    for key, kind in required:
        if key in nested and kind == key:
            kind = msgspec.defstruct(key.capitalize(), nested[key], bases=(_Strict,),
                                     module=__name__,
                                     namespace={"__doc__": _DOCS.get(key.capitalize())})
        fields.append((key, kind))
    return msgspec.defstruct(name, fields + optional, bases=(_Strict,), module=__name__,
                             namespace={"__doc__": _DOCS.get(name)})


def _structs(records: tuple[type[JsonRecord], ...], *, twins: frozenset[type] = frozenset(),
             fast: bool = False) -> dict[type, type[Struct]]:
    """The structs of ``records`` (each nested record's struct made before its own): schema
    structs, or with ``fast`` the twins of ``twins`` (other records: their schema struct)."""
    out: dict[type, type[Struct]] = {}

    def struct(record: type) -> type[Struct]:
        if record not in out:
            if fast and record not in twins:
                out[record] = SCHEMA_STRUCTS[record]
            else:
                name = f"_{record.__name__}Twin" if fast else record.__name__
                out[record] = _generate(record, struct, name=name, fast=fast)
        return out[record]

    for record in records:
        struct(record)
    return out


SCHEMA_STRUCTS = _structs((w.Contract, w.Ledger, w.Certificate, _DecisionRecord))
"""The struct of each wire record (the schema's source, the contract's decoder)."""
Descriptor, Transform, DateRange = (SCHEMA_STRUCTS[r] for r in (w.Descriptor, w.Transform,
                                                                 w.DateRange))
ContractScope, Cardinality, SlotSpec = (SCHEMA_STRUCTS[r] for r in (w.ContractScope,
                                                                     w.Cardinality, w.SlotSpec))
Contract, ReceiptScope, Receipt = (SCHEMA_STRUCTS[r] for r in (w.Contract, w.ReceiptScope,
                                                                w.Receipt))
Ledger, Claim, Certificate = (SCHEMA_STRUCTS[r] for r in (w.Ledger, w.Claim, w.Certificate))
Reason, Decision = SCHEMA_STRUCTS[_ReasonRecord], SCHEMA_STRUCTS[_DecisionRecord]

_TWIN_STRUCTS = _structs((w.Ledger, w.Certificate), fast=True, twins=frozenset(
    {w.ReceiptScope, w.Receipt, w.Ledger, w.Claim, w.Certificate}))
# The hot-path twins of the schema structs (tests/ect/test_fast_path.py: the same fields).
TWINS: dict[type[Struct], type[Struct]] = {
    SCHEMA_STRUCTS[r]: _TWIN_STRUCTS[r]
    for r in (w.ReceiptScope, w.Receipt, w.Ledger, w.Claim, w.Certificate)
}
_LedgerTwin = _TWIN_STRUCTS[w.Ledger]
_CertificateTwin = _TWIN_STRUCTS[w.Certificate]

_ID_BODY = _ID_PATTERN[2:-2]
_DIGEST_BODY = _DIGEST_PATTERN[2:-2]
_IDS = re.compile(rf"\A(?:{_ID_BODY}\n)*{_ID_BODY}\Z")
_DIGESTS = re.compile(rf"\A(?:{_DIGEST_BODY}\n)*{_DIGEST_BODY}\Z")


SCHEMA_TYPES: dict[str, type[Struct]] = {
    "contract": Contract,
    "ledger": Ledger,
    "certificate": Certificate,
    "decision": Decision,
}

_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "contract": msgspec.json.Decoder(Contract),
    "ledger": msgspec.json.Decoder(_LedgerTwin),
    "certificate": msgspec.json.Decoder(_CertificateTwin),
}

# A JSON string literal (valid JSON only reaches this: msgspec has accepted the text).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _ledger_string_colons(ledger: w.Ledger) -> int:
    n = 0
    for r in ledger.receipts:
        s = r.scope
        parts = [r.receipt_id, r.task_id, r.call_id, r.tool_id, r.source_path,
                 s.entity or "", s.attribute or "", s.level or ""]
        v = r.value
        if type(v) is str:
            parts.append(v)
        elif type(v) is list:
            parts.extend(x for x in v if type(x) is str)
        n += "".join(parts).count(":") + 3  # + the three digests' "sha256:"
    return n + ledger.task_id.count(":")


def _colons_outside_strings(kind: str, data: bytes, obj: Any) -> int:
    if b"\\" in data:
        # Escapes present: strip string literals with a regex (slower, always right).
        return _STRING.sub(b"", data).count(b":")
    if kind == "ledger":
        # Without escapes a string literal's bytes are its UTF-8 text, and ':' (0x3A) never
        # occurs inside a multi-byte sequence, so the colons inside strings are exactly the
        # colons of the decoded strings (field names have none).
        return data.count(b":") - _ledger_string_colons(obj)
    # Without escapes every '"' delimits a string: the even segments lie outside.
    return b"".join(data.split(b'"')[::2]).count(b":")


class _Doubt(Exception):
    """The fast path declines; the reference parser decides."""


# --- free-form JSON (descriptor parameters, transform params) ----------------------------


def _pairs(obj: Any) -> int:
    """Key/value pairs in a free-form JSON value (objects at any depth)."""
    t = type(obj)
    if t is dict:
        return len(obj) + sum(_pairs(v) for v in obj.values()) if obj else 0
    if t is list:
        return sum(_pairs(v) for v in obj)
    return 0


def _free(obj: dict[str, Any], path: str) -> tuple[dict[str, Any], int]:
    if not obj:
        return {}, 0
    try:
        copy = w._json(obj, path)
    except WireFormatError:
        raise _Doubt from None
    return copy, _pairs(obj)


def _date_ok(day: str) -> None:
    if not is_iso_date(day):
        raise _Doubt


# --- per document ------------------------------------------------------------------------


def _descriptor(d: Any) -> tuple[w.Descriptor, int]:
    slots = tuple(d.required_slots)
    if len(set(slots)) != len(slots):
        raise _Doubt
    params, n = _free(d.parameters, "descriptor.parameters")
    return w.Descriptor(d.task_id, d.family, d.world_id, params, slots), 5 + n


def _contract(c: Any) -> tuple[w.Contract, int]:
    desc, n = _descriptor(c.descriptor)
    n += 4
    if desc.task_id != c.task_id or set(c.slots) != set(desc.required_slots):
        raise _Doubt
    n += len(c.slots)
    slots: dict[str, w.SlotSpec] = {}
    for name in desc.required_slots:
        s = c.slots[name]
        transforms = []
        for t in s.transforms:
            params, k = _free(t.params, "transform.params")
            try:
                check_params(t.op, params)
            except ReplayError:
                raise _Doubt from None
            transforms.append(w.Transform(t.op, params))
            n += 2 + k
        sc = s.scope
        n += 4  # transforms, scope, nullable, tolerance
        dates: w.DateRange | tuple[str, ...] | None = None
        if isinstance(sc.dates, DateRange):
            days: Any = sc.dates
            _date_ok(days.start)
            _date_ok(days.end)
            if days.start > days.end:
                raise _Doubt
            dates = w.DateRange(days.start, days.end)
            n += 3
        elif isinstance(sc.dates, list):
            for day in sc.dates:
                _date_ok(day)
            dates = tuple(sc.dates)
            n += 1
        scope = w.ContractScope(
            entity=None if sc.entity is UNSET else tuple(sc.entity),
            attribute=None if sc.attribute is UNSET else tuple(sc.attribute),
            level=None if sc.level is UNSET else tuple(sc.level),
            dates=dates,
        )
        n += (sc.entity is not UNSET) + (sc.attribute is not UNSET) + (sc.level is not UNSET)
        card = None
        if not isinstance(s.cardinality, UnsetType):
            if s.cardinality.min > s.cardinality.max:
                raise _Doubt
            card = w.Cardinality(s.cardinality.min, s.cardinality.max)
            n += 3
        n += 1  # tolerance.abs
        slots[name] = w.SlotSpec(tuple(transforms), scope, card, s.nullable, s.tolerance.abs)
    return w.Contract(c.task_id, desc, slots), n


def _ledger(d: Any) -> tuple[w.Ledger, int]:
    ids = [d.task_id]
    digests: list[str] = []
    receipts: list[w.Receipt] = []
    for r in d.receipts:
        s = r.scope
        ids += (r.receipt_id, r.task_id, r.call_id, r.tool_id)
        digests += (r.args_sha256, r.response_sha256, r.value_sha256)
        if s.date is not None:
            _date_ok(s.date)
        if "" in (s.entity, s.attribute, s.level):
            raise _Doubt
        receipts.append(
            w.Receipt(
                r.receipt_id,
                r.task_id,
                r.call_id,
                r.tool_id,
                r.args_sha256,
                r.response_sha256,
                r.source_path,
                r.value,
                r.value_sha256,
                r.exec_status,
                r.validation,
                w.ReceiptScope(s.entity, s.attribute, s.level, s.date),
            )
        )
    if _IDS.match("\n".join(ids)) is None:
        raise _Doubt
    if digests and _DIGESTS.match("\n".join(digests)) is None:
        raise _Doubt
    return w.Ledger(d.task_id, tuple(receipts)), 3 + 16 * len(receipts)


def _certificate(d: Any) -> tuple[w.Certificate, int]:
    n = 5
    ids = [d.task_id]
    claims = []
    for c in d.claims:
        params, k = _free(c.transform.params, "transform.params")
        n += 6 + k
        ids.append(c.slot)
        ids += c.evidence
        claims.append(
            w.Claim(c.slot, c.value, tuple(c.evidence), w.Transform(c.transform.op, params))
        )
    if _IDS.match("\n".join(ids)) is None:
        raise _Doubt
    if _DIGESTS.match(f"{d.descriptor_digest}\n{d.ledger_digest}") is None:
        raise _Doubt
    return w.Certificate(d.task_id, d.descriptor_digest, d.ledger_digest, tuple(claims)), n


_BUILD: dict[str, Callable[[Any], tuple[Any, int]]] = {"contract": _contract, "ledger": _ledger, "certificate": _certificate}


def fast_parse(kind: str, data: bytes | str) -> Any:
    """Decode ``data`` as a ``kind`` document (contract, ledger, certificate) on the fast path.

    Returns the typed object (equal to what the reference parser returns), or ``None`` when the
    fast path declines, in which case the caller must run the reference parser to get the
    decision and its exact message. Never raises.
    """
    try:
        if isinstance(data, str):
            data = data.encode("utf-8")  # a lone surrogate raises: declined
        if len(data) > MAX_INPUT_BYTES:
            return None
        doc = _DECODERS[kind].decode(data)
        obj, pairs = _BUILD[kind](doc)
        # Duplicate keys: msgspec kept the last of each silently, but the text has one ':'
        # outside string literals per key/value pair, so a duplicate shows as a surplus.
        if _colons_outside_strings(kind, data, obj) != pairs:
            return None
        return obj
    except (msgspec.DecodeError, msgspec.ValidationError, _Doubt, RecursionError):
        return None
    except Exception:  # any surprise: let the reference parser decide
        return None


# --- JSON Schema ----------------------------------------------------------------------------

_SCHEMA_ID = "urn:ect-runner:schema:"


def _ecma(node: Any) -> Any:
    """Rewrite Python \\A / \\Z anchors to ECMA-262 ^ / $ (same meaning without the m flag)."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "pattern" and isinstance(v, str):
                v = v.replace(r"\A", "^").replace(r"\Z", "$")
            out[k] = _ecma(v)
        return out
    if isinstance(node, list):
        return [_ecma(v) for v in node]
    return node


def _op_schema(op: str) -> dict[str, Any]:
    date = {"type": "string", "pattern": _DATE_PATTERN}
    window = {
        "type": "object",
        "properties": {"start": date, "end": date},
        "required": ["start", "end"],
        "additionalProperties": False,
    }
    kinds: dict[str, Any] = {
        "a": window if op == "window_sum_diff" else date,
        "b": window if op == "window_sum_diff" else date,
        "order": {"enum": ["asc", "desc"]},
        "k": {"type": "integer", "minimum": 1, "maximum": _MAX},
    }
    names = sorted(OPS[op])
    return {
        "type": "object",
        "properties": {
            "op": {"const": op},
            "params": {
                "type": "object",
                "properties": {n: kinds[n] for n in names},
                "required": names,
                "additionalProperties": False,
            },
        },
        "required": ["op", "params"],
        "additionalProperties": False,
    }


def json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema (2020-12) of each wire format, generated from the structs above.

    Beyond what msgspec generates: contract transforms are constrained to the closed language
    (one branch per op with its exact params), ``required_slots`` items are unique, and a
    decision is ``complete`` exactly when it has no reason and no missing slot. What JSON Schema
    cannot state is listed in docs/schema/README.md.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, struct in SCHEMA_TYPES.items():
        schema = msgspec.json.schema(struct)
        defs = schema["$defs"]
        if "Descriptor" in defs:
            defs["Descriptor"]["properties"]["required_slots"]["uniqueItems"] = True
        if "SlotSpec" in defs:
            defs["SlotSpec"]["properties"]["transforms"]["items"] = {
                "oneOf": [_op_schema(op) for op in OPS]
            }
            defs.pop("Transform", None)
        if name == "decision":
            defs["Decision"]["if"] = {"properties": {"decision": {"const": "complete"}}}
            defs["Decision"]["then"] = {
                "properties": {"reasons": {"maxItems": 0}, "missing_slots": {"maxItems": 0}}
            }
            defs["Decision"]["else"] = {"properties": {"reasons": {"minItems": 1}}}
        out[name] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"{_SCHEMA_ID}{name}",
            "title": f"ect.{name}/1" if name != "decision" else "ECT verifier decision",
            **_ecma(schema),
        }
    return out

