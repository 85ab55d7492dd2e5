"""The ECT digests of DESIGN §3.1/§3.2, all through :func:`runner.canonical.digest`."""

from __future__ import annotations

from typing import Any

from runner.canonical import canonical_bytes, digest
from runner.ect._wire import Descriptor, Ledger, Receipt

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
    return digest(
        "ect/ledger/v1",
        {"task_id": ledger.task_id, "receipts": [r.to_json() for r in ordered]},
    )


def receipt_digest(receipt: Receipt) -> str:
    """``ect/receipt/v1`` digest of one receipt object."""
    return digest("ect/receipt/v1", receipt.to_json())


def value_digest(value: Any) -> str:
    """``ect/value/v1`` digest of a value (what a receipt's ``value_sha256`` must equal)."""
    return digest("ect/value/v1", value)


def args_digest(args: Any) -> str:
    """``ect/args/v1`` digest of a tool call's arguments."""
    return digest("ect/args/v1", args)


def response_digest(response: Any) -> str:
    """``ect/response/v1`` digest of a tool's JSON response."""
    return digest("ect/response/v1", response)
