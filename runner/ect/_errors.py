"""Errors of :mod:`runner.ect` (subclasses of the :class:`runner.errors.FormatError` family)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.errors import ExitCategory, FormatError, VerificationError

if TYPE_CHECKING:
    from runner.ect._reasons import Decision

__all__ = ["IncompleteCertificate", "ReplayError", "WireFormatError"]


class WireFormatError(FormatError):
    """A contract, ledger, certificate or decision object is not well formed.

    ``str(err)`` is one line that names the offending path, e.g.
    ``certificate.claims[1].transform.params: unknown field 'x'``.
    """

    exit_category = ExitCategory.USAGE

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class ReplayError(FormatError):
    """Replay of a transform failed; ``code`` is a ``replay.*`` or ``transform.*`` reason code."""

    exit_category = ExitCategory.USAGE

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}")


class IncompleteCertificate(VerificationError):
    """Raised by :func:`runner.ect.require_complete`; ``decision`` holds every reason."""

    exit_category = ExitCategory.NEGATIVE

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        codes = ", ".join(dict.fromkeys(r.code for r in decision.reasons))
        super().__init__(f"certificate does not license complete: {codes}")
