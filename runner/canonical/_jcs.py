"""RFC 8785 JSON Canonicalization Scheme encoding.

The reference encoder is the ``rfc8785`` package (pure Python). For "plain" values (no floats,
integers inside the IEEE-754 safe range, object keys below U+E000 so that code point order equals
the UTF-16 order JCS sorts by) the C-accelerated standard-library encoder, configured as below,
writes exactly the same bytes (same string escapes, same key order, no whitespace) several times
faster; everything else goes to ``rfc8785``. A property test pins the two to the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

from runner.errors import FormatError

__all__ = ["canonical_bytes"]

_SAFE_INT = 2**53 - 1
_PLAIN_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"), check_circular=False
)


def _plain(obj: Any, depth: int = 0) -> bool:
    t = type(obj)
    if t is str or t is bool or obj is None:
        return True
    if t is int:
        return bool(-_SAFE_INT <= obj <= _SAFE_INT)
    if depth > 100:
        return False
    if t is dict:
        for k, v in obj.items():
            if type(k) is not str or not (k.isascii() or max(k, default="a") < "\ue000"):
                return False
            if not _plain(v, depth + 1):
                return False
        return True
    if t is list or t is tuple:
        return all(_plain(v, depth + 1) for v in obj)
    return False


def canonical_bytes(obj: Any) -> bytes:
    """Return the RFC 8785 (JCS) encoding of ``obj``.

    Raises:
        FormatError: ``obj`` holds a value JCS cannot represent (NaN, Infinity, an integer
            outside the IEEE-754 safe range, a non-string key, a lone surrogate, an unsupported
            type).
    """
    if _plain(obj):
        try:
            return _PLAIN_ENCODER.encode(obj).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: rfc8785 below raises the proper error
    try:
        return rfc8785.dumps(obj)
    except rfc8785.CanonicalizationError as e:
        raise FormatError(f"not canonicalizable: {str(e)[:200]}") from e
    except (TypeError, ValueError, RecursionError) as e:
        raise FormatError(f"not canonicalizable: {type(e).__name__}: {str(e)[:200]}") from e
