"""Linux backend: bubblewrap + seccomp allow-list (by fd) + Landlock (applied by the worker) +
rlimits + per-call cgroups. What each layer guarantees, and from which kernel: ``_layers.py``.

Layers, outermost first:

* the parent starts ``bwrap`` with an environment built from nothing (``env={}``), so even the
  sandbox's pid 1 never held a parent variable;
* bwrap: new pid/net/ipc/uts/cgroup/mount namespaces, a new session, death with the parent.
  Under a non-root parent also a new user namespace with uid/gid 65534 (mapped to the parent's
  uid), no capabilities and no further user namespaces. Under a root parent no user namespace
  (bwrap could only map the sandbox to host root): the command starts with CAP_SETPCAP,
  CAP_SETUID and CAP_SETGID only, and the pinned worker's first act is to empty the bounding set
  and become the dedicated unprivileged host id (``host_id``, no supplementary groups), which
  clears every capability, so per-uid quotas, keyrings and DAC checks treat the sandbox as an
  ordinary user, never as root;
* the filesystem: a new root of read-only binds of ``/usr``, the interpreter's real prefix (its
  parent directories search-only), the worker (passed as pinned bytes), the caller's binds (all
  passed as descriptors the parent opened), a private ``/proc`` with the kernel knobs
  (``/proc/sys``, ``sysrq-trigger``, ``fs``, ``irq``, ``bus``) bound read-only over it, four
  devices, and a size-capped tmpfs ``/tmp``, then ``--remount-ro /``;
* the pinned seccomp allow-list, passed to bwrap on a memfd;
* the worker leaves the parent's session keyring, sets rlimits, applies Landlock and waits to be
  in its per-call cgroups (pids and memory, root parent) before running anything else;
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
from runner.sandbox._backend import Limits, RunResult, WorkerRunMixin, supervise
from runner.sandbox._errors import PinMismatch, SandboxUnavailable
from runner.sandbox._layers import HostFacts, assess
from runner.sandbox._linux import CallCgroups, CallGroup, landlock_abi, userns_restrictions
from runner.sandbox._pins import REPO_ROOT, read_pinned
from runner.sandbox._seccomp import compile_policy_file, host_arch, policy_summary
from runner.sandbox._tool import check_worker_result

__all__ = ["SANDBOX_GID", "SANDBOX_HOST_ID", "SANDBOX_UID", "BwrapBackend", "interpreter"]

SANDBOX_UID = 65534
SANDBOX_GID = 65534
# The host uid and gid a root parent runs the sandbox as: a fixed id with no account, no files
# and no other processes, so nothing on the host shares its per-uid quotas or owns what it could
# reach by DAC. (Not 65534: "nobody" is shared by NFS squashing and other daemons.)
SANDBOX_HOST_ID = 64_999
WORKER_PATH = "/ect/worker.py"
# Landlock ABI 1 (Linux 5.13) provides the one guarantee no other layer gives: execute only
# beneath the read-only binds. Everything else has a layer on any kernel bwrap runs on
# (runner/sandbox/_layers.py); newer ABIs add defence in depth and are applied when present.
MIN_LANDLOCK_ABI = 1
SANDBOX_ENV: Mapping[str, str] = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
}
_PROC_KNOBS = ("/proc/sys", "/proc/sysrq-trigger", "/proc/fs", "/proc/irq", "/proc/bus")
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
        allow_weaker_landlock_unsafe: accept a kernel on which a guarantee has no layer left
            (today: no Landlock at all, so nothing stops exec from the scratch ``/tmp``).
            Weaker; ``describe()`` records it and which guarantee is missing.
        host_id: the unprivileged host uid and gid the sandbox runs as when the parent is root.
        emulate_landlock_abi: apply this older Landlock ABI's rule set even on a newer kernel
            (to test what an older kernel gets); recorded in ``describe()``.

    Raises:
        SandboxUnavailable: not Linux, no bwrap, a guarantee without any layer, user namespaces
            forbidden.
        PinMismatch: the worker, seccomp source or compiled filter differ from their pins.
    """

    name = "bwrap"

    def __init__(
        self,
        *,
        bwrap: str = "/usr/bin/bwrap",
        policy_root: Path = REPO_ROOT,
        allow_weaker_landlock_unsafe: bool = False,
        host_id: int = SANDBOX_HOST_ID,
        emulate_landlock_abi: int | None = None,
    ) -> None:
        if isinstance(host_id, bool) or not isinstance(host_id, int) or not 0 < host_id < 2**32 - 1:
            raise ValueError(f"host_id must be a non-root uid, got {host_id!r}")
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
        self.kernel_landlock_abi = landlock_abi()
        self.emulate_landlock_abi = emulate_landlock_abi
        self.landlock_abi = (self.kernel_landlock_abi if emulate_landlock_abi is None
                             else min(self.kernel_landlock_abi, int(emulate_landlock_abi)))
        self.drops_root = os.geteuid() == 0
        self.host_uid = host_id if os.geteuid() == 0 else os.geteuid()
        self.host_gid = host_id if os.geteuid() == 0 else os.getegid()
        self.cgroups = CallCgroups.detect()
        self.seccomp_policy = policy_summary(source)
        self.guarantees, self.missing = assess(HostFacts(
            landlock_abi=self.landlock_abi,
            cgroups=f"v{self.cgroups.version}" if self.cgroups else None,
            host_uid=self.host_uid,
        ))  # fmt: skip
        if self.missing and not allow_weaker_landlock_unsafe:
            from runner.sandbox._layers import GUARANTEES

            texts = "; ".join(g.text for g in GUARANTEES if g.key in self.missing)
            hint = (" (Landlock filesystem rules need Linux 5.13+ with landlock in the LSM list, "
                    "see /sys/kernel/security/lsm)" if "exec" in self.missing else "")  # fmt: skip
            raise SandboxUnavailable(
                f"kernel Landlock ABI is {self.landlock_abi}: no layer is left for: {texts}{hint}; "
                "pass allow_weaker_landlock_unsafe=True (--allow-weaker-landlock-unsafe) to "
                "accept a weaker sandbox"
            )
        # a root parent makes no user namespace (see bwrap_argv), so only others need them
        blocked = [] if self.drops_root else userns_restrictions()
        if blocked:
            raise SandboxUnavailable(
                "this host forbids the user namespaces bwrap needs: " + "; ".join(blocked)
            )
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
            "layers": self.layers(),
        }

    def layers(self) -> dict[str, Any]:
        """The isolation layers actually in force here, for the preflight report, run header and
        manifest: a reader of a result knows what isolation produced it."""
        bounds = (self.cgroups.bounds() if self.cgroups is not None else
                  {"processes": "rlimit RLIMIT_NPROC (per host uid)",
                   "memory": "rlimit RLIMIT_AS per process (no per-call cgroup: "
                             + ("no writable pids+memory cgroup)" if os.geteuid() == 0
                                else "unprivileged parent without cgroup delegation)"),
                   "swap": "not bounded"})  # fmt: skip
        return {
            "landlock_abi": self.landlock_abi,
            "kernel_landlock_abi": self.kernel_landlock_abi,
            "emulated_landlock_abi": self.emulate_landlock_abi,
            "landlock_applied": self.applied.get("abi"),
            "seccomp": {"mode": "filter" if self.applied.get("seccomp") == "2" else
                        f"status {self.applied.get('seccomp')!r}",
                        **self.seccomp_policy},
            "cgroups": f"v{self.cgroups.version}" if self.cgroups is not None else None,
            "bounds": bounds,
            "host_uid": self.host_uid,
            "host_gid": self.host_gid,
            "uid_map": self.applied.get("uid_map"),
            "guarantees": self.guarantees,
            "missing_guarantees": self.missing,
            "allow_weaker_landlock_unsafe": self.allow_weaker_landlock_unsafe,
        }

    def sandbox_path(self, host: Path, dest: str) -> str:
        """Where a bind of ``host`` on ``dest`` appears inside the sandbox."""
        return dest

    def _landlock(self, ro_dests: Sequence[str]) -> dict[str, Any]:
        read = ["/usr", str(self.prefix), "/ect", *ro_dests]
        return {
            "min_abi": MIN_LANDLOCK_ABI,
            "emulate_abi": self.emulate_landlock_abi,
            "allow_weaker_landlock_unsafe": self.allow_weaker_landlock_unsafe,
            "read": read,
            "read_nox": ["/proc"],
            "write": ["/tmp"],
            "devices": ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"],
        }

    def bwrap_argv(self, limits: Limits, ro_binds: Sequence[tuple[int, str]], seccomp_fd: int,
                   worker_fd: int, prefix_fd: int | None = None) -> list[str]:  # fmt: skip
        """bwrap's argv. ``ro_binds`` and ``prefix_fd`` are descriptors the parent opened
        (``O_PATH``): bwrap, running as the unprivileged host id, needs no access to their paths,
        and no path can be swapped between the check and the mount."""
        if self.drops_root:
            # Root parent: no user namespace (it could only map the sandbox to host root). bwrap,
            # as root, makes the other namespaces; the command keeps only CAP_SETPCAP, CAP_SETUID and
            # CAP_SETGID, which the pinned worker uses first thing to empty the capability bounding
            # set and become host_id, losing every capability.
            ids = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                   "--unshare-cgroup", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID",
                   "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]  # fmt: skip
        else:
            ids = ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID),
                   "--gid", str(SANDBOX_GID), "--disable-userns", "--cap-drop", "ALL"]  # fmt: skip
        argv = [
            self.bwrap, *ids,
            "--die-with-parent", "--new-session",
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
        if prefix_fd is not None:
            # The prefix keeps its host path (a shared libpython's RUNPATH names it); its parent
            # directories, which bwrap creates empty, are made search-only so nothing of the
            # host's layout (e.g. /root) can even be listed.
            for parent in reversed(self.prefix.parents[:-1]):
                argv += ["--perms", "0111", "--dir", str(parent)]
            argv += ["--ro-bind-fd", str(prefix_fd), str(self.prefix)]
        # bwrap would copy a bind source's parent mode (often 0700) onto directories it creates
        # for the destination, so they are made explicitly: readable, not writable
        made = {"/", "/ect"}
        argv += ["--perms", "0555", "--dir", "/ect"]
        for _, dest in ro_binds:
            for parent in reversed(Path(dest).parents):
                if str(parent) not in made:
                    made.add(str(parent))
                    argv += ["--perms", "0555", "--dir", str(parent)]
        argv += ["--perms", "0444", "--ro-bind-data", str(worker_fd), WORKER_PATH]
        for fd, dest in ro_binds:
            argv += ["--ro-bind-fd", str(fd), dest]
        argv += [
            "--proc", "/proc",
            *self._proc_covers(),
            # only the four devices a tool may need (bwrap's --dev would add pts, shm, tty, full)
            "--perms", "0555", "--dir", "/dev",
            "--dev-bind", "/dev/null", "/dev/null",
            "--dev-bind", "/dev/zero", "/dev/zero",
            "--dev-bind", "/dev/random", "/dev/random",
            "--dev-bind", "/dev/urandom", "/dev/urandom",
            "--perms", "1777", "--size", str(int(limits.tmpfs_bytes)), "--tmpfs", "/tmp",
            "--remount-ro", "/",
            "--chdir", "/tmp",
            "--seccomp", str(seccomp_fd),
        ]  # fmt: skip
        return argv

    @staticmethod
    def _proc_covers() -> list[str]:
        """Read-only binds over the kernel knobs in ``/proc``, whatever the uid and Landlock.

        bwrap itself covers ``irq`` and ``bus`` but, as measured with bwrap 0.8 under a root
        parent, not ``sys`` or ``sysrq-trigger``; ``fs`` holds writable knobs too (nfsd).
        """
        argv: list[str] = []
        for knob in _PROC_KNOBS:
            if os.path.lexists(knob):
                argv += ["--ro-bind", knob, knob]
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
    ) -> RunResult:
        """Run the pinned worker with ``config`` (mode and mode arguments) under the full policy."""
        self._check_binds(ro_binds)
        cfg = dict(config)
        cfg["rlimits"] = limits.rlimits()
        cfg["landlock"] = self._landlock([d for _, d in ro_binds])
        bind_fds: list[tuple[int, str]] = []
        prefix_fd: int | None = None
        group: CallGroup | None = None
        info_r, info_w = os.pipe()
        seccomp_fd = worker_fd = pidfd = -1
        try:
            seccomp_fd = _memfd("ect-seccomp", self.seccomp_bytes)
            worker_fd = _memfd("ect-worker", self.worker_bytes)
            for host, dest in ro_binds:
                bind_fds.append((os.open(host, os.O_PATH | os.O_CLOEXEC), dest))
            if self.prefix != Path("/usr") and not str(self.prefix).startswith("/usr/"):
                prefix_fd = os.open(self.prefix, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            bw = self.bwrap_argv(limits, bind_fds, seccomp_fd, worker_fd, prefix_fd)
            bw += ["--info-fd", str(info_w)]
            if self.cgroups is not None:
                # the sandbox's pid 1 + the worker, then the command's own processes; the
                # per-call pids.max replaces the per-uid RLIMIT_NPROC, which concurrent calls
                # under the one host id would share
                group = self.cgroups.acquire(int(limits.nproc) + 2, int(limits.memory_bytes))
                cfg["cgroup_gate"] = group.gate
                cfg["rlimits"].pop("nproc", None)
            if self.drops_root:
                cfg["drop_to"] = [self.host_uid, self.host_gid]
            cfg["new_session_keyring"] = True
            cmd = [str(self.python), "-I", "-S", WORKER_PATH, canonical_bytes(cfg).decode("utf-8")]
            passed = (seccomp_fd, worker_fd, info_w, *(fd for fd, _ in bind_fds),
                      *((prefix_fd,) if prefix_fd is not None else ()))  # fmt: skip
            started = time.monotonic()
            deadline = started + limits.wall_s
            proc = subprocess.Popen(
                bw + cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={},
                cwd="/",
                pass_fds=passed,
                start_new_session=True,
            )
            for fd in (seccomp_fd, worker_fd, info_w):
                os.close(fd)
            seccomp_fd = worker_fd = info_w = -1
            pid1 = _read_child_pid(info_r, deadline)
            if pid1 is not None:
                with contextlib.suppress(OSError):
                    pidfd = os.pidfd_open(pid1)
                if group is not None:
                    CallCgroups.adopt(group, pid1, deadline)
            return supervise(proc, stdin, limits, started=started, inner_pidfd=pidfd)
        finally:
            fds = [seccomp_fd, worker_fd, info_r, info_w, pidfd, *(fd for fd, _ in bind_fds)]
            if prefix_fd is not None:
                fds.append(prefix_fd)
            for fd in fds:
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if group is not None and self.cgroups is not None:
                self.cgroups.release(group)
