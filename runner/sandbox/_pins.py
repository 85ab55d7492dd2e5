"""Pins: the sha256 of every sandbox policy file, recorded in ``sandbox_profiles/PINS``.

A backend reads policy bytes only through :func:`read_pinned`, which refuses bytes whose digest
differs from the pin (naming the file and both digests). ``ect sandbox pins --write``
(:func:`write_pins`) recompiles the seccomp filters from their source and rewrites ``PINS`` after
a deliberate edit.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from runner._data import study_root
from runner.canonical import digest
from runner.sandbox._errors import PinMismatch

__all__ = [
    "PINNED_FILES",
    "PINS_FILE",
    "REPO_ROOT",
    "pins_digest",
    "read_pinned",
    "read_pins",
    "verify_pins",
    "write_pins",
]

# The checkout, or the copy of the policy tree a wheel carries (runner/_data.py).
REPO_ROOT = study_root()
PINS_FILE = "sandbox_profiles/PINS"
# Paths relative to the repository root. The worker is pinned because it applies Landlock.
PINNED_FILES: tuple[str, ...] = (
    "sandbox_profiles/worker.sb",
    "sandbox_profiles/seccomp.toml",
    "sandbox_profiles/seccomp-x86_64.bpf",
    "sandbox_profiles/seccomp-aarch64.bpf",
    "runner/sandbox/_worker.py",
)
_HEADER = (
    "# sha256 of every sandbox policy file (docs/sandbox.md). A backend refuses bytes that differ.\n"
    "# Regenerate after a deliberate edit: ect sandbox pins --write\n"
)


def read_pins(root: Path = REPO_ROOT) -> dict[str, str]:
    """Parse ``PINS`` (``<hex>  <path>`` lines) under ``root``."""
    path = root / PINS_FILE
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise PinMismatch(f"{path}: cannot read the pins file ({e.strerror})") from e
    pins: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or len(parts[0]) != 64:
            raise PinMismatch(f"{path}:{n}: expected '<sha256>  <path>'")
        pins[parts[1]] = parts[0]
    return pins


def read_pinned(rel: str, *, root: Path = REPO_ROOT) -> bytes:
    """Return the bytes of ``root/rel`` after checking them against their pin.

    Raises:
        PinMismatch: no pin for ``rel``, the file is unreadable, or its sha256 differs.
    """
    pins = read_pins(root)
    if rel not in pins:
        raise PinMismatch(f"{rel}: no pin in {PINS_FILE}")
    path = root / rel
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PinMismatch(f"{path}: cannot read pinned file ({e.strerror})") from e
    actual = hashlib.sha256(data).hexdigest()
    if actual != pins[rel]:
        raise PinMismatch(f"{path}: sha256 {actual} does not match pin {pins[rel]}")
    return data


def verify_pins(root: Path = REPO_ROOT) -> dict[str, str]:
    """Check every pinned file; return ``{path: sha256}``. Raises PinMismatch on the first bad one."""
    pins = read_pins(root)
    missing = [f for f in PINNED_FILES if f not in pins]
    if missing:
        raise PinMismatch(f"{PINS_FILE}: no pin for {', '.join(missing)}")
    return {rel: hashlib.sha256(read_pinned(rel, root=root)).hexdigest() for rel in PINNED_FILES}


def pins_digest(root: Path = REPO_ROOT) -> str:
    """One digest over every verified pin, for the study lock."""
    return digest("ect/lock/v1", {"sandbox_pins": verify_pins(root)})


def write_pins(root: Path = REPO_ROOT) -> dict[str, str]:
    """Recompile both seccomp filters from ``seccomp.toml`` and rewrite ``PINS``; return the pins."""
    from runner.sandbox._seccomp import ARCHES, compile_policy_file

    source = (root / "sandbox_profiles/seccomp.toml").read_bytes()
    for arch in ARCHES:
        (root / f"sandbox_profiles/seccomp-{arch}.bpf").write_bytes(
            compile_policy_file(source, arch)
        )
    lines = [f"{hashlib.sha256((root / f).read_bytes()).hexdigest()}  {f}\n" for f in PINNED_FILES]
    (root / PINS_FILE).write_text(_HEADER + "".join(lines), "utf-8")
    return verify_pins(root)
