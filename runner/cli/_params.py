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

__all__ = ["FiniteFloatRange", "check_store_dir"]


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
