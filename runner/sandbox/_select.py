"""Backend selection: bwrap on Linux, sandbox-exec on macOS, never an unsandboxed fallback."""

from __future__ import annotations

import sys
from typing import Any

from runner.sandbox._errors import SandboxUnavailable

__all__ = ["BACKENDS", "EXECUTORS", "select_backend"]

BACKENDS = ("bwrap", "sandbox-exec")

EXECUTORS = ("local", "ray")
"""Where a study runs its sandboxed tool calls (runner.study's executors: this machine, or the
nodes of a Ray cluster). Kept here, where it loads light, so the CLI can offer the choice
without importing the study."""


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
