"""Errors of :mod:`runner.ect` (subclasses of the :class:`runner.errors.FormatError` family)."""

from __future__ import annotations

from runner.errors import FormatError

__all__ = ["ReplayError", "WireFormatError"]


class WireFormatError(FormatError):
    """A contract, ledger, certificate or decision object is not well formed.

    ``str(err)`` is one line that names the offending path, e.g.
    ``certificate.claims[1].transform.params: unknown field 'x'``.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class ReplayError(FormatError):
    """Replay of a transform failed; ``code`` is a ``replay.*`` or ``transform.*`` reason code."""

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}")
