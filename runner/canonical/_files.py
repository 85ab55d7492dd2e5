"""Durable whole-file writes: temp file -> fsync -> rename -> fsync directory.

The one atomic-write helper of ect-runner (the store's manifest, checkpoints and salvage, the
study's lock and schedule, the reports, the kill-switch ledger): after a crash at any point the
target holds either its old bytes or its new bytes, never a mix, and once the call returns the
new bytes and their name survive power loss. The temp file (unique, in the target's directory)
is removed on any failure before the rename.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["Hook", "atomic_write", "atomic_write_all", "fsync_dir"]

Hook = Callable[[str], None]
"""Called with a crash-point name at each durability boundary (tests inject crashes here)."""


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make the directory entries of ``directory`` (a rename, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _no_hook(point: str) -> None:
    return None


def _naming(e: OSError, target: Path) -> OSError:
    """``e`` as the same kind of OSError (errno and text kept) naming ``target`` only."""
    named = type(e)(e.errno, e.strerror or str(e), str(target)) if e.errno is not None else e
    return named


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    hook: Hook = _no_hook,
    point: str = "write",
    mode: int = 0o644,
) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file.

    ``hook`` is called with ``point + ".mid_file"`` after the temp file is durable but before
    the rename, and ``point + ".after_rename"`` before the directory is synced.

    Raises:
        OSError: the temp file could not be written or renamed (it is removed first). The error
            names ``path``, the file the caller asked for, never the temp file.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    import secrets  # here, not at the top: it loads `random`, which reading never needs

    tmp = directory / f".{target.name}.tmp-{secrets.token_hex(6)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                     mode)
    except OSError as e:
        raise _naming(e, target) from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        hook(point + ".mid_file")
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _naming(e, target) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    hook(point + ".after_rename")
    fsync_dir(directory)


def atomic_write_all(files: dict[Path, bytes], *, mode: int = 0o644) -> None:
    """Write several files as one output: every one goes to a temp sibling first, and only when
    all are written are they renamed into place. A failure on any (a full disk) removes every
    temp file and leaves each target as it was: no half of an output is left behind.

    Raises:
        OSError: a temp file could not be written (naming its target) or a rename failed.
    """
    import secrets

    temps: list[tuple[Path, Path]] = []
    try:
        for target, data in files.items():
            directory = target.parent if str(target.parent) else Path(".")
            tmp = directory / f".{target.name}.tmp-{secrets.token_hex(6)}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                             | getattr(os, "O_CLOEXEC", 0), mode)
            except OSError as e:
                raise _naming(e, target) from e
            temps.append((tmp, target))
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as e:
                raise _naming(e, target) from e
        for tmp, target in temps:
            os.replace(tmp, target)
    except BaseException:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        raise
    for directory in {target.parent if str(target.parent) else Path(".") for target in files}:
        fsync_dir(directory)
