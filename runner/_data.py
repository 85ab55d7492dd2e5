"""Where the study's data lives: ``schedules/``, ``sandbox_profiles/`` and ``preflight/``.

In a checkout (the source tree ``runner`` is imported from, the folders beside it) these are
the repository's own top-level folders. An installed wheel carries a copy of them
inside the package, ``runner/_study/`` (mapped there at build time by ``setup.py``, together with
the pinned sandbox worker so the tree is the whole policy tree ``sandbox_profiles/PINS`` names),
found through :mod:`importlib.resources`.

When both exist (a build run in place leaves ``runner/_study/`` in a checkout) the checkout's
files are used, and a packaged copy that differs from them is refused rather than silently
shadowed (:class:`StudyDataDrift`).
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from pathlib import Path

from runner.errors import EctError, ExitCategory

__all__ = ["DATA_DIRS", "PACKAGED", "StudyDataDrift", "checkout_root", "study_root", "tree_digests"]

DATA_DIRS: tuple[str, ...] = ("schedules", "sandbox_profiles", "preflight")
# The package folder a wheel carries the data in (see setup.py).
PACKAGED = "_study"
# Files under DATA_DIRS that are not study data (a checkout's caches, editor files).
_SKIP_DIRS = frozenset({"__pycache__"})


class StudyDataDrift(EctError):
    """The packaged copy of the study's data differs from the checkout's files."""

    exit_category = ExitCategory.RUNTIME


def checkout_root() -> Path | None:
    """The source tree ``runner`` is imported from, when it is a checkout (or a copy of one:
    any of the data folders beside ``runner/``), else None."""
    root = Path(__file__).resolve().parent.parent
    if any((root / d).is_dir() for d in DATA_DIRS):
        return root
    return None


def tree_digests(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root``'s data folders."""
    out: dict[str, str] = {}
    for name in DATA_DIRS:
        base = root / name
        for path in sorted(base.rglob("*")):
            if path.is_file() and not _SKIP_DIRS.intersection(path.relative_to(root).parts):
                out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@functools.cache
def study_root() -> Path:
    """The folder holding ``schedules/``, ``sandbox_profiles/`` and ``preflight/``.

    A package carrying no data (a broken install) still gets its would-be folder, so the first
    read names the missing file.

    Raises:
        StudyDataDrift: run from a checkout whose ``runner/_study/`` differs from its files.
    """
    packaged = Path(str(resources.files("runner") / PACKAGED))
    checkout = checkout_root()
    if checkout is None:
        return packaged
    if packaged.is_dir():
        ours = tree_digests(checkout)
        theirs = tree_digests(packaged)
        changed = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
        if changed:
            raise StudyDataDrift(
                f"{packaged} differs from the checkout's study files ({', '.join(changed[:3])}"
                f"{', ...' if len(changed) > 3 else ''}): remove it (a stale build) or rebuild")
    return checkout
