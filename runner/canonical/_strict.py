"""Strict JSON parsing: duplicate keys, NaN/Infinity, over-deep nesting and oversize input fail.

The standard library parser accepts all of those silently (last duplicate wins, ``NaN`` parses
to a float); a verifier handed hostile input must refuse them with a clear one-line error.
"""

from __future__ import annotations

import json
import os
from typing import Any

from runner.errors import FormatError

__all__ = ["MAX_DEPTH", "MAX_INPUT_BYTES", "load_strict_file", "loads_strict"]

MAX_DEPTH = 64
MAX_INPUT_BYTES = 64 * 1024 * 1024


def _reject_constant(name: str) -> Any:
    raise FormatError(f"invalid JSON: {name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise FormatError(f"invalid JSON: number {text[:40]} is not finite")
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise FormatError(f"invalid JSON: duplicate key {key[:80]!r}")
        out[key] = value
    return out


def _check_depth(text: str, limit: int) -> None:
    # A linear scan outside strings: rejects deep nesting before the recursive parser sees it.
    # Nesting can never exceed the number of openers, so most documents skip the scan.
    if text.count("[") + text.count("{") <= limit:
        return
    depth = 0
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                raise FormatError(f"invalid JSON: nesting deeper than {limit}")
        elif ch in "]}":
            depth -= 1


def loads_strict(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON text strictly.

    Raises:
        FormatError: not UTF-8, not JSON, duplicate keys, NaN/Infinity, nesting deeper than
            ``max_depth``, input larger than :data:`MAX_INPUT_BYTES`, or an integer too long
            to convert.
    """
    if len(data) > MAX_INPUT_BYTES:
        raise FormatError(f"invalid JSON: input larger than {MAX_INPUT_BYTES} bytes")
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(f"invalid JSON: not UTF-8 at byte {e.start}") from e
    else:
        text = data
    if text.startswith("\ufeff"):
        raise FormatError("invalid JSON: byte order mark is not allowed")
    _check_depth(text, max_depth)
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except FormatError:
        raise
    except json.JSONDecodeError as e:
        raise FormatError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    except (ValueError, RecursionError) as e:
        raise FormatError(f"invalid JSON: {type(e).__name__}: {str(e)[:120]}") from e


def load_strict_file(path: str | os.PathLike[str], *, max_depth: int = MAX_DEPTH) -> Any:
    """Read and strictly parse a JSON file.

    Raises:
        FileNotFoundError / PermissionError / IsADirectoryError: the file cannot be read
            (left as ``OSError`` so a CLI can report a usage error).
        FormatError: as :func:`loads_strict`; also a FIFO or device (refused before reading,
            so nothing hangs) or a file over :data:`MAX_INPUT_BYTES`.
    """
    from runner.canonical._read import read_bounded

    return loads_strict(read_bounded(path, what="JSON file"), max_depth=max_depth)
