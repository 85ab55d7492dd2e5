"""Sandbox errors (all under :class:`runner.errors.SandboxError`)."""

from __future__ import annotations

from runner.errors import ExitCategory, SandboxError

__all__ = ["PinMismatch", "SandboxUnavailable", "WorkerFailed"]


class SandboxUnavailable(SandboxError):
    """No backend can run a call under the full policy here. There is never an unsandboxed fallback."""

    exit_category = ExitCategory.RUNTIME


class PinMismatch(SandboxError):
    """A policy file's bytes do not match their sha256 in ``sandbox_profiles/PINS``."""

    exit_category = ExitCategory.REFUSED


class WorkerFailed(SandboxError):
    """The sandboxed worker died, timed out, was killed, or returned something that is not a response."""

    exit_category = ExitCategory.RUNTIME
