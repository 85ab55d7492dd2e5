"""``ect view``: a read-only local web viewer over a run store or ``ect static`` output.

Pages: the run (provider, lock, preflight, sandbox layers, integrity), the cell table (filter
and sort), one trajectory decision by decision with its Merkle inclusion proof checked in the
page, and the four pipelines side by side; ``write_bundle`` makes a static copy that opens from
``file://``. The store is opened read-only (see :class:`StoreSource`); nothing is ever written
to it. The ASGI app (Starlette, the ``view`` extra) is imported only by :func:`build_app`.
"""

from __future__ import annotations

import typing as _typing
from pathlib import Path as _Path

from runner.view._bundle import write_bundle
from runner.view._errors import NotFound, ViewError
from runner.view._model import CELL_COLUMNS, cell_rows, cell_view, outcome_label, run_summary
from runner.view._source import StoreSource
from runner.view._static import StaticStudy
from runner.view._text import format_cell

if _typing.TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = [
    "CELL_COLUMNS",
    "NotFound",
    "StaticStudy",
    "StoreSource",
    "ViewError",
    "build_app",
    "cell_rows",
    "cell_view",
    "format_cell",
    "outcome_label",
    "run_summary",
    "write_bundle",
]


def build_app(*, store: str | _Path | None = None,
              static_dir: str | _Path | None = None, token: str | None = None,
              allowed_hosts: tuple[str, ...] | None = None) -> Starlette:
    """The viewer's Starlette app (see ``runner.view._app.build_app``; ``allowed_hosts``
    defaults to the loopback names); imports Starlette."""
    from runner.view._app import LOOPBACK_HOSTS
    from runner.view._app import build_app as _build

    return _build(store=store, static_dir=static_dir, token=token,
                  allowed_hosts=LOOPBACK_HOSTS if allowed_hosts is None else allowed_hosts)
