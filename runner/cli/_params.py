"""Parameter types and early checks shared by several commands (bad input -> a usage error).

click's ``FloatRange`` lets ``nan`` through (every comparison with it is false), and ``inf``
through when no maximum is set; a NaN cost ceiling or timeout silently disables the limit, so
every float flag that bounds something uses :class:`FiniteFloatRange` instead.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from runner.cli._common import EXIT_USAGE, die

__all__ = [
    "DEFAULT_SCHEDULE",
    "DEFAULT_SPEC",
    "DEFAULT_STATIC_SPEC",
    "PROVIDER_NAMES",
    "FiniteFloatRange",
    "check_store_dir",
    "study_file",
]

# The provider names as runner.providers.PROVIDER_NAMES lists them, stated here so that building
# the command line never imports runner.providers (httpx); tests/cli/test_startup.py checks that
# the two agree.
PROVIDER_NAMES: tuple[str, ...] = ("simulated", "gemini", "openai")

# The study's files live in the repository's schedules/ directory (beside runner/), not in the
# installed package: the lock pins them together with the source tree.
DEFAULT_SPEC = "schedules/v2.toml"
DEFAULT_STATIC_SPEC = "schedules/static.toml"
DEFAULT_SCHEDULE = "schedules/v2.schedule.jsonl"


class FiniteFloatRange(click.FloatRange):
    """A ``click.FloatRange`` that also refuses ``nan`` and ``±inf``."""

    name = "float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if rv is not None and not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


def check_store_dir(store: str | Path, what: str = "store") -> None:
    """Exit 2 when the directory a new store (or other ``what``) would go in does not exist."""
    parent = Path(store).parent
    if not parent.is_dir():
        die(f"{what} directory {parent} does not exist (create it first)", EXIT_USAGE)


def check_out_dir(out: str | Path, *, fresh: bool, option: str = "--out") -> None:
    """Refuse an output directory before any work (exit 2): a path that is a file, one that
    cannot be created or written (the nearest existing ancestor is not writable), and, with
    ``fresh``, a folder that already holds something (a command that fills a folder of its own
    does not write into someone else's).
    """
    import os

    path = Path(out)
    if path.exists() and not path.is_dir():
        die(f"{option} {path}: exists and is not a directory", EXIT_USAGE)
    if fresh and path.is_dir() and any(path.iterdir()):
        die(f"{option} {path}: exists and is not empty; give a new or empty directory",
            EXIT_USAGE)
    ancestor = path
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        die(f"{option} {path}: cannot write in {ancestor}", EXIT_USAGE)


def study_file(given: str | None, default: str, option: str) -> str:
    """The path of a study file: ``given`` as typed, else ``default`` found from here, else in
    the checkout ``runner`` runs from or the study data an installed wheel carries (so ``ect
    demo`` works outside the repository root).

    A path the user typed is never replaced by another file: a missing one is a usage error.
    """
    if given is not None:
        if not Path(given).exists():  # anything else (a FIFO, a device) the reader refuses
            die(f"{option} {given}: no such file", EXIT_USAGE)
        return given
    if Path(default).is_file():
        return default
    from runner.study import study_root

    beside = study_root() / default
    if beside.is_file():
        return str(beside)
    die(f"{default} not found here or in {study_root()}: run from the ect-runner repository "
        f"root or pass {option} PATH", EXIT_USAGE)
