"""Receipts from tool calls: the trusted-adapter half of ECT for any agent framework.

A receipt is never the agent's word: the adapter builds it from a tool call it observed and the
result the tool returned. The *value* is read from the result at a JSON Pointer (RFC 6901), so
a receipt can only carry what the tool actually said; the args and the whole result are hashed
(``ect/args/v1``, ``ect/response/v1``) so an auditor can match the receipt to the raw call.

What a result *means* (which entity, attribute, level and date a value is about) is the one
thing only the tool's owner knows: an :data:`Extractor` says it, per call, as
:class:`Evidence` items. :func:`scoped_value` covers the common case of a result object that
carries its own scope fields.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.canonical import loads_strict
from runner.ect import (
    Receipt,
    ReceiptScope,
    WireFormatError,
    args_digest,
    check_value,
    response_digest,
    value_digest,
)
from runner.errors import FormatError

__all__ = [
    "Evidence",
    "Extractor",
    "ToolEvent",
    "build_receipt",
    "json_pointer",
    "parse_result",
    "safe_call_id",
    "scoped_value",
]

_ID_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}\Z")


@dataclass(frozen=True)
class ToolEvent:
    """One executed tool call as a framework reports it.

    ``result`` is the tool's output: a JSON value, or JSON text (parsed strictly; text that is
    not JSON yields no receipt). ``error`` is set when the call failed.
    """

    call_id: str
    tool: str
    args: Mapping[str, Any]
    result: Any = None
    error: str | None = None


@dataclass(frozen=True)
class Evidence:
    """One value a tool result holds: where (a JSON Pointer into the result) and about what."""

    path: str
    scope: ReceiptScope
    valid: bool = True


Extractor = Callable[[ToolEvent], Iterable[Evidence]]


def json_pointer(doc: Any, pointer: str) -> Any:
    """Resolve an RFC 6901 JSON Pointer (``""`` is the whole document).

    Raises:
        FormatError: the pointer is malformed or names nothing in ``doc``.
    """
    if pointer == "":
        return doc
    if not pointer.startswith("/"):
        raise FormatError(f"JSON pointer {pointer[:60]!r} must start with '/'")
    node = doc
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and re.fullmatch(r"0|[1-9][0-9]*", token) and int(token) < len(node):
            node = node[int(token)]
        else:
            raise FormatError(f"JSON pointer {pointer[:60]!r} names nothing in the result")
    return node


def safe_call_id(raw: str) -> str:
    """A framework's call id as an ECT identifier: itself when it already is one, else
    ``c-`` + the first 24 hex digits of its sha256 (OpenAI ids carry ``_``, which ECT ids do
    not), so the receipt still names the exact call."""
    if isinstance(raw, str) and _ID_RE.match(raw):
        return raw
    return "c-" + hashlib.sha256(str(raw).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def build_receipt(
    task_id: str,
    receipt_id: str,
    call_id: str,
    tool_id: str,
    args: Any,
    result: Any,
    *,
    path: str,
    scope: ReceiptScope,
    ok: bool = True,
    valid: bool = True,
) -> Receipt:
    """Build one receipt from a tool call and its (parsed JSON) result.

    The value is ``json_pointer(result, path)`` when ``ok``; for a failed call it is ``null``
    with ``exec_status: "error"``, so the call is on record but supports no claim.

    Raises:
        FormatError: the value is not an ECT value (a scalar or a flat list of scalars), the
            pointer names nothing, or args / result have no RFC 8785 encoding.
    """
    value = check_value(json_pointer(result, path), "value") if ok else None
    return Receipt(
        receipt_id=receipt_id,
        task_id=task_id,
        call_id=safe_call_id(call_id),
        tool_id=tool_id if _ID_RE.match(tool_id) else safe_call_id(tool_id),
        args_sha256=args_digest(dict(args) if isinstance(args, Mapping) else args),
        response_sha256=response_digest(result),
        source_path=path if ok else "",
        value=value,
        value_sha256=value_digest(value),
        exec_status="ok" if ok else "error",
        validation="valid" if valid else "invalid",
        scope=scope,
    )


def parse_result(result: Any) -> tuple[bool, Any]:
    """``(True, value)`` for a JSON result (text is parsed strictly), else ``(False, None)``."""
    if isinstance(result, str | bytes):
        try:
            return True, loads_strict(result)
        except FormatError:
            return False, None
    return True, result


@dataclass(frozen=True)
class _Field:
    source: str | None

    def read(self, result: Any) -> str | None:
        if self.source is None:
            return None
        if not self.source.startswith("/"):
            return self.source  # a constant
        try:
            value = json_pointer(result, self.source)
        except FormatError:
            return None
        return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class _ScopedValue:
    value: str
    fields: tuple[_Field, _Field, _Field, _Field]
    tools: frozenset[str] | None = field(default=None)

    def __call__(self, event: ToolEvent) -> Iterable[Evidence]:
        if self.tools is not None and event.tool not in self.tools:
            return ()
        ok, result = parse_result(event.result)
        if not ok or not isinstance(result, dict):
            return ()
        try:
            json_pointer(result, self.value)
        except FormatError:
            return ()
        e, a, lv, d = (f.read(result) for f in self.fields)
        return (Evidence(self.value, ReceiptScope(e, a, lv, d)),)


def scoped_value(
    value: str = "/value",
    *,
    entity: str | None = "/entity",
    attribute: str | None = "/attribute",
    level: str | None = "/level",
    date: str | None = "/date",
    tools: Iterable[str] | None = None,
) -> Extractor:
    """An extractor for results that carry their own scope: one receipt per call, its value at
    ``value``, each scope field read from a JSON Pointer (``"/entity"``) or given as a constant
    (``"store"``) or ``None``. ``tools`` limits it to those tool names (others give nothing)."""
    fields = (_Field(entity), _Field(attribute), _Field(level), _Field(date))
    return _ScopedValue(value, fields, None if tools is None else frozenset(tools))


def _scope_ok(scope: ReceiptScope) -> bool:
    try:
        ReceiptScope.from_json(scope.to_json())
    except WireFormatError:
        return False
    return True
