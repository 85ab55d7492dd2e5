"""Linux backend: bubblewrap + seccomp allow-list (by fd) + Landlock (applied by the worker) +
rlimits + per-call cgroups. What each layer guarantees, and from which kernel: ``_layers.py``.

Layers, outermost first:

* the parent starts ``bwrap`` with an environment built from nothing (``env={}``), so even the
  sandbox's pid 1 never held a parent variable;
* bwrap: new pid/net/ipc/uts/cgroup/mount namespaces, a new session, death with the parent.
  Under a non-root parent also a new user namespace with uid/gid 65534 (mapped to the parent's
  uid), no capabilities and no further user namespaces. Under a root parent no user namespace
  (bwrap could only map the sandbox to host root): the command starts with CAP_SETPCAP,
  CAP_SETUID and CAP_SETGID only, and the pinned worker's first act is to empty the bounding and
  inheritable sets and become this call's own unprivileged host id (leased from ``host_ids`` for
  the call's life, no supplementary groups), which clears every capability, so per-uid quotas,
  keyrings and DAC checks treat the sandbox as an ordinary user, never as root, and no two
  concurrent calls share a uid;
* the filesystem: a new root of read-only binds of ``/usr``, the interpreter's installation
  (one outside ``/usr`` at the fixed ``/ect/python``, so no host path of it shows), the worker
  (its pinned bytes compiled by this interpreter, passed as a .pyc file's bytes: a call does not
  compile it again), the caller's binds
  (copied into memfds, so no host path shows in mountinfo), a private ``/proc`` with the kernel
  knobs (``/proc/sys``, ``sysrq-trigger``, ``fs``, ``irq``, ``bus``) bound read-only over it, a
  per-call ``boot_id`` and an empty ``key-users`` laid over the host's, four devices, and a
  size-capped tmpfs ``/tmp``, then ``--remount-ro /``;
* the pinned seccomp allow-list, passed to bwrap on a memfd;
* the worker joins a new anonymous session keyring, sets rlimits, applies Landlock and waits to
  be in its per-call cgroups (pids, memory and cpu, root parent) before running anything else,
  and in ``check`` mode reports what it applied: the record (``layers()``) is that report;
* the parent enforces the wall clock, the output cap and the call's CPU budget (its cpu cgroup)
  and kills the whole process group;
* pre-spawned single-use children (``pool_size``) have all of the above in place before the call
  is known; each serves one call and is destroyed (the pool: ``_pool.py``).

The mount tree, namespaces and Landlock rules of a call are laid out in ``_layout.py``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.canonical import canonical_bytes, loads_strict
from runner.errors import FormatError
from runner.sandbox._backend import ChildResult, Limits, WorkerRunMixin, supervise
from runner.sandbox._child import _Child, _host_view, _memfd, _read_child_pid
from runner.sandbox._errors import PinMismatch, SandboxUnavailable
from runner.sandbox._layers import HostFacts, assess, seccomp_passthrough
from runner.sandbox._layout import (
    PYTHON_PREFIX,
    SANDBOX_GID,
    SANDBOX_UID,
    WORKER_PATH,
    BwrapLayout,
)
from runner.sandbox._linux import (
    CallCgroups,
    CallGroup,
    HostIds,
    landlock_abi,
    userns_restrictions,
)
from runner.sandbox._pins import REPO_ROOT, read_pinned
from runner.sandbox._pool import _BACKENDS, ChildPool, _reclaim_waiting
from runner.sandbox._reaping import reaper_link, sweep_orphaned_sandboxes
from runner.sandbox._seccomp import compile_policy_file, host_arch, policy_summary
from runner.sandbox._stage import staged_prefix as _staged_prefix
from runner.sandbox._tool import check_worker_result

_log = logging.getLogger("runner.sandbox")

__all__ = ["PYTHON_PREFIX", "SANDBOX_GID", "SANDBOX_HOST_ID", "SANDBOX_HOST_IDS", "SANDBOX_UID",
           "BwrapBackend", "interpreter"]  # fmt: skip

# The host uids (and equal gids) a root parent runs calls as, one per call, leased for the call's
# life (runner/sandbox/_linux.py HostIds): ids with no account, no files and no other processes,
# so no per-uid quota, keyring or DAC right is shared with the host or between concurrent calls.
# (Not 65534: "nobody" is shared by NFS squashing and other daemons.)
SANDBOX_HOST_IDS = range(64_936, 65_000)
SANDBOX_HOST_ID = SANDBOX_HOST_IDS[0]  # the first id leased (the self-check's)
# Pre-spawned single-use children waiting for a call (0: every call starts its own sandbox).
DEFAULT_POOL_SIZE = 2
SANDBOX_ENV: Mapping[str, str] = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
}


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


def worker_bytecode(source: bytes) -> bytes:
    """The pinned worker's ``source`` compiled by this interpreter, as a .pyc file's bytes: its
    magic number, 12 header bytes a script run does not read (flags, source time and size: 0),
    and the marshalled code. The sandbox runs the same interpreter (:func:`interpreter`), without
    ``-O`` (``optimize=0``: every ``assert`` kept), so a call runs exactly the pinned source's
    code without compiling 400 lines at every start (a tenth of the worker's start, measured)."""
    import importlib.util
    import marshal

    code = compile(source, "/ect/worker.py", "exec", dont_inherit=True, optimize=0)
    return importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code)


def _under_usr(path: Path) -> bool:
    return path == Path("/usr") or str(path).startswith("/usr/")


def _needs_own_libpython(exe: Path, prefix: Path) -> bool:
    """True when ``exe`` links a shared libpython that lives in ``prefix/lib``."""
    libs = sorted((prefix / "lib").glob("libpython3*.so*"))
    if not libs:
        return False
    try:
        data = exe.read_bytes()
    except OSError:
        return True
    return any(lib.name.split(".so")[0].encode() in data for lib in libs)


class BwrapBackend(ChildPool, BwrapLayout, WorkerRunMixin):
    """Runs one call per fresh bwrap child. Construction checks everything it can up front.

    Args:
        bwrap: the bubblewrap binary (the distribution's package).
        policy_root: the tree holding ``sandbox_profiles/`` and the worker (tests point it at a
            tampered copy).
        allow_weaker_landlock_unsafe: accept a kernel on which a guarantee has no layer left
            (today: no Landlock at all, so nothing stops exec from the scratch ``/tmp``).
            Weaker; ``describe()`` records it and which guarantee is missing.
        host_ids: the unprivileged host uids (and equal gids) a root parent runs calls as, one
            per call, leased for its life (default ``SANDBOX_HOST_IDS``); no account may use them.
        pool_size: how many pre-spawned single-use sandboxes wait for calls (every layer applied,
            the worker loaded; each serves one call and is destroyed); 0 turns the pool off.
        pool_max_idle_s: a pre-spawned child that waited longer than this is discarded unused.
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
        host_ids: range = SANDBOX_HOST_IDS,
        emulate_landlock_abi: int | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        pool_max_idle_s: float = 30.0,
    ) -> None:
        self._init_pool(pool_size, pool_max_idle_s, host_ids)
        if not isinstance(host_ids, range) or len(host_ids) == 0 or host_ids.step != 1 \
                or host_ids.start <= 0 or host_ids.stop > 2**32 - 1:
            raise ValueError(f"host_ids must be a non-empty range of non-root ids, got {host_ids!r}")
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
        # the interpreter on the host, and as calls see it: one installed outside /usr is bound
        # at PYTHON_PREFIX (its host path, e.g. under a home directory, is a host fact)
        self.host_python, self.host_prefix = interpreter()
        self.python, self.prefix = self.host_python, self.host_prefix
        self.staged_prefix: Path | None = None  # what is bound at PYTHON_PREFIX
        self.env = dict(SANDBOX_ENV)
        if not _under_usr(self.host_prefix):
            try:
                self.staged_prefix = _staged_prefix(self.host_python, self.host_prefix)
            except OSError as e:
                raise SandboxUnavailable(
                    f"cannot stage the interpreter {self.host_python} at a neutral path: {e}"
                ) from e
            self.python = Path(PYTHON_PREFIX) / "bin" / self.host_python.name
            self.prefix = Path(PYTHON_PREFIX)
            if _needs_own_libpython(self.host_python, self.staged_prefix):
                # a shared libpython found by an absolute RUNPATH naming the host prefix
                self.env["LD_LIBRARY_PATH"] = f"{PYTHON_PREFIX}/lib"
        self.arch = host_arch()
        self.worker_bytes = read_pinned("runner/sandbox/_worker.py", root=policy_root)
        self.worker_code = worker_bytecode(self.worker_bytes)  # what calls run
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
        self.ids = HostIds(host_ids) if self.drops_root else None
        self.host_uid = host_ids[0] if self.drops_root else os.geteuid()
        self.host_gid = host_ids[0] if self.drops_root else os.getegid()
        sweep_orphaned_sandboxes()  # a pid 1 left in its set-up when some reaper was killed
        self.cgroups = CallCgroups.detect()
        self.seccomp_policy = policy_summary(source)
        # planned: refuse a kernel that cannot give a guarantee before starting anything; the
        # record is rebuilt from what the self-check's worker reports it applied (see _record)
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
        self.applied: dict[str, Any] = {}
        # a non-root parent: the self-check's identity as the host sees it (see _host_view)
        self.host_view: dict[str, Any] | None = None
        # why a delegated cgroup subtree a non-root parent found could not be used (recorded)
        self.cgroup_refusal: str | None = None
        try:
            self.check()
        except SandboxUnavailable as e:
            if self.drops_root or self.cgroups is None:
                raise
            # a user's delegated subtree that takes groups but not this sandbox's processes:
            # the documented unprivileged fallback (rlimits), recorded with the reason
            self.cgroup_refusal = str(e)
            _log.warning("sandbox: the delegated cgroup subtree is not usable (%s): per-process "
                         "rlimits bound memory and processes instead", e)
            self.cgroups.close()
            self.cgroups = None
            self.check()
        atexit.register(self.close)
        _BACKENDS.add(self)

    def check(self) -> dict[str, Any]:
        """Run the self-check and rebuild the record (``layers()``) from what its worker reports
        it applied. Raises SandboxUnavailable if a guarantee has no layer left in force."""
        self.applied = self._smoke()
        facts = self._applied_facts(self.applied)
        self.guarantees, self.missing = assess(facts)
        accepted = {"exec"} if self.allow_weaker_landlock_unsafe else set()
        if set(self.missing) - accepted:
            from runner.sandbox._layers import GUARANTEES

            texts = "; ".join(g.text for g in GUARANTEES if g.key in self.missing)
            raise SandboxUnavailable(f"the sandbox self-check left no layer in force for: {texts}")
        return self.applied

    def _applied_facts(self, a: Mapping[str, Any]) -> HostFacts:
        """The layer facts of a worker's ``check`` report."""
        joined = set(a.get("cgroups_joined") or [])
        controllers: set[str] = set()
        if self.cgroups is not None and joined:
            if self.cgroups.version == 2:
                controllers = {"pids", "memory", *(("cpu",) if self.cgroups.cpu else ())}
            else:
                controllers = joined
                if not {"cpu", "cpuacct"} <= joined:
                    controllers.discard("cpu")
        uid_map = a.get("uid_map") or [0, 0, 1]
        ids = a.get("ids") or [0, 0, 0]
        host_uid = int(uid_map[1]) + int(ids[0]) - int(uid_map[0])
        if self.host_view is not None:
            # seen from the host: newer bwrap's --disable-userns runs the command in a nested
            # user namespace, whose uid_map (read inside) maps only to bwrap's own namespace
            host_uid = int(self.host_view["uid"])
        caps = a.get("capabilities") or {}
        rl = a.get("rlimits") or {}
        return HostFacts(
            landlock_abi=int(a.get("abi") or 0),
            seccomp=a.get("seccomp") == "2",
            cgroups=f"v{self.cgroups.version}" if self.cgroups is not None and joined else None,
            cgroup_controllers=frozenset(controllers),
            host_uid=host_uid,
            per_call_ids=self.ids is not None and host_uid in self.ids.ids,
            rlimits=frozenset(k for k, v in rl.items() if v is not None),
            capabilities_empty=bool(caps) and all(int(v, 16) == 0 for v in caps.values()),
        )

    def _smoke(self) -> dict[str, Any]:
        """Start one real sandbox so a host that cannot run it fails here, plainly, not mid-study."""
        limits = Limits(wall_s=30.0)
        child = self._launch({"mode": "check"}, limits, (), b"")
        self.host_view = child.host_view
        result = self._finish(child, b"", limits, child.born)
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
            "python": str(self.python),  # as calls see it (see PYTHON_PREFIX)
            "arch": self.arch,
            "landlock_abi": self.landlock_abi,
            "landlock_applied": self.applied,
            "allow_weaker_landlock_unsafe": self.allow_weaker_landlock_unsafe,
            "layers": self.layers(),
        }

    def layers(self) -> dict[str, Any]:
        """The isolation layers in force here, for the preflight report, run header and manifest:
        built from what the self-check's worker reported it applied (read back from the kernel
        inside the sandbox), never from what this backend planned."""
        a = self.applied
        facts = self._applied_facts(a)
        rl = a.get("rlimits") or {}
        v = f"cgroup-v{self.cgroups.version}" if self.cgroups is not None else ""
        why_none = ("no writable pids+memory cgroup" if os.geteuid() == 0 else
                    f"the delegated cgroup subtree was refused: {self.cgroup_refusal}"
                    if self.cgroup_refusal else
                    "unprivileged parent without a delegated cgroup v2 subtree")  # fmt: skip
        bounds = {
            "processes": (f"{v} pids.max" if facts.cgroup("pids") else
                          "rlimit RLIMIT_NPROC (per host uid)" if facts.rlimit("nproc")
                          and facts.host_uid != 0 else "not bounded"),
            "memory": (f"{v} per-call memory limit" if facts.cgroup("memory") else
                       f"rlimit RLIMIT_AS per process (no per-call cgroup: {why_none})"
                       if facts.rlimit("address_space_bytes") else "not bounded"),
            "swap": ((f"{v} none allowed" if self.cgroups is not None and self.cgroups.swap_bounded
                      else "not bounded (no swap accounting on this host)")
                     if facts.cgroup("memory") else "not bounded"),
            "cpu": ((self.cgroups.bounds().get("cpu", "") if self.cgroups is not None else "")
                    if facts.cgroup("cpu") else
                    "rlimit RLIMIT_CPU per process (no per-call cpu cgroup), and the wall clock"
                    if facts.rlimit("cpu_s") else "the wall clock only"),
        }  # fmt: skip
        return {
            "landlock_abi": facts.landlock_abi,
            "kernel_landlock_abi": self.kernel_landlock_abi,
            "emulated_landlock_abi": self.emulate_landlock_abi,
            "landlock_applied": a.get("abi"),
            "seccomp": {"mode": "filter" if a.get("seccomp") == "2" else
                        f"status {a.get('seccomp')!r}",
                        **self.seccomp_policy,
                        "kernel_passthrough": seccomp_passthrough(self.arch, os.uname().release)},
            "cgroups": facts.cgroups,
            "cgroup_controllers": sorted(facts.cgroup_controllers or ()),
            "bounds": bounds,
            "host_uid": facts.host_uid,
            "host_gid": int((a.get("ids") or [0, 0])[1]) if self.drops_root else self.host_gid,
            "host_ids": ({"per_call": True, "range": self.ids.describe()} if self.ids is not None
                         else {"per_call": False, "range": None,
                               "shared": "the parent's uid (non-root parent)"}),
            "uid_map": a.get("uid_map"),
            # the host's view of the self-check's user namespace (non-root parent), and whether
            # the command ran in a nested one (bwrap >= 0.8 with --disable-userns)
            "uid_map_host": self.host_view["uid_map"] if self.host_view is not None else None,
            "nested_user_namespace": (self.host_view is not None and a.get("uid_map") is not None
                                      and self.host_view["uid_map"] != a.get("uid_map")),
            "capabilities": a.get("capabilities"),
            "no_new_privs": a.get("no_new_privs"),
            "keyring": a.get("keyring"),
            "rlimits": rl,
            "guarantees": self.guarantees,
            "missing_guarantees": self.missing,
            "allow_weaker_landlock_unsafe": self.allow_weaker_landlock_unsafe,
            "pool": {"size": self.pool_size, "max_idle_s": self.pool_max_idle_s,
                     "single_use": True},
        }

    def sandbox_path(self, host: Path, dest: str) -> str:
        """Where a bind of ``host`` on ``dest`` appears inside the sandbox."""
        return dest

    # -- running --------------------------------------------------------------------------------

    def run_worker(
        self,
        config: Mapping[str, Any],
        *,
        stdin: bytes,
        limits: Limits,
        ro_binds: Sequence[tuple[Path, str]] = (),
    ) -> ChildResult:
        """Run the pinned worker with ``config`` (mode and mode arguments) under the full policy:
        ``tool`` and ``exec`` calls from the pool of pre-spawned children when ``pool_size`` > 0,
        anything else in a child started for it."""
        self._check_binds(ro_binds)
        if self.pool_size > 0 and config.get("mode") in ("tool", "exec"):
            return self._run_pooled(config, stdin, limits, ro_binds)
        child = self._launch(dict(config), limits, ro_binds, b"")
        return self._finish(child, stdin, limits, child.born)

    def _launch(self, cfg: dict[str, Any], limits: Limits, ro_binds: Sequence[tuple[Path, str]],
                key: bytes, dirs: Sequence[str] = (), background: bool = False) -> _Child:  # fmt: skip
        """Start one sandbox with the worker (every layer applied by the time it runs anything
        not its own); the caller feeds and supervises it (``_finish``) or discards it."""
        born = time.monotonic()
        cfg["rlimits"] = limits.rlimits()
        cfg["landlock"] = self._landlock([d for _, d in ro_binds])
        bind_fds: list[tuple[int, str, int]] = []
        proc_fds: list[tuple[int, str]] = []
        prefix_fd: int | None = None
        group: CallGroup | None = None
        uid: int | None = None
        info_r, info_w = os.pipe()
        seccomp_fd = worker_fd = pidfd = -1
        ok = False
        tag: str | None = None
        proc: subprocess.Popen[bytes] | None = None
        try:
            seccomp_fd = _memfd("ect-seccomp", self.seccomp_bytes)
            worker_fd = _memfd("ect-worker", self.worker_code)
            bind_fds = [*((-1, d, 0o555) for d in dirs), *self._copy_binds(ro_binds)]
            # a boot id of this call's own (the host's identifies the machine and its boot) and
            # an empty key-users (it lists every uid's key counts, root's too)
            boot = f"{uuid.uuid4()}\n".encode()
            proc_fds.append((_memfd("ect-boot-id", boot), "/proc/sys/kernel/random/boot_id"))
            if os.path.exists("/proc/key-users"):
                proc_fds.append((_memfd("ect-key-users", b""), "/proc/key-users"))
            if self.staged_prefix is not None:
                prefix_fd = os.open(self.staged_prefix, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            bw = self.bwrap_argv(limits, bind_fds, seccomp_fd, worker_fd, prefix_fd, proc_fds)
            bw += ["--info-fd", str(info_w)]
            deadline = born + limits.wall_s
            if self.cgroups is not None:
                # the sandbox's pid 1 + the worker, then the command's own processes
                group = self.cgroups.acquire(int(limits.nproc) + 2, int(limits.memory_bytes))
                cfg["cgroup_gate"] = group.gate
            if self.ids is not None:
                # this call's own host id: RLIMIT_NPROC and every other per-uid count is per call
                if background:  # a refill never waits for an id or takes one from a waiting child
                    uid = self.ids.lease(0.0)
                else:
                    try:
                        uid = self.ids.lease(0.0)
                    except SandboxUnavailable:
                        _reclaim_waiting()  # children waiting in any pool hold ids: free them
                        uid = self.ids.lease(limits.wall_s)
                cfg["drop_to"] = [uid, uid]
            cfg["new_session_keyring"] = True
            cmd = [str(self.python), "-I", "-S", WORKER_PATH, canonical_bytes(cfg).decode("utf-8")]
            passed = (seccomp_fd, worker_fd, info_w, *(fd for fd, _, _ in bind_fds if fd >= 0),
                      *(fd for fd, _ in proc_fds),
                      *((prefix_fd,) if prefix_fd is not None else ()))  # fmt: skip
            # argv[0] is a fresh tag the reaper knows: if this runner ends, however it ends,
            # the launcher and the sandbox's pid 1 (its clone, same argv) are killed by it
            tag = reaper_link().tag()
            proc = subprocess.Popen(
                [tag, *bw[1:], *cmd],
                executable=self.bwrap,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={},
                cwd="/",
                pass_fds=passed,
                start_new_session=True,
            )
            reaper_link().started(tag, proc.pid)
            for fd in (seccomp_fd, worker_fd, info_w):
                os.close(fd)
            seccomp_fd = worker_fd = info_w = -1
            pid1 = _read_child_pid(info_r, deadline)
            host_view = None
            if pid1 is not None:
                with contextlib.suppress(OSError):
                    pidfd = os.pidfd_open(pid1)
                if self.ids is None and cfg.get("mode") == "check":
                    host_view = _host_view(pid1, deadline)
                if group is not None:
                    CallCgroups.adopt(group, pid1, deadline)
            ok = True
            return _Child(proc, pidfd, group, uid, born, key, tag, host_view=host_view)
        finally:
            fds = [seccomp_fd, worker_fd, info_r, info_w,
                   *(fd for fd, _, _ in bind_fds), *(fd for fd, _ in proc_fds)]  # fmt: skip
            if prefix_fd is not None:
                fds.append(prefix_fd)
            if not ok:
                fds.append(pidfd)
            for fd in fds:
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if not ok:
                if proc is not None:  # started, then failed: it serves nothing
                    with contextlib.suppress(OSError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    with contextlib.suppress(Exception):
                        proc.communicate(timeout=5)
                self._release(group, uid, tag)

    def _release(self, group: CallGroup | None, uid: int | None, tag: str | None) -> None:
        if group is not None and self.cgroups is not None:
            self.cgroups.release(group)
        if uid is not None and self.ids is not None:
            self.ids.release(uid)
        if tag is not None:
            reaper_link().untag(tag)

    def _finish(self, child: _Child, stdin: bytes, limits: Limits, started: float) -> ChildResult:
        """Feed and supervise a started child (its wall clock from ``started``), then destroy it."""
        try:
            cpu_used = None
            group = child.group
            if group is not None and group.cpu is not None and self.cgroups is not None:
                cgroups, base = self.cgroups, self.cgroups.cpu_usage(group)

                def cpu_used() -> float:
                    now = cgroups.cpu_usage(group)
                    return now - base if now >= 0 and base >= 0 else 0.0

            oom_killed = None
            if group is not None and self.cgroups is not None:
                cg, kills = self.cgroups, self.cgroups.oom_kills(group)  # groups are reused

                def oom_killed() -> bool:
                    now = cg.oom_kills(group)
                    return kills >= 0 and now > kills

            return supervise(child.proc, stdin, limits, started=started,
                             inner_pidfd=child.pidfd, cpu_used=cpu_used,
                             oom_killed=oom_killed)  # fmt: skip
        finally:
            if child.pidfd >= 0:
                with contextlib.suppress(OSError):
                    os.close(child.pidfd)
            self._release(child.group, child.uid, child.tag)
