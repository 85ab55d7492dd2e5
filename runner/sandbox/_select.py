"""Backend selection: bwrap on Linux, sandbox-exec on macOS, never an unsandboxed fallback."""

from __future__ import annotations

import sys
from typing import Any

from runner.sandbox._errors import SandboxUnavailable

__all__ = ["BACKENDS", "select_backend"]

BACKENDS = ("bwrap", "sandbox-exec")


def select_backend(name: str | None = None, **options: Any) -> Any:
    """Return a ready backend: ``name`` if given, else the platform's own.

    ``options`` go to the backend (e.g. ``allow_weaker_landlock_unsafe=True`` for bwrap).

    Raises:
        SandboxUnavailable: unknown name, or the backend cannot enforce its policy here.
            There is no fallback to running without a sandbox.
    """
    if name is None:
        if sys.platform.startswith("linux"):
            name = "bwrap"
        elif sys.platform == "darwin":
            name = "sandbox-exec"
        else:
            raise SandboxUnavailable(f"no sandbox backend for platform {sys.platform}")
    if name == "bwrap":
        from runner.sandbox._bwrap import BwrapBackend

        return BwrapBackend(**options)
    if name == "sandbox-exec":
        from runner.sandbox._seatbelt import SandboxExecBackend

        return SandboxExecBackend(**options)
    raise SandboxUnavailable(
        f"unknown sandbox backend {name!r} (choose from {', '.join(BACKENDS)})"
    )
