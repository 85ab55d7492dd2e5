"""Linux backend: bubblewrap + seccomp (by fd) + Landlock (applied by the worker) + rlimits.

Layers, outermost first (DESIGN §5):

* the parent starts ``bwrap`` with an environment built from nothing (``env={}``), so even the
  sandbox's pid 1, whose ``/proc/1/environ`` is readable inside, never held a parent variable;
* bwrap: new user/pid/net/ipc/uts/cgroup/mount namespaces, uid/gid 65534, no capabilities, no
  further user namespaces, a new session, death with the parent; a root filesystem built from
  read-only binds of ``/usr``, the interpreter's real prefix, the worker (passed as pinned bytes),
  the caller's binds, a private ``/proc``, four devices, and a size-capped tmpfs ``/tmp``, then
  ``--remount-ro /``;
* the pinned seccomp filter, passed to bwrap on a memfd;
* the worker sets rlimits and applies Landlock before running anything else;
* the parent enforces the wall clock and the output cap and kills the whole process group.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.canonical import canonical_bytes, loads_strict
from runner.errors import FormatError
from runner.sandbox._backend import ChildResult, Limits, WorkerRunMixin, supervise
from runner.sandbox._errors import PinMismatch, SandboxUnavailable
from runner.sandbox._linux import PidsCgroup, landlock_abi, userns_restrictions
from runner.sandbox._pins import REPO_ROOT, read_pinned
from runner.sandbox._seccomp import compile_policy_file, host_arch
from runner.sandbox._tool import check_worker_result

__all__ = ["SANDBOX_GID", "SANDBOX_UID", "BwrapBackend", "interpreter"]

SANDBOX_UID = 65534
SANDBOX_GID = 65534
WORKER_PATH = "/ect/worker.py"
MIN_LANDLOCK_ABI = 4
SANDBOX_ENV: Mapping[str, str] = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
}
_RESERVED = ("/usr", "/proc", "/dev", "/tmp", "/ect/worker.py")


def interpreter() -> tuple[Path, Path]:
    """The real interpreter binary and installation prefix (pyenv shims and venvs resolved)."""
    exe = Path(os.path.realpath(sys.executable))
    prefix = Path(os.path.realpath(sys.base_prefix))
    if not exe.is_file():
        raise SandboxUnavailable(f"cannot resolve the Python interpreter ({sys.executable})")
    # A venv's python is a symlink into the base installation: run the base binary directly.
    base_exe = prefix / "bin" / exe.name
    if base_exe.is_file():
        exe = Path(os.path.realpath(base_exe))
    return exe, prefix


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_child_pid(fd: int, deadline: float) -> int | None:
    """The host pid of the sandbox's pid 1, from bwrap's ``--info-fd`` JSON (None if bwrap failed)."""
    import json
    import select

    buf = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
        try:
            info = json.loads(buf)
        except ValueError:
            continue
        pid = info.get("child-pid") if isinstance(info, dict) else None
        return pid if isinstance(pid, int) and not isinstance(pid, bool) else None
    return None


class BwrapBackend(WorkerRunMixin):
    """Runs one call per fresh bwrap child. Construction checks everything it can up front.

    Args:
        bwrap: the bubblewrap binary (the distribution's package).
        policy_root: the tree holding ``sandbox_profiles/`` and the worker (tests point it at a
            tampered copy).
        allow_weaker_landlock_unsafe: accept a kernel whose Landlock ABI is below 4 (or absent).
            Weaker; callers must record it (the study lock does).

    Raises:
        SandboxUnavailable: not Linux, no bwrap, Landlock too old, user namespaces forbidden.
        PinMismatch: the worker, seccomp source or compiled filter differ from their pins.
    """

    name = "bwrap"

    def __init__(
        self,
        *,
        bwrap: str = "/usr/bin/bwrap",
        policy_root: Path = REPO_ROOT,
        allow_weaker_landlock_unsafe: bool = False,
    ) -> None:
        if not sys.platform.startswith("linux"):
            raise SandboxUnavailable(f"the bwrap backend needs Linux, not {sys.platform}")
        found = shutil.which(bwrap)
        if found is None:
            raise SandboxUnavailable(
                f"bubblewrap not found at {bwrap}: install the distribution's package "
                "(apt-get install bubblewrap)"
            )
        self.bwrap = found
        self.policy_root = policy_root
        self.allow_weaker_landlock_unsafe = allow_weaker_landlock_unsafe
        self.python, self.prefix = interpreter()
        self.arch = host_arch()
        self.worker_bytes = read_pinned("runner/sandbox/_worker.py", root=policy_root)
        source = read_pinned("sandbox_profiles/seccomp.toml", root=policy_root)
        filter_rel = f"sandbox_profiles/seccomp-{self.arch}.bpf"
        try:
            self.seccomp_bytes = read_pinned(filter_rel, root=policy_root)
        except PinMismatch as e:
            if not (policy_root / filter_rel).exists():
                raise SandboxUnavailable(f"no seccomp filter for architecture {self.arch}") from e
            raise
        if compile_policy_file(source, self.arch) != self.seccomp_bytes:
            raise PinMismatch(
                f"{policy_root / filter_rel}: sha256 {hashlib.sha256(self.seccomp_bytes).hexdigest()} "
                "is not what sandbox_profiles/seccomp.toml compiles to"
            )
        self.landlock_abi = landlock_abi()
        if self.landlock_abi < MIN_LANDLOCK_ABI and not allow_weaker_landlock_unsafe:
            raise SandboxUnavailable(
                f"kernel Landlock ABI is {self.landlock_abi}, the sandbox needs >= {MIN_LANDLOCK_ABI} "
                "(Linux 6.7+); pass allow_weaker_landlock_unsafe=True to accept a weaker sandbox"
            )
        blocked = userns_restrictions()
        if blocked:
            raise SandboxUnavailable(
                "this host forbids the user namespaces bwrap needs: " + "; ".join(blocked)
            )
        self.pids_cgroup = PidsCgroup.detect()
        self.applied = self._smoke()

    def _smoke(self) -> dict[str, Any]:
        """Start one real sandbox so a host that cannot run it fails here, plainly, not mid-study."""
        result = self.run_worker({"mode": "check"}, stdin=b"", limits=Limits(wall_s=30.0))
        err = result.stderr.decode("utf-8", "replace").strip()
        if result.exit_status != 0 and err.startswith("bwrap:"):
            line = err.splitlines()[0]
            hint = ""
            if any(
                w in line
                for w in (
                    "namespace",
                    "uid map",
                    "uid_map",
                    "setting up",
                    "Operation not permitted",
                )
            ):
                hint = (
                    " (this host forbids the unprivileged user namespaces bwrap needs, e.g. "
                    "Ubuntu's kernel.apparmor_restrict_unprivileged_userns=1)"
                )
            raise SandboxUnavailable(f"bwrap cannot start a sandbox here: {line}{hint}")
        check_worker_result(result, "sandbox self-check")
        try:
            applied = loads_strict(result.stdout)
        except FormatError as e:
            raise SandboxUnavailable(f"sandbox self-check returned {result.stdout[:80]!r}") from e
        return applied if isinstance(applied, dict) else {}

    # -- policy ---------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """What this backend will enforce here (for the study lock and ``ect sandbox probe``)."""
        return {
            "backend": self.name,
            "bwrap": self.bwrap,
            "python": str(self.python),
            "arch": self.arch,
            "landlock_abi": self.landlock_abi,
            "landlock_applied": self.applied,
            "allow_weaker_landlock_unsafe": self.allow_weaker_landlock_unsafe,
            "nproc_enforced_by": "rlimit" if os.geteuid() != 0 else
            ("pids-cgroup" if self.pids_cgroup else "nothing (root parent, no pids cgroup)"),
        }  # fmt: skip

    def sandbox_path(self, host: Path, dest: str) -> str:
        """Where a bind of ``host`` on ``dest`` appears inside the sandbox."""
        return dest

    def _landlock(self, ro_dests: Sequence[str]) -> dict[str, Any]:
        read = ["/usr", str(self.prefix), "/ect", *ro_dests]
        return {
            "min_abi": MIN_LANDLOCK_ABI,
            "allow_weaker_landlock_unsafe": self.allow_weaker_landlock_unsafe,
            "read": read,
            "read_nox": ["/proc"],
            "write": ["/tmp"],
            "devices": ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"],
        }

    def bwrap_argv(self, limits: Limits, ro_binds: Sequence[tuple[Path, str]], seccomp_fd: int,
                   worker_fd: int) -> list[str]:  # fmt: skip
        argv = [
            self.bwrap,
            "--unshare-all", "--unshare-user",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
            "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "ect-sandbox",
            "--clearenv",
        ]  # fmt: skip
        for k, v in SANDBOX_ENV.items():
            argv += ["--setenv", k, v]
        argv += ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
            p = Path(top)
            if p.is_symlink():
                argv += ["--symlink", os.readlink(p), top]
            elif p.is_dir():
                argv += ["--ro-bind", top, top]
        if self.prefix != Path("/usr") and not str(self.prefix).startswith("/usr/"):
            argv += ["--ro-bind", str(self.prefix), str(self.prefix)]
        argv += ["--perms", "0444", "--ro-bind-data", str(worker_fd), WORKER_PATH]
        for host, dest in ro_binds:
            argv += ["--ro-bind", str(host), dest]
        argv += [
            "--proc", "/proc",
            # only the four devices a tool may need (bwrap's --dev would add pts, shm, tty, full)
            "--dev-bind", "/dev/null", "/dev/null",
            "--dev-bind", "/dev/zero", "/dev/zero",
            "--dev-bind", "/dev/random", "/dev/random",
            "--dev-bind", "/dev/urandom", "/dev/urandom",
            "--size", str(int(limits.tmpfs_bytes)), "--tmpfs", "/tmp",
            "--remount-ro", "/",
            "--chdir", "/tmp",
            "--seccomp", str(seccomp_fd),
        ]  # fmt: skip
        return argv

    def _check_binds(self, ro_binds: Sequence[tuple[Path, str]]) -> None:
        for host, dest in ro_binds:
            if not dest.startswith("/") or ".." in dest.split("/") or dest == "/":
                raise ValueError(f"bind destination must be an absolute path, got {dest!r}")
            for r in _RESERVED:
                if dest == r or dest.startswith(r + "/"):
                    raise ValueError(f"bind destination {dest!r} is reserved by the sandbox")
            if not Path(host).exists():
                raise FileNotFoundError(2, "No such file or directory", str(host))

    # -- running --------------------------------------------------------------------------------

    def run_worker(
        self,
        config: Mapping[str, Any],
        *,
        stdin: bytes,
        limits: Limits,
        ro_binds: Sequence[tuple[Path, str]] = (),
    ) -> ChildResult:
        """Run the pinned worker with ``config`` (mode and mode arguments) under the full policy."""
        self._check_binds(ro_binds)
        cfg = dict(config)
        cfg["rlimits"] = limits.rlimits()
        cfg["landlock"] = self._landlock([d for _, d in ro_binds])
        seccomp_fd = _memfd("ect-seccomp", self.seccomp_bytes)
        worker_fd = _memfd("ect-worker", self.worker_bytes)
        cg_path: Path | None = None
        info_r, info_w = os.pipe()
        pidfd = -1
        try:
            bw = self.bwrap_argv(limits, ro_binds, seccomp_fd, worker_fd)
            bw += ["--info-fd", str(info_w)]
            if self.pids_cgroup is not None:
                # the sandbox's pid 1 + the worker, then the command's own processes
                cg_path = self.pids_cgroup.acquire(int(limits.nproc) + 2)
                cfg["cgroup_gate"] = cg_path.name
            cmd = [str(self.python), "-I", "-S", WORKER_PATH, canonical_bytes(cfg).decode("utf-8")]
            started = time.monotonic()
            deadline = started + limits.wall_s
            proc = subprocess.Popen(
                bw + cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={},
                cwd="/",
                pass_fds=(seccomp_fd, worker_fd, info_w),
                start_new_session=True,
            )
            for fd in (seccomp_fd, worker_fd, info_w):
                os.close(fd)
            seccomp_fd = worker_fd = info_w = -1
            pid1 = _read_child_pid(info_r, deadline)
            if pid1 is not None:
                with contextlib.suppress(OSError):
                    pidfd = os.pidfd_open(pid1)
                if cg_path is not None:
                    PidsCgroup.adopt(cg_path, pid1, deadline)
            return supervise(proc, stdin, limits, started=started, inner_pidfd=pidfd)
        finally:
            for fd in (seccomp_fd, worker_fd, info_r, info_w, pidfd):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if cg_path is not None and self.pids_cgroup is not None:
                self.pids_cgroup.release(cg_path)
