"""RFC 8785 JSON Canonicalization Scheme encoding through the ``rfc8785`` package."""

from __future__ import annotations

from typing import Any

import rfc8785

from runner.errors import FormatError

__all__ = ["canonical_bytes"]


def canonical_bytes(obj: Any) -> bytes:
    """Return the RFC 8785 (JCS) encoding of ``obj``.

    Raises:
        FormatError: ``obj`` holds a value JCS cannot represent (NaN, Infinity, an integer
            outside the IEEE-754 safe range, a non-string key, an unsupported type).
    """
    try:
        return rfc8785.dumps(obj)
    except rfc8785.CanonicalizationError as e:
        raise FormatError(f"not canonicalizable: {e}") from e
    except (TypeError, ValueError, RecursionError) as e:
        raise FormatError(f"not canonicalizable: {type(e).__name__}: {e}") from e
