"""Ed25519 signing keys for checkpoints and manifests (``cryptography``).

Private keys are PKCS#8 PEM files created with mode 0600; like ssh, loading refuses a private
key that group or others may read or write. Public keys are SubjectPublicKeyInfo PEM files
(``<key>.pub`` beside the private key). Inside the store a public key is written
``"ed25519:" + base64(raw 32 bytes)``.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from runner.canonical import read_bounded
from runner.errors import FormatError
from runner.store._errors import InsecureKeyFile, KeyFileError

__all__ = [
    "Ed25519PrivateKey",
    "Ed25519PublicKey",
    "decode_public_key",
    "encode_public_key",
    "generate_key",
    "load_public_key",
    "load_signing_key",
    "public_key_path",
    "sign",
    "verify_signature",
]

_PREFIX = "ed25519:"


def public_key_path(path: str | os.PathLike[str]) -> Path:
    """Where :func:`generate_key` puts the public half of the key at ``path``."""
    return Path(os.fspath(path) + ".pub")


def generate_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Create a new Ed25519 key: private PEM at ``path`` (0600), public PEM at ``path + ".pub"``.

    Raises:
        KeyFileError: ``path`` or its ``.pub`` already exists (keys are never overwritten).
    """
    key = Ed25519PrivateKey.generate()
    priv = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pub_path = public_key_path(path)
    for p in (pub_path, Path(path)):
        if p.exists() or p.is_symlink():
            raise KeyFileError(f"refusing to overwrite existing key file {p}")
    # Each file is written in full to a temporary name, then linked into place (link, unlike
    # rename, never replaces an existing file): a full disk, a read-only directory or a crash
    # leaves no empty or partial key behind, only (after a crash) a temporary file.
    _write_new(Path(path), priv, 0o600)
    try:
        _write_new(pub_path, pub, 0o644)
    except BaseException:
        Path(path).unlink(missing_ok=True)
        raise
    return key


def _write_new(path: Path, data: bytes, mode: int) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    tmp = directory / f".{path.name}.tmp-{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)  # the umask may have narrowed it; never widened
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError as e:
            raise KeyFileError(f"refusing to overwrite existing key file {path}") from e
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: str | os.PathLike[str]) -> bytes:
    try:
        return read_bounded(path, limit=64 * 1024, what="key file")
    except FileNotFoundError as e:
        raise KeyFileError(f"key file not found: {path}") from e
    except OSError as e:
        raise KeyFileError(f"cannot read key file {path}: {e.strerror}") from e
    except FormatError as e:
        raise KeyFileError(str(e)) from e


def load_signing_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Load a private key written by :func:`generate_key`.

    Raises:
        InsecureKeyFile: the file's mode lets group or others read or write it.
        KeyFileError: missing, unreadable, or not an unencrypted Ed25519 PKCS#8 PEM key.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError as e:
        raise KeyFileError(f"key file not found: {path}") from e
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise InsecureKeyFile(
            f"permissions {mode:04o} for private key {path} are too open (chmod 600 it)"
        )
    data = _read(path)
    if not data.strip():
        raise KeyFileError(f"{path} is empty (left by an interrupted write?); delete it, or "
                           "restore the store's key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise KeyFileError(f"{path} is not an unencrypted PEM private key") from e
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path} is not an Ed25519 private key")
    return key


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Load a public key: a PEM public key file, or a text file holding ``ed25519:<base64>``.

    Raises:
        KeyFileError: missing, unreadable, or not an Ed25519 public key.
    """
    data = _read(path)
    text = data.strip()
    if text.startswith(_PREFIX.encode()):
        return decode_public_key(text.decode("ascii", "replace"))
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as e:
        raise KeyFileError(f"{path} is not a PEM public key") from e
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path} is not an Ed25519 public key")
    return key


def encode_public_key(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _PREFIX + base64.b64encode(raw).decode("ascii")


def decode_public_key(text: str) -> Ed25519PublicKey:
    """Parse ``ed25519:<base64 of 32 bytes>``.

    Raises:
        KeyFileError: not of that form.
    """
    if not isinstance(text, str) or not text.startswith(_PREFIX):
        raise KeyFileError("public key is not of the form ed25519:<base64>")
    try:
        raw = base64.b64decode(text[len(_PREFIX) :], validate=True)
    except (binascii.Error, ValueError) as e:
        raise KeyFileError("public key is not valid base64") from e
    if len(raw) != 32:
        raise KeyFileError("an Ed25519 public key is 32 bytes")
    return Ed25519PublicKey.from_public_bytes(raw)


def sign(key: Ed25519PrivateKey, message: bytes) -> str:
    """Sign ``message``; the signature as standard base64."""
    return base64.b64encode(key.sign(message)).decode("ascii")


def verify_signature(key: Ed25519PublicKey, message: bytes, signature: object) -> bool:
    """True when ``signature`` (base64 text) is ``key``'s valid signature over ``message``."""
    if not isinstance(signature, str):
        return False
    try:
        raw = base64.b64decode(signature, validate=True)
        key.verify(raw, message)
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True
