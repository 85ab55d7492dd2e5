"""Domain-separated sha256 digests: ``"sha256:" + hex(sha256(DOMAIN + b"\\n" + jcs(obj)))``."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from runner.canonical._jcs import canonical_bytes

__all__ = ["DOMAINS", "Domain", "digest", "digest_bytes", "is_digest", "raw_digest"]

# The domains of docs/formats.md §1. Part of the wire format: adding one is a format change.
Domain = Literal[
    "ect/task-descriptor/v1",
    "ect/ledger/v1",
    "ect/receipt/v1",
    "ect/value/v1",
    "ect/args/v1",
    "ect/response/v1",
    "ect/schedule-row/v1",
    "ect/record/v1",
    "ect/manifest/v1",
    "ect/lock/v1",
]
DOMAINS: frozenset[str] = frozenset(Domain.__args__)  # type: ignore[attr-defined]

_DIGEST_RE = re.compile(r"\Asha256:[0-9a-f]{64}\Z")


def raw_digest(data: bytes) -> str:
    """``"sha256:" + hex(sha256(data))``: the digest of exact bytes, with no domain (files
    pinned byte for byte, blobs, raw requests). The one place this formula is written."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_bytes(domain: str, payload: bytes) -> str:
    """Digest already-canonical bytes under ``domain``."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown digest domain {domain!r}")
    h = hashlib.sha256()
    h.update(domain.encode("ascii"))
    h.update(b"\n")
    h.update(payload)
    return "sha256:" + h.hexdigest()


def digest(domain: Domain, obj: Any) -> str:
    """Return the ``sha256:<hex>`` digest of ``obj``'s RFC 8785 encoding under ``domain``.

    Raises:
        FormatError: ``obj`` cannot be canonicalized.
        ValueError: ``domain`` is not one of :data:`DOMAINS`.
    """
    return digest_bytes(domain, canonical_bytes(obj))


def is_digest(value: object) -> bool:
    """True when ``value`` is a well-formed ``sha256:`` digest string (lowercase hex)."""
    return isinstance(value, str) and _DIGEST_RE.match(value) is not None
