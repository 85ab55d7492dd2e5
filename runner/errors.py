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
"""

from __future__ import annotations

__all__ = [
    "AnalysisError",
    "ControlError",
    "EctError",
    "FormatError",
    "ProviderError",
    "SandboxError",
    "StoreError",
    "StudyError",
    "VerificationError",
    "WorldError",
]


class EctError(Exception):
    """Root of every deliberate ect-runner error. ``str(err)`` is a one-line message for users."""


class FormatError(EctError):
    """Input that is not well-formed for its format: bad JSON, unknown fields, wrong types."""


class VerificationError(EctError):
    """A verifier's raising form found the input does not verify."""


class WorldError(EctError):
    """World generation, task construction, oracle or fault failure."""


class SandboxError(EctError):
    """The sandbox could not run a call as the policy requires. Never falls back to no sandbox."""


class StoreError(EctError):
    """The run store is damaged, busy, or was used in a way that would lose or rewrite records."""


class ProviderError(EctError):
    """A model provider attempt failed or was refused (egress, credential, transport, parse)."""


class ControlError(EctError):
    """A stop control refused to start or continue a run (kill switch, ceilings)."""


class StudyError(EctError):
    """Schedule, lock, preflight or execution failure of a study run."""


class AnalysisError(EctError):
    """Analysis refused to run or could not compute a figure (incomplete inventory, ...)."""
