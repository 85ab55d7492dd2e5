"""Which layer provides each guarantee of the Linux sandbox, and from which kernel.

The bwrap backend accepts a kernel when every guarantee ``docs/sandbox.md`` promises still has at
least one layer in force, and refuses naming the guarantee that has none. The decision is a pure
function of the host facts (:class:`HostFacts`) so it is unit-tested over simulated kernels;
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
    "Guarantee",
    "HostFacts",
    "Layer",
    "assess",
    "kernel_matrix",
]

# Landlock ABI -> first mainline kernel providing it.
LANDLOCK_ABI_KERNEL: dict[int, str] = {1: "5.13", 2: "5.19", 3: "6.2", 4: "6.7", 5: "6.10",
                                       6: "6.12", 7: "6.15"}  # fmt: skip

# Named stock kernels: (kernel version, Landlock ABI of its stock build when enabled).
KERNELS: dict[str, tuple[str, int]] = {
    "Ubuntu 22.04 (5.15)": ("5.15", 1),
    "Debian 12 (6.1)": ("6.1", 2),
    "Ubuntu 24.04 (6.8)": ("6.8", 4),
}


@dataclass(frozen=True)
class HostFacts:
    """What the host gives the sandbox. ``landlock_abi`` is the ABI the worker applies (after any
    emulation cap); ``cgroups`` is ``None``, ``"v1"`` or ``"v2"``; ``host_uid`` is the uid the
    sandbox runs as on the host."""

    landlock_abi: int
    seccomp: bool = True
    namespaces: bool = True
    cgroups: str | None = None
    host_uid: int = 65534


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
            return f.cgroups is not None
        if n.startswith("non-root host uid"):
            return f.host_uid != 0
        return f.namespaces  # namespaces, mounts, rlimits and the parent: every supported kernel


@dataclass(frozen=True)
class Guarantee:
    key: str
    text: str
    layers: tuple[Layer, ...]
    fallback: str | None = None  # what still holds when no layer is in force (None: refuse)


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
        Layer("non-root host uid (dedicated service id under a root parent)", "any"),
    )),
    Guarantee("kernel_knobs", "/proc/sys, /proc/sysrq-trigger and the other knobs are read-only", (
        Layer("mount namespace: read-only binds over /proc/sys, sysrq-trigger, fs, irq, bus",
              _NS),
        Layer("non-root host uid: DAC refuses writes to root-owned knobs", "any"),
    )),
    Guarantee("memory", "memory is bounded for the call's whole process tree", (
        Layer("cgroup memory limit, no swap (root parent)", "4.5 (v2) / any (v1)"),
    ), fallback="RLIMIT_AS per process only"),
    Guarantee("process_count", "the number of processes is bounded", (
        Layer("cgroup pids.max (root parent)", "4.3"),
        Layer("rlimits: RLIMIT_NPROC (non-root host uid)", "any"),
    )),
)


def assess(facts: HostFacts) -> tuple[dict[str, Any], list[str]]:
    """Per guarantee, the layers in force (or the fallback); and the guarantees with none left.

    Only a guarantee without a fallback counts as missing: the caller refuses such a host unless
    the user explicitly accepts a weaker sandbox (which is then recorded).
    """
    held: dict[str, Any] = {}
    missing: list[str] = []
    for g in GUARANTEES:
        layers = []
        for layer in g.layers:
            if layer.name.startswith("rlimits: RLIMIT_NPROC") and facts.host_uid == 0:
                continue  # the kernel never applies RLIMIT_NPROC to uid 0
            if layer.in_force(facts):
                layers.append(layer.name)
        if layers:
            held[g.key] = layers
        elif g.fallback is not None:
            held[g.key] = [f"fallback: {g.fallback}"]
        else:
            held[g.key] = []
            missing.append(g.key)
    return held, missing


def kernel_matrix() -> list[dict[str, Any]]:
    """Rows for the docs: guarantee, layer, minimum kernel, and whether each named kernel has it."""
    rows = []
    for g in GUARANTEES:
        for layer in g.layers:
            cols = {}
            for name, (_, abi) in KERNELS.items():
                cols[name] = layer.in_force(HostFacts(landlock_abi=abi, cgroups="v2"))
            rows.append({"guarantee": g.key, "layer": layer.name, "minimum": layer.minimum,
                         "kernels": cols})  # fmt: skip
    return rows
