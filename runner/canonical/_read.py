"""Bounded reading of user-supplied input files (specs, schedules, contracts, ledgers, ...).

Every file a command parses is read through :func:`read_bounded`: only regular files (a FIFO,
a device such as ``/dev/zero`` or a directory is refused before a byte is read, so nothing can
hang or grow without bound), at most ``limit`` bytes. TOML goes through :func:`loads_toml`,
which caps nesting the way :func:`~runner.canonical.loads_strict` does for JSON, so a hostile
document fails with one line instead of a ``RecursionError``.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Any

from runner.canonical._strict import MAX_DEPTH, MAX_INPUT_BYTES
from runner.errors import ExitCategory, FormatError

__all__ = ["MAX_TOML_BYTES", "InputRefused", "check_depth", "loads_toml", "read_bounded"]

MAX_TOML_BYTES = 4 * 1024 * 1024
"""Specs are hand-written configuration: a few KiB. Anything over 4 MiB is refused."""


MAX_TOML_DOTS_PER_LINE = 1024
"""Dotted keys (``a.b.c``) cost the TOML parser quadratic time in their length; a line with
more dots than this (outside quoted strings) is refused before parsing."""

_QUOTED = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'')


class InputRefused(FormatError):
    """An input file is not something a command may read: a FIFO or device, or too large.

    ``too_large`` tells the two apart (a regular file over the limit is malformed input; a FIFO
    or device is a usage error).
    """

    exit_category = ExitCategory.USAGE

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


def read_bounded(
    path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES, what: str = "input"
) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    The file is opened non-blocking (so a FIFO with no writer cannot hang the open) and
    checked with ``fstat`` on the open descriptor before anything is read.

    Raises:
        InputRefused: not a regular file (FIFO, socket, device), or larger than ``limit``.
        OSError: the file cannot be opened (missing, permission, a directory, ...), left for
            the caller to report as a usage error.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "not a regular file"
            )
            raise InputRefused(f"{what} {os.fspath(path)} is {kind}; only regular files are read")
        if st.st_size > limit:
            raise InputRefused(
                f"{what} {os.fspath(path)} is {st.st_size} bytes, over the {limit}-byte limit",
                too_large=True,
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # a file that grew after fstat
                raise InputRefused(
                    f"{what} {os.fspath(path)} is over the {limit}-byte limit", too_large=True
                )
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_depth(obj: Any, limit: int = MAX_DEPTH, *, what: str = "input") -> None:
    """Raise :class:`FormatError` when lists/dicts in ``obj`` nest deeper than ``limit``.

    Iterative, so it is safe on any depth the parser produced.
    """
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            raise FormatError(f"{what}: nesting deeper than {limit}")
        stack.extend((c, depth + 1) for c in children)


def loads_toml(data: bytes, *, max_depth: int = MAX_DEPTH, what: str = "TOML") -> dict[str, Any]:
    """Parse TOML bytes with a nesting cap.

    Raises:
        FormatError: not UTF-8, not TOML, or nested deeper than ``max_depth`` (including
            documents so deep that the parser itself would recurse without bound).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{what} is not UTF-8 (byte {e.start})") from e
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.count(".") > MAX_TOML_DOTS_PER_LINE and (
            _QUOTED.sub("", line).count(".") > MAX_TOML_DOTS_PER_LINE
        ):
            raise FormatError(
                f"{what}: line {lineno} has more than {MAX_TOML_DOTS_PER_LINE} dotted parts"
            )
    import tomllib  # here, not at the top: `ect verify` and `ect --help` never parse TOML

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FormatError(f"{what} is not valid TOML: {e}") from e
    except RecursionError as e:
        raise FormatError(f"{what}: nesting deeper than {max_depth}") from e
    check_depth(doc, max_depth, what=what)
    return doc
