"""The one exception root of ect-runner.

Every error this package raises on purpose derives from :class:`EctError`. Subpackages define
their specific errors as subclasses of the family class below, in their own modules::

    EctError
    ├── FormatError            malformed, hostile or non-canonical input (JSON, wire objects, specs)
    ├── VerificationError      raised by the raising form of a verifier
    ├── WorldError             world generation, oracles (OracleDisagreement), faults
    ├── SandboxError           SandboxUnavailable, PinMismatch, a refused policy
    ├── StoreError             TamperDetected, TruncationDetected, StoreBusy, ...
    ├── ProviderError          transport, egress refusal, credential, response failures
    ├── ControlError           stop-control misuse at run time (kill switch engaged, ...)
    ├── StudyError             schedule, lock drift, PreflightFailed, kill switch halts
    └── AnalysisError          InventoryIncomplete, ...

Misuse of the API (wrong argument types and the like) stays ``TypeError``/``ValueError``,
outside this tree. Foreign exceptions are translated at the boundary with ``raise X from e``.

Every error class says what kind of failure it is, in its own body: ``exit_category``, one of
:class:`ExitCategory`. The command line maps each category to one exit code
(``runner.cli._common.map_errors``; the codes are in the README), so a new error class is
placed by whoever writes it, not by an exit-code table somewhere else. A class of this package
that does not declare its own category is refused when it is defined.
"""

from __future__ import annotations

import enum
import typing

__all__ = [
    "AnalysisError",
    "ControlError",
    "EctError",
    "ExitCategory",
    "FormatError",
    "ProviderError",
    "SandboxError",
    "StoreError",
    "StudyError",
    "VerificationError",
    "WorldError",
]


class ExitCategory(enum.StrEnum):
    """What kind of failure an error is, which decides the command line's exit code."""

    NEGATIVE = "negative"
    """A negative answer to the question the command asks (damage found, does not verify): 1."""
    USAGE = "usage"
    """The user gave something unusable (a malformed file, an unknown name, bad settings): 2."""
    REFUSED = "refused"
    """A precondition did not hold (preflight, lock drift, a store in use or damaged): 3."""
    HALTED = "halted"
    """The work stopped cleanly and can be continued (STOP file, ceiling, transport halt): 4."""
    RUNTIME = "runtime"
    """The machine or a dependency failed (sandbox, provider, disk, an internal invariant): 5."""


class EctError(Exception):
    """Root of every deliberate ect-runner error. ``str(err)`` is a one-line message for users.

    Each subclass defined in ``runner`` declares ``exit_category`` in its own body (inheriting
    the parent's is refused at class creation): deciding that is part of adding an error.
    """

    exit_category: typing.ClassVar[ExitCategory] = ExitCategory.RUNTIME

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__.split(".")[0] == "runner" and "exit_category" not in cls.__dict__:
            raise TypeError(
                f"{cls.__module__}.{cls.__qualname__} does not declare exit_category: say which "
                "ExitCategory it is (runner/errors.py)")
        if not isinstance(cls.__dict__.get("exit_category", ExitCategory.RUNTIME), ExitCategory):
            raise TypeError(f"{cls.__module__}.{cls.__qualname__}.exit_category is not an "
                            "ExitCategory")


class FormatError(EctError):
    """Input that is not well-formed for its format: bad JSON, unknown fields, wrong types."""

    exit_category = ExitCategory.USAGE


class VerificationError(EctError):
    """A verifier's raising form found the input does not verify."""

    exit_category = ExitCategory.NEGATIVE


class WorldError(EctError):
    """World generation, task construction, oracle or fault failure."""

    exit_category = ExitCategory.RUNTIME


class SandboxError(EctError):
    """The sandbox could not run a call as the policy requires. Never falls back to no sandbox."""

    exit_category = ExitCategory.RUNTIME


class StoreError(EctError):
    """The run store is damaged, busy, or was used in a way that would lose or rewrite records."""

    exit_category = ExitCategory.RUNTIME


class ProviderError(EctError):
    """A model provider attempt failed or was refused (egress, credential, transport, parse)."""

    exit_category = ExitCategory.RUNTIME


class ControlError(EctError):
    """A stop control refused to start or continue a run (kill switch, ceilings)."""

    exit_category = ExitCategory.RUNTIME


class StudyError(EctError):
    """Schedule, lock, preflight or execution failure of a study run."""

    exit_category = ExitCategory.RUNTIME


class AnalysisError(EctError):
    """Analysis refused to run or could not compute a figure (incomplete inventory, ...)."""

    exit_category = ExitCategory.RUNTIME
