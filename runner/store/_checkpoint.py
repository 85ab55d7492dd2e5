"""Signed checkpoints: what a store commits to at one moment, signed with Ed25519.

A checkpoint file (``<store>.checkpoint``) and each row of the ``checkpoints`` table hold the
canonical JSON of::

    {"checkpoint": {"format": "ect.checkpoint/1", "store_id": <32 hex>, "size": N,
                    "root": <hex RFC 6962 root of leaves 0..N-1>,
                    "chain_head": <hex chain_{N-1}>,
                    "attempts_size": M, "attempts_head": <hex attempt chain_{M-1} or 64 zeros>,
                    "created_utc": "...Z"},
     "public_key": "ed25519:<base64>",
     "signature": <base64 Ed25519 signature over canonical_bytes(checkpoint)>}
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from runner.canonical import JsonRecord, canonical_bytes, spec
from runner.errors import FormatError
from runner.store._keys import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
    encode_public_key,
    sign,
    verify_signature,
)

__all__ = ["CHECKPOINT_FORMAT", "Checkpoint", "make_checkpoint", "parse_checkpoint", "utc_now"]

CHECKPOINT_FORMAT = "ect.checkpoint/1"
_BODY_KEYS = frozenset(
    {
        "format",
        "store_id",
        "size",
        "root",
        "chain_head",
        "attempts_size",
        "attempts_head",
        "created_utc",
    }
)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_READ = spec(skip=True)  # read from the body by load_checkpoint


@dataclass(frozen=True, kw_only=True)
class Checkpoint(JsonRecord):
    """A signed checkpoint: its body as signed, the key and the signature (what is written),
    and the body's fields as read."""

    body: dict[str, Any] = field(metadata=spec(key="checkpoint"))
    public_key: str
    signature: str
    store_id: str = field(metadata=_READ)
    size: int = field(metadata=_READ)
    root: bytes = field(metadata=_READ)
    chain_head: bytes = field(metadata=_READ)
    attempts_size: int = field(metadata=_READ)
    attempts_head: bytes = field(metadata=_READ)
    created_utc: str = field(metadata=_READ)

    def signed_by(self, key: Ed25519PublicKey) -> bool:
        """True when the signature verifies under ``key`` and names that key."""
        if self.public_key != encode_public_key(key):
            return False
        return verify_signature(key, canonical_bytes(self.body), self.signature)


def make_checkpoint(
    key: Ed25519PrivateKey,
    *,
    store_id: str,
    size: int,
    root: bytes,
    chain_head: bytes,
    attempts_size: int,
    attempts_head: bytes,
) -> dict[str, Any]:
    body = {
        "format": CHECKPOINT_FORMAT,
        "store_id": store_id,
        "size": size,
        "root": root.hex(),
        "chain_head": chain_head.hex(),
        "attempts_size": attempts_size,
        "attempts_head": attempts_head.hex(),
        "created_utc": utc_now(),
    }
    return {
        "checkpoint": body,
        "public_key": encode_public_key(key.public_key()),
        "signature": sign(key, canonical_bytes(body)),
    }


def _hex32(obj: dict[str, Any], key: str) -> bytes:
    v = obj.get(key)
    if not isinstance(v, str) or len(v) != 64:
        raise FormatError(f"checkpoint.{key} is not 64 hex digits")
    try:
        return bytes.fromhex(v)
    except ValueError as e:
        raise FormatError(f"checkpoint.{key} is not hex") from e


def _count(obj: dict[str, Any], key: str) -> int:
    v = obj.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise FormatError(f"checkpoint.{key} is not a non-negative integer")
    return v


def parse_checkpoint(obj: Any) -> Checkpoint:
    """Check a checkpoint's shape (not its signature).

    Raises:
        FormatError: a field is missing, unknown or of the wrong type.
    """
    if not isinstance(obj, dict) or set(obj) != {"checkpoint", "public_key", "signature"}:
        raise FormatError("checkpoint must have exactly checkpoint, public_key, signature")
    body = obj["checkpoint"]
    if not isinstance(body, dict) or set(body) != _BODY_KEYS:
        raise FormatError("checkpoint body has missing or unknown fields")
    if body["format"] != CHECKPOINT_FORMAT:
        raise FormatError(f"unknown checkpoint format {body['format']!r}")
    if not isinstance(body["store_id"], str) or not isinstance(body["created_utc"], str):
        raise FormatError("checkpoint.store_id / created_utc must be strings")
    if not isinstance(obj["public_key"], str) or not isinstance(obj["signature"], str):
        raise FormatError("checkpoint public_key / signature must be strings")
    return Checkpoint(
        store_id=body["store_id"],
        size=_count(body, "size"),
        root=_hex32(body, "root"),
        chain_head=_hex32(body, "chain_head"),
        attempts_size=_count(body, "attempts_size"),
        attempts_head=_hex32(body, "attempts_head"),
        created_utc=body["created_utc"],
        public_key=obj["public_key"],
        signature=obj["signature"],
        body=body,
    )
