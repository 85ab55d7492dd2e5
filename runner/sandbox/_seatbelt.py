"""macOS backend: ``/usr/bin/sandbox-exec`` with the pinned deny-default ``worker.sb``.

The verified profile bytes are passed with ``-p`` (never a path that could change after the
check), every path with ``-D``. The worker runs with the same rlimits as on Linux; Landlock does
not exist on macOS, so the profile is the filesystem and network policy. The scratch directory is
created per call under the user's ``/private/var/folders/...`` temp root and removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.canonical import canonical_bytes
from runner.sandbox._backend import Limits, RunResult, WorkerRunMixin, supervise
from runner.sandbox._errors import SandboxUnavailable
from runner.sandbox._pins import REPO_ROOT, read_pinned

__all__ = ["MAX_EXTRA_BINDS", "SandboxExecBackend", "seatbelt_argv"]

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
MAX_EXTRA_BINDS = 4
_UNUSED = "/var/empty/ect-unused"


def seatbelt_argv(
    profile: bytes,
    *,
    prefix: Path,
    worker: Path,
    tools: str,
    snapshot: str,
    scratch: Path,
    extra_ro: Sequence[str],
    command: Sequence[str],
) -> list[str]:
    """The sandbox-exec argv: profile text by ``-p``, each parameter by ``-D``."""
    if len(extra_ro) > MAX_EXTRA_BINDS:
        raise ValueError(f"the macOS profile takes at most {MAX_EXTRA_BINDS} extra read-only paths")
    params = {
        "PYTHON_PREFIX": str(prefix),
        "WORKER": str(worker),
        "TOOLS": tools,
        "SNAPSHOT": snapshot,
        "SCRATCH": str(scratch),
    }
    for i in range(MAX_EXTRA_BINDS):
        params[f"RO_{i}"] = extra_ro[i] if i < len(extra_ro) else _UNUSED
    argv = [SANDBOX_EXEC, "-p", profile.decode("utf-8")]
    for k, v in params.items():
        if "\x00" in v or not v.startswith("/"):
            raise ValueError(f"sandbox parameter {k} must be an absolute path, got {v!r}")
        argv += ["-D", f"{k}={v}"]
    return argv + list(command)


class SandboxExecBackend(WorkerRunMixin):
    """Runs one call per fresh ``sandbox-exec`` child (macOS only).

    Raises:
        SandboxUnavailable: not macOS, or ``/usr/bin/sandbox-exec`` is missing.
        PinMismatch: ``worker.sb`` or the worker differ from their pins.
    """

    name = "sandbox-exec"

    def __init__(
        self,
        *,
        policy_root: Path = REPO_ROOT,
        check_platform: bool = True,
        allow_weaker_landlock_unsafe: bool = False,
        emulate_landlock_abi: int | None = None,
    ) -> None:
        # Landlock does not exist on macOS; the options are accepted so callers can pass one
        # option set to either backend, and they change nothing here.
        del allow_weaker_landlock_unsafe, emulate_landlock_abi
        if check_platform and sys.platform != "darwin":
            raise SandboxUnavailable(f"the sandbox-exec backend needs macOS, not {sys.platform}")
        if check_platform and not os.access(SANDBOX_EXEC, os.X_OK):
            raise SandboxUnavailable(f"{SANDBOX_EXEC} not found")
        self.policy_root = policy_root
        self.profile = read_pinned("sandbox_profiles/worker.sb", root=policy_root)
        self.worker_source = read_pinned("runner/sandbox/_worker.py", root=policy_root).decode()
        self.worker = policy_root / "runner" / "sandbox" / "_worker.py"
        self.python = Path(os.path.realpath(sys.executable))
        self.prefix = Path(os.path.realpath(sys.base_prefix))

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "python": str(self.python), "landlock_abi": None}

    def sandbox_path(self, host: Path, dest: str) -> str:
        return os.path.realpath(host)

    def build_argv(
        self,
        config: Mapping[str, Any],
        *,
        limits: Limits,
        ro_binds: Sequence[tuple[Path, str]],
        scratch: Path,
    ) -> list[str]:
        cfg = dict(config)
        cfg["rlimits"] = limits.rlimits()
        cfg["landlock"] = None
        reals = [os.path.realpath(h) for h, _ in ro_binds]
        tools = str(cfg.get("tools", _UNUSED))
        snapshot = str(cfg.get("snapshot", _UNUSED))
        extra = [r for r in reals if r not in (tools, snapshot)]
        # The verified worker bytes run via -c: no path to swap between the pin check and exec.
        command = [str(self.python), "-I", "-S", "-c", self.worker_source,
                   canonical_bytes(cfg).decode("utf-8")]  # fmt: skip
        return seatbelt_argv(
            self.profile,
            prefix=self.prefix,
            worker=self.worker,
            tools=tools,
            snapshot=snapshot,
            scratch=scratch,
            extra_ro=extra,
            command=command,
        )

    def run_worker(
        self,
        config: Mapping[str, Any],
        *,
        stdin: bytes,
        limits: Limits,
        ro_binds: Sequence[tuple[Path, str]] = (),
    ) -> RunResult:
        scratch = Path(os.path.realpath(tempfile.mkdtemp(prefix="ect-sbx-")))
        try:
            argv = self.build_argv(config, limits=limits, ro_binds=ro_binds, scratch=scratch)
            env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "TMPDIR": str(scratch),
                   "LANG": "C.UTF-8"}  # fmt: skip
            started = time.monotonic()
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=str(scratch),
                start_new_session=True,
            )
            return supervise(proc, stdin, limits, started=started, signal_offset=None)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
