"""The ECT digests of docs/formats.md §1-5, all through :func:`runner.canonical.digest`."""

from __future__ import annotations

import sys
from typing import Any

from runner.canonical import canonical_bytes, digest, digest_bytes
from runner.ect._wire import MAX_SAFE_INT, Descriptor, Ledger, Receipt

__all__ = [
    "args_digest",
    "descriptor_digest",
    "ledger_digest",
    "receipt_digest",
    "response_digest",
    "value_digest",
]


def descriptor_digest(descriptor: Descriptor | dict[str, Any]) -> str:
    """``ect/task-descriptor/v1`` digest of the descriptor object.

    A ``dict`` is first parsed strictly as a :class:`Descriptor` (so a malformed descriptor
    raises :class:`runner.ect.WireFormatError` instead of hashing to something meaningless).
    """
    if not isinstance(descriptor, Descriptor):
        descriptor = Descriptor.from_json(descriptor)
    return digest("ect/task-descriptor/v1", descriptor.to_json())


# A fast RFC 8785 path specialised to the ledger's known shape. For a payload whose keys are
# ASCII field names and whose leaves are strings, None and integers in the IEEE-754 safe range
# (no float: JCS writes numbers the ECMAScript way), msgspec's compact sorted-key encoding is
# byte-identical to JCS (the same fact runner.canonical's plain-value path relies on for the
# stdlib encoder; msgspec is ~10x faster on a ledger). Checking each receipt's field types
# directly is much cheaper than the generic recursive scan; anything else (a float value, a
# field of another type) goes through canonical_bytes, and a lone surrogate makes msgspec
# raise, so it does too. tests/ect/test_digests.py pins both paths to the same digest.
_STR_OR_NONE = frozenset({str, type(None)})


def _plain_receipt(r: Receipt) -> bool:
    v = r.value
    t = type(v)
    if t is int:
        if not -MAX_SAFE_INT <= v <= MAX_SAFE_INT:  # type: ignore[operator]
            return False
    elif t is list:
        for x in v:  # type: ignore[union-attr]
            tx = type(x)
            if not (tx in _STR_OR_NONE or (tx is int and -MAX_SAFE_INT <= x <= MAX_SAFE_INT)):  # type: ignore[operator]
                return False
    elif t not in _STR_OR_NONE:
        return False
    s = r.scope
    types = {type(r.receipt_id), type(r.task_id), type(r.call_id), type(r.tool_id),
             type(r.args_sha256), type(r.response_sha256), type(r.source_path),
             type(r.value_sha256), type(r.exec_status), type(r.validation),
             type(s.entity), type(s.attribute), type(s.level), type(s.date)}
    return types <= _STR_OR_NONE


_MSGSPEC_FROM_RECEIPTS = 1000
"""A ledger of plain receipts is encoded by msgspec (the same bytes as RFC 8785, faster) when
msgspec is loaded already or the ledger has at least this many receipts; a one-shot
``ect verify`` of a small ledger does not load msgspec for it."""


def _ledger_sort_key(receipt: Receipt) -> tuple[str, bytes]:
    # Sorted by receipt_id; equal ids (a binding failure, but still hashable) by their bytes,
    # so the digest never depends on the order receipts arrived in.
    return (receipt.receipt_id, canonical_bytes(receipt.to_json()))


def ledger_digest(ledger: Ledger) -> str:
    """``ect/ledger/v1`` digest of ``{"task_id", "receipts"}``, receipts sorted by ``receipt_id``."""
    ids = [r.receipt_id for r in ledger.receipts]
    if len(set(ids)) == len(ids):
        ordered = sorted(ledger.receipts, key=lambda r: r.receipt_id)
    else:
        ordered = sorted(ledger.receipts, key=_ledger_sort_key)
    payload = {"task_id": ledger.task_id, "receipts": [r.to_json() for r in ordered]}
    if (
        type(ledger.task_id) is str
        and ("msgspec" in sys.modules or len(ordered) >= _MSGSPEC_FROM_RECEIPTS)
        and all(_plain_receipt(r) for r in ordered)
    ):
        try:
            import msgspec  # imported on first use: `import runner.ect` stays light

            return digest_bytes("ect/ledger/v1", msgspec.json.encode(payload, order="sorted"))
        except (UnicodeEncodeError, TypeError, ValueError):  # msgspec.EncodeError is a ValueError
            pass  # canonical_bytes below raises the proper FormatError
    return digest("ect/ledger/v1", payload)


def receipt_digest(receipt: Receipt) -> str:
    """``ect/receipt/v1`` digest of one receipt object."""
    return digest("ect/receipt/v1", receipt.to_json())


def value_digest(value: Any) -> str:
    """``ect/value/v1`` digest of a value (what a receipt's ``value_sha256`` must equal)."""
    t = type(value)
    if t is int and -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
        return digest_bytes("ect/value/v1", b"%d" % value)  # JCS of a safe integer
    return digest("ect/value/v1", value)


def args_digest(args: Any) -> str:
    """``ect/args/v1`` digest of a tool call's arguments."""
    return digest("ect/args/v1", args)


def response_digest(response: Any) -> str:
    """``ect/response/v1`` digest of a tool's JSON response."""
    return digest("ect/response/v1", response)
