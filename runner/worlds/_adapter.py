"""The trusted adapter: one tool call and its response in, typed receipts out (docs/formats.md).

Normalisation rules (part of the protocol; docs/protocol.md repeats them):

* ``get_metric`` ok -> one receipt, ``source_path`` ``/result/value``, scope
  ``(entity, attribute, "store", date)``.
* ``get_series`` ok -> one receipt per point, ``/result/points/<i>/value``.
* ``list_entities`` ok -> one *membership* receipt per listed entity that has a parent:
  ``scope.attribute == "parent"``, ``value`` = the parent id, ``/result/entities/<i>/parent``.
* ``get_parent`` ok -> one membership receipt (none for a region, which has no parent).
* ``record_note`` -> no receipt (a side effect is not evidence).
* A nested error (``{"ok": true, "result": {"error": ...}}``) -> receipts with
  ``exec_status: "error"`` and ``value: null``, one per scope the call asked for (one per date
  of a ``get_series`` range of at most 62 days, else a single undated one), ``source_path``
  ``/result/error``; so a failed call occupies the same receipt ids a successful one would.
* A refused call (``{"ok": false, ...}``) -> no receipt: nothing was executed.
* A point or result carrying ``"superseded": true`` (a stale read recorded before a correction
  was published) -> ``validation: "invalid"``.
* A response that does not match the tool's response schema -> one receipt with
  ``exec_status: "error"``, ``validation: "invalid"``, ``source_path`` ``""``.

Receipt ids are ``r-%04d`` numbered from ``first_index``; call ids are the caller's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.canonical import JsonRecord
from runner.ect import (
    Ledger,
    Receipt,
    ReceiptScope,
    args_digest,
    response_digest,
    value_digest,
)
from runner.worlds import tools

__all__ = [
    "TOOLS_PATH",
    "TraceCall",
    "call_id",
    "ledger_from_trace",
    "receipt_id",
    "to_receipts",
]

TOOLS_PATH = Path(__file__).resolve().with_name("tools.py")
_MAX_ERROR_DAYS = 62


def receipt_id(index: int) -> str:
    return f"r-{index:04d}"


def call_id(index: int) -> str:
    return f"c-{index:04d}"


@dataclass(frozen=True, slots=True)
class TraceCall(JsonRecord):
    """One executed call in a trace: what was asked and the JSON response that came back."""

    call_id: str
    tool_id: str
    args: dict[str, Any]
    response: dict[str, Any]


class _Builder:
    def __init__(self, task_id: str, cid: str, tool_id: str, args: Any, response: Any, first: int):
        self.task_id = task_id
        self.call_id = cid
        self.tool_id = tool_id
        self.args_sha = args_digest(args)
        self.response_sha = response_digest(response)
        self.next = first
        self.out: list[Receipt] = []

    def add(
        self,
        path: str,
        value: Any,
        scope: tuple[str | None, str | None, str | None, str | None],
        *,
        ok: bool = True,
        valid: bool = True,
    ) -> None:
        self.out.append(
            Receipt(
                receipt_id=receipt_id(self.next),
                task_id=self.task_id,
                call_id=self.call_id,
                tool_id=self.tool_id,
                args_sha256=self.args_sha,
                response_sha256=self.response_sha,
                source_path=path,
                value=value,
                value_sha256=value_digest(value),
                exec_status="ok" if ok else "error",
                validation="valid" if valid else "invalid",
                scope=ReceiptScope(*scope),
            )
        )
        self.next += 1


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _date_or_none(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return dt.date.fromisoformat(value).isoformat() if len(value) == 10 else None
    except ValueError:
        return None


def _requested_scopes(
    tool_id: str, args: dict[str, Any]
) -> list[tuple[str | None, str | None, str | None, str | None]]:
    """The scopes a call asked for, from its arguments (used when it answered with an error)."""
    ent = _str_or_none(args.get("entity"))
    attr = _str_or_none(args.get("attribute"))
    # Metrics exist at store level only, so a failed metric call still names its level.
    if tool_id == "get_metric":
        return [(ent, attr, "store", _date_or_none(args.get("date")))]
    if tool_id == "get_series":
        d0, d1 = _date_or_none(args.get("start")), _date_or_none(args.get("end"))
        if d0 is not None and d1 is not None:
            a, b = dt.date.fromisoformat(d0), dt.date.fromisoformat(d1)
            if a <= b and (b - a).days < _MAX_ERROR_DAYS:
                days = [(a + dt.timedelta(days=i)).isoformat() for i in range((b - a).days + 1)]
                return [(ent, attr, "store", d) for d in days]
        return [(ent, attr, "store", None)]
    if tool_id == "get_parent":
        return [(ent, "parent", None, None)]
    if tool_id == "list_entities":
        return [(None, "parent", _str_or_none(args.get("level")), None)]
    return []


def to_receipts(
    task_id: str,
    call_id: str,
    tool_id: str,
    args: dict[str, Any],
    response: dict[str, Any],
    *,
    first_index: int,
) -> list[Receipt]:
    """Normalise one executed call into typed receipts (rules in the module docstring).

    An odd response never raises: one that does not match its schema becomes one
    ``error``/``invalid`` receipt, so nothing it says can support a claim. (Only a response
    with no RFC 8785 encoding, e.g. an integer beyond 2**53, raises ``FormatError``.)
    """
    if tool_id not in tools.TOOL_SCHEMAS or not isinstance(args, dict):
        return []
    if tool_id in tools.SIDE_EFFECT_TOOLS:
        return []
    if isinstance(response, dict) and response.get("ok") is False:
        return []  # refused before execution: no evidence either way
    b = _Builder(task_id, call_id, tool_id, args, response, first_index)
    if tools.validate(response, tools.TOOL_SCHEMAS[tool_id]["response"]) is not None:
        scopes = _requested_scopes(tool_id, args)[:1] or [(None, None, None, None)]
        b.add("", None, scopes[0], ok=False, valid=False)
        return b.out
    result = response["result"]
    if "error" in result:
        for scope in _requested_scopes(tool_id, args):
            b.add("/result/error", None, scope, ok=False)
        return b.out
    if tool_id == "get_metric":
        scope = (result["entity"], result["attribute"], result["level"], result["date"])
        b.add("/result/value", result["value"], scope, valid=not result.get("superseded", False))
    elif tool_id == "get_series":
        for i, point in enumerate(result["points"]):
            scope = (result["entity"], result["attribute"], result["level"], point["date"])
            stale = point.get("superseded", False)
            b.add(f"/result/points/{i}/value", point["value"], scope, valid=not stale)
    elif tool_id == "list_entities":
        for i, row in enumerate(result["entities"]):
            if row["parent"] is not None:
                scope = (row["id"], "parent", result["level"], None)
                b.add(f"/result/entities/{i}/parent", row["parent"], scope)
    elif tool_id == "get_parent" and result["parent"] is not None:
        scope = (result["entity"], "parent", result["level"], None)
        b.add("/result/parent", result["parent"], scope)
    return b.out


def ledger_from_trace(task_id: str, trace: Sequence[TraceCall]) -> Ledger:
    """The ledger the trusted adapter builds from a whole trace (receipt ids in call order)."""
    receipts: list[Receipt] = []
    for call in trace:
        receipts.extend(
            to_receipts(
                task_id,
                call.call_id,
                call.tool_id,
                call.args,
                call.response,
                first_index=len(receipts) + 1,
            )
        )
    return Ledger(task_id=task_id, receipts=tuple(receipts))
