"""Which layer provides each guarantee of the Linux sandbox, and from which kernel.

The bwrap backend accepts a kernel when every guarantee ``docs/sandbox.md`` promises still has at
least one layer in force, and refuses naming the guarantee that has none. The decision is a pure
function of the facts (:class:`HostFacts`, built from what the worker reported it applied) so
it is unit-tested over simulated kernels;
:func:`assess` also returns, per guarantee, the layers actually providing it, for the records
(preflight report, run header, manifest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "GUARANTEES",
    "KERNELS",
    "LANDLOCK_ABI_KERNEL",
    "SECCOMP_PASSTHROUGH",
    "Guarantee",
    "HostFacts",
    "Layer",
    "assess",
    "kernel_matrix",
    "seccomp_passthrough",
]

# Landlock ABI -> first mainline kernel providing it.
LANDLOCK_ABI_KERNEL: dict[int, str] = {1: "5.13", 2: "5.19", 3: "6.2", 4: "6.7", 5: "6.10",
                                       6: "6.12", 7: "6.15"}  # fmt: skip

# Named stock kernels: (kernel version, Landlock ABI of its stock build when enabled).
KERNELS: dict[str, tuple[str, int]] = {
    "Ubuntu 22.04 (5.15)": ("5.15", 1),
    "Debian 12 (6.1)": ("6.1", 2),
    "Ubuntu 24.04 (6.8)": ("6.8", 4),
    "Debian 13 (6.12)": ("6.12", 6),
}


@dataclass(frozen=True)
class HostFacts:
    """What the sandbox got, as the worker reported it (``BwrapBackend`` builds these from the
    worker's ``check`` report, never from what it planned).

    ``landlock_abi`` is the ABI the worker applied; ``cgroups`` is ``None``, ``"v1"`` or ``"v2"``
    and ``cgroup_controllers`` the controllers the worker was in (``None``: pids, memory and cpu);
    ``host_uid`` is the uid the sandbox runs as on the host; ``per_call_ids`` that no concurrent
    call runs as it; ``rlimits`` the ``Limits.rlimits()`` keys the worker has in force
    (``None``: all); ``capabilities_empty`` that every capability set read back empty."""

    landlock_abi: int
    seccomp: bool = True
    namespaces: bool = True
    cgroups: str | None = None
    host_uid: int = 65534
    cgroup_controllers: frozenset[str] | None = None
    per_call_ids: bool = True
    rlimits: frozenset[str] | None = None
    capabilities_empty: bool = True

    def cgroup(self, controller: str) -> bool:
        if self.cgroups is None:
            return False
        return self.cgroup_controllers is None or controller in self.cgroup_controllers

    def rlimit(self, key: str) -> bool:
        return self.rlimits is None or key in self.rlimits


@dataclass(frozen=True)
class Layer:
    name: str
    minimum: str  # the kernel (or condition) it needs, for the docs matrix

    def in_force(self, f: HostFacts) -> bool:
        n = self.name
        if n.startswith("Landlock"):
            need = int(n.rsplit("ABI ", 1)[1].rstrip(")"))
            return f.landlock_abi >= need
        if n.startswith("seccomp"):
            return f.seccomp
        if n.startswith("cgroup"):
            return f.cgroup(n.split()[1].split(".")[0])  # "cgroup <controller>[.file] ..."
        if n.startswith("non-root host uid"):
            return f.host_uid != 0
        if n.startswith("per-call host uid"):
            return f.per_call_ids and f.host_uid != 0
        if n.startswith("rlimits: RLIMIT_NPROC"):
            return f.rlimit("nproc") and f.host_uid != 0  # never applied to uid 0
        if n.startswith("every capability set empty"):
            return f.capabilities_empty
        return f.namespaces  # namespaces, mounts and the parent: every supported kernel


@dataclass(frozen=True)
class Guarantee:
    key: str
    text: str
    layers: tuple[Layer, ...]
    fallback: str | None = None  # what still holds when no layer is in force (None: refuse)
    fallback_rlimit: str | None = None  # the rlimit the fallback rests on (absent: refuse)


_NS = "3.8 (user namespaces)"
_LL = LANDLOCK_ABI_KERNEL

GUARANTEES: tuple[Guarantee, ...] = (
    Guarantee("network", "no network: no socket reaches anything outside the call", (
        Layer("network namespace (loopback only)", _NS),
        Layer("seccomp: socket/socketpair AF_UNIX only", "3.5"),
        Layer("Landlock TCP bind/connect rules (ABI 4)", _LL[4]),
    )),
    Guarantee("host_files", "no host file outside the binds is visible", (
        Layer("mount namespace: new root of read-only binds", _NS),
        Layer("Landlock filesystem rules (ABI 1)", _LL[1]),
    )),
    Guarantee("host_facts", "no host path, runner pid, boot id or other users' key counts inside", (
        Layer("mount namespace: binds copied in from memfds, a per-call boot_id, /proc/key-users "
              "masked, cgroup names without the runner's pid", _NS),
    )),
    Guarantee("persistent_writes", "nothing written outside the per-call scratch /tmp", (
        Layer("mount namespace: read-only binds, --remount-ro /", _NS),
        Layer("Landlock filesystem rules (ABI 1)", _LL[1]),
    )),
    Guarantee("exec", "programs run only from the read-only system binds", (
        Layer("Landlock execute right (ABI 1)", _LL[1]),
    )),
    Guarantee("memfd_exec", "no exec of memfds or by descriptor", (
        Layer("seccomp: memfd_create and execveat refused", "3.5"),
    )),
    Guarantee("processes", "no other process is visible, traceable or signalled", (
        Layer("pid namespace", _NS),
        Layer("seccomp: ptrace, process_vm_* refused", "3.5"),
        Layer("Landlock signal scoping (ABI 6)", _LL[6]),
    )),
    Guarantee("abstract_unix", "no abstract unix socket outside the call", (
        Layer("network namespace (abstract sockets are per namespace)", _NS),
        Layer("Landlock abstract-socket scoping (ABI 6)", _LL[6]),
    )),
    Guarantee("kernel_surface", "syscalls outside a reviewed allow-list are refused", (
        Layer("seccomp allow-list", "3.5"),
    )),
    Guarantee("host_root", "the sandbox is never host root", (
        Layer("non-root host uid (a per-call id under a root parent)", "any"),
    )),
    Guarantee("capabilities", "the sandbox holds no capability in any set", (
        Layer("every capability set empty (effective, permitted, inheritable, ambient, "
              "bounding), read back by the worker", "any"),
    )),
    Guarantee("call_identity", "no per-uid kernel quota or keyring is shared between "
              "concurrent calls", (
        Layer("per-call host uid/gid leased from a range (root parent)", "any"),
    ), fallback="the parent's uid, shared by concurrent calls (non-root parent)"),
    Guarantee("kernel_knobs", "/proc/sys, /proc/sysrq-trigger and the other knobs are read-only", (
        Layer("mount namespace: read-only binds over /proc/sys, sysrq-trigger, fs, irq, bus",
              _NS),
        Layer("non-root host uid: DAC refuses writes to root-owned knobs", "any"),
    )),
    Guarantee("memory", "memory is bounded for the call's whole process tree", (
        Layer("cgroup memory limit, no swap (root parent)", "4.5 (v2) / any (v1)"),
    ), fallback="RLIMIT_AS per process only", fallback_rlimit="address_space_bytes"),
    Guarantee("cpu", "CPU time is bounded for the call's whole process tree", (
        Layer("cgroup cpu bandwidth of 1 CPU + usage accounting, killed at cpu_s (root parent)",
              "4.15 (v2) / 3.2 (v1)"),
    ), fallback="RLIMIT_CPU per process only (the wall clock bounds the call)",
        fallback_rlimit="cpu_s"),
    Guarantee("process_count", "the number of processes is bounded", (
        Layer("cgroup pids.max (root parent)", "4.3"),
        Layer("rlimits: RLIMIT_NPROC (non-root host uid)", "any"),
    )),
)

# Syscalls the kernel lets past every seccomp filter by design, per architecture: (name, number,
# first kernel). They act only when called from the kernel's own uprobe trampoline; from anywhere
# else uretprobe kills the caller with SIGILL and uprobe fails with ENXIO (probe
# seccomp.kernel_passthrough).
SECCOMP_PASSTHROUGH: dict[str, tuple[tuple[str, int, str], ...]] = {
    "x86_64": (("uretprobe", 335, "6.11"), ("uprobe", 336, "6.11")),
}


def _version(release: str) -> tuple[int, int]:
    parts = release.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
    except (IndexError, ValueError):
        return 0, 0


def seccomp_passthrough(arch: str, release: str) -> list[str]:
    """The syscalls that bypass seccomp on this architecture and kernel release."""
    have = _version(release)
    return [f"{name} ({nr})" for name, nr, first in SECCOMP_PASSTHROUGH.get(arch, ())
            if have >= _version(first)]  # fmt: skip


def assess(facts: HostFacts) -> tuple[dict[str, Any], list[str]]:
    """Per guarantee, the layers in force (or the fallback); and the guarantees with none left.

    Only a guarantee without a fallback counts as missing: the caller refuses such a host unless
    the user explicitly accepts a weaker sandbox (which is then recorded).
    """
    held: dict[str, Any] = {}
    missing: list[str] = []
    for g in GUARANTEES:
        layers = [layer.name for layer in g.layers if layer.in_force(facts)]
        if layers:
            held[g.key] = layers
        elif g.fallback is not None and (g.fallback_rlimit is None
                                         or facts.rlimit(g.fallback_rlimit)):  # fmt: skip
            held[g.key] = [f"fallback: {g.fallback}"]
        else:
            held[g.key] = []
            missing.append(g.key)
    return held, missing


def kernel_matrix() -> list[dict[str, Any]]:
    """Rows for the docs: guarantee, layer, minimum kernel, and whether each named kernel has it.

    The last rows are not layers but the kernel's exceptions to one: the syscalls that pass every
    seccomp filter by design ("yes": that kernel lets them through)."""
    rows = []
    for g in GUARANTEES:
        for layer in g.layers:
            cols = {}
            for name, (_, abi) in KERNELS.items():
                cols[name] = layer.in_force(HostFacts(landlock_abi=abi, cgroups="v2"))
            rows.append({"guarantee": g.key, "layer": layer.name, "minimum": layer.minimum,
                         "kernels": cols})  # fmt: skip
    for arch, calls in SECCOMP_PASSTHROUGH.items():
        for name, nr, first in calls:
            rows.append({"guarantee": "kernel_surface",
                         "layer": f"exception: {name} ({nr}) passes seccomp by design ({arch})",
                         "minimum": first,
                         "kernels": {k: bool(seccomp_passthrough(arch, v).count(f"{name} ({nr})"))
                                     for k, (v, _) in KERNELS.items()}})  # fmt: skip
    return rows
