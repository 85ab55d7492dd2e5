"""Deny-default sandbox for every synthetic tool call (docs/sandbox.md).

Backends: ``bwrap`` (Linux: bubblewrap + seccomp + Landlock + rlimits) and ``sandbox-exec``
(macOS: the pinned ``worker.sb``). :func:`select_backend` picks the platform's own and raises
:class:`SandboxUnavailable` when it cannot enforce the policy; there is no unsandboxed fallback.
"""

from runner.sandbox._backend import Backend, ChildResult, KillReason, Limits
from runner.sandbox._bwrap import BwrapBackend
from runner.sandbox._errors import PinMismatch, SandboxUnavailable, WorkerFailed
from runner.sandbox._pins import PINNED_FILES, pins_digest, read_pinned, verify_pins, write_pins
from runner.sandbox._probes import Probe, ProbeResult, iter_probes, load_probes, run_probes
from runner.sandbox._seatbelt import SandboxExecBackend
from runner.sandbox._seccomp import compile_policy, compile_policy_file
from runner.sandbox._select import BACKENDS, EXECUTORS, select_backend
from runner.sandbox._tool import ToolSandbox

__all__ = [
    "BACKENDS",
    "EXECUTORS",
    "PINNED_FILES",
    "Backend",
    "BwrapBackend",
    "ChildResult",
    "KillReason",
    "Limits",
    "PinMismatch",
    "Probe",
    "ProbeResult",
    "SandboxExecBackend",
    "SandboxUnavailable",
    "ToolSandbox",
    "WorkerFailed",
    "compile_policy",
    "compile_policy_file",
    "iter_probes",
    "load_probes",
    "pins_digest",
    "read_pinned",
    "run_probes",
    "select_backend",
    "verify_pins",
    "write_pins",
]
