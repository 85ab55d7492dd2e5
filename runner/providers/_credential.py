"""Explicit credentials only: a file with owner-only permissions, or one named variable.

The secret lives in one :class:`Credential` object whose ``repr``/``str`` are redacted and which
refuses to be pickled. A credential read from a variable is removed from ``os.environ`` at once,
so no child process started afterwards can inherit it. Error messages name the file or the
variable, never the value.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import NoReturn

from runner.providers._errors import CredentialError

__all__ = ["REDACTED", "Credential", "load_credential"]

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
    return Credential(value.strip(), source=f"env {name}")


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
