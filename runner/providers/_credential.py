"""Explicit credentials only: a file with owner-only permissions, or one named variable.

The secret lives in one :class:`Credential` object whose ``repr``/``str`` are redacted and which
refuses to be pickled. A credential read from a variable is removed from ``os.environ`` at once,
so no child process started afterwards can inherit it, and on Linux its bytes are also wiped
from the process's initial environment block (what ``/proc/PID/environ`` shows to other
processes of the same user, which ``os.environ``/``unsetenv`` never change). Error messages name
the file or the variable, never the value.
"""

from __future__ import annotations

import ctypes
import os
import re
import stat
import sys
from pathlib import Path
from typing import NoReturn

from runner.providers._errors import CredentialError

__all__ = ["REDACTED", "Credential", "load_credential", "wipe_initial_environment"]

REDACTED = "[REDACTED]"
_ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_BYTES = 4096


class Credential:
    """An API key held in memory. ``source`` says where it came from (no secret in it)."""

    __slots__ = ("_secret", "source")

    def __init__(self, secret: str, *, source: str) -> None:
        if not isinstance(secret, str) or not secret:
            raise CredentialError(f"credential from {source} is empty")
        if any(ord(c) < 0x21 or ord(c) > 0x7E for c in secret):
            raise CredentialError(
                f"credential from {source} must be one line of printable ASCII without spaces"
            )
        self._secret = secret
        self.source = source

    def reveal(self) -> str:
        """The secret itself; hand it only to the HTTP layer of a provider adapter."""
        return self._secret

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the secret replaced by ``[REDACTED]``."""
        return text.replace(self._secret, REDACTED) if self._secret in text else text

    def __repr__(self) -> str:
        return f"Credential(source={self.source!r}, secret={REDACTED})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Credential cannot be pickled or copied into another process")

    def __eq__(self, other: object) -> bool:
        return NotImplemented

    __hash__ = object.__hash__


def _from_file(path: Path) -> Credential:
    source = f"file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise CredentialError(f"credential file {path} does not exist") from None
    except OSError as e:
        raise CredentialError(f"credential file {path} cannot be opened: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CredentialError(f"credential file {path} is not a regular file")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise CredentialError(f"credential file {path} is not owned by the current user")
        if st.st_mode & 0o077:
            raise CredentialError(
                f"credential file {path} has mode {stat.S_IMODE(st.st_mode):04o}; it must not be "
                f"readable or writable by group or others (run: chmod 600 {path})"
            )
        data = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_BYTES:
        raise CredentialError(f"credential file {path} is larger than {_MAX_BYTES} bytes")
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise CredentialError(f"credential file {path} is not ASCII text") from None
    return Credential(text, source=source)


def _from_env(name: str) -> Credential:
    if not _ENV_NAME.match(name):
        raise CredentialError(f"--credential-env expects a variable name, not {name[:40]!r}")
    # pop, not get: children started after this point must not inherit the secret.
    value = os.environ.pop(name, None)
    if value is None:
        raise CredentialError(f"environment variable {name} is not set")
    # and out of the initial block, which /proc/PID/environ keeps showing after unsetenv
    wipe_initial_environment(name)
    return Credential(value.strip(), source=f"env {name}")


def wipe_initial_environment(name: str) -> bool:
    """Overwrite every ``NAME=value`` entry of this process's initial environment block with
    zero bytes; return whether the block was found (Linux only; False elsewhere).

    ``os.environ.pop`` calls ``unsetenv``, which drops the C library's pointer to the entry but
    leaves its bytes where the kernel put them at ``execve``; ``/proc/PID/environ`` reads those
    bytes (``env_start``..``env_end`` in ``/proc/PID/stat``), so the value stays readable there
    by any process of the same user for the whole run. The block is this process's own memory
    and nothing points into it once the entry is unset (CPython copied it into ``os.environ``
    at start-up), so it is overwritten in place. The block is touched only when its bytes are
    exactly what ``/proc/self/environ`` shows. Call it after ``os.environ.pop(name)``.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        with open("/proc/self/stat", "rb") as f:
            stat_line = f.read()
        with open("/proc/self/environ", "rb") as f:
            shown = f.read()
        fields = stat_line[stat_line.rindex(b")") + 2:].split()
        start, end = int(fields[50 - 3]), int(fields[51 - 3])  # proc(5): fields 50 and 51
    except (OSError, ValueError, IndexError):
        return False
    if not 0 < start < end or end - start != len(shown):
        return False
    if ctypes.string_at(start, end - start) != shown:
        return False
    key = name.encode("ascii") + b"="
    at = 0
    while (i := shown.find(key, at)) >= 0:
        stop = shown.find(b"\0", i)
        stop = len(shown) if stop < 0 else stop
        if i == 0 or shown[i - 1] == 0:
            ctypes.memset(start + i, 0, stop - i)
        at = stop
    return True


def load_credential(
    file: str | os.PathLike[str] | None = None, env: str | None = None
) -> Credential:
    """Load the credential from exactly one explicit source.

    Raises:
        CredentialError: neither or both sources given; file missing, not a regular file, not
            owned by the user, group/world accessible, or malformed; variable unset or malformed.
    """
    if (file is None) == (env is None):
        raise CredentialError("give exactly one of --credential-file PATH or --credential-env NAME")
    if file is not None:
        return _from_file(Path(file))
    assert env is not None
    return _from_env(env)
