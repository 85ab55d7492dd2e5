"""The seccomp compiler: deterministic, matches the committed filters, and decides as intended.

The decisions are checked with a small classic-BPF interpreter over the compiled bytes, so the
test exercises the exact program bwrap loads (the live probes exercise the kernel side).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from runner.sandbox import compile_policy, compile_policy_file
from runner.sandbox._seccomp import ARCHES, SeccompPolicyError

REPO = Path(__file__).resolve().parents[2]
SOURCE = (REPO / "sandbox_profiles" / "seccomp.toml").read_bytes()
ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS, EAFNOSUPPORT = 0x50001, 0x50026, 0x50061


def run_bpf(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    ins = [struct.unpack("<HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    a6 = list(args) + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *a6)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x35:
            pc += jt if acc >= k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1


def test_committed_filters_are_what_the_source_compiles_to() -> None:
    for arch in ARCHES:
        committed = (REPO / "sandbox_profiles" / f"seccomp-{arch}.bpf").read_bytes()
        assert compile_policy_file(SOURCE, arch) == committed
        assert compile_policy_file(SOURCE, arch) == compile_policy_file(SOURCE, arch)


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_filter_decisions(arch: str) -> None:
    audit, table, x32 = ARCHES[arch]
    prog = compile_policy_file(SOURCE, arch)
    nr = table
    assert run_bpf(prog, nr["socket"], audit, (2, 1, 0)) == EAFNOSUPPORT  # AF_INET
    assert run_bpf(prog, nr["socket"], audit, (10, 1, 0)) == EAFNOSUPPORT  # AF_INET6
    assert run_bpf(prog, nr["socket"], audit, (16, 3, 0)) == EAFNOSUPPORT  # AF_NETLINK
    assert run_bpf(prog, nr["socket"], audit, (1, 1, 0)) == ALLOW  # AF_UNIX
    assert run_bpf(prog, nr["socket"], audit, (1 | (1 << 32), 1, 0)) == ALLOW  # int domain
    for name in ("ptrace", "bpf", "mount", "unshare", "setns", "keyctl", "io_uring_setup",
                 "process_vm_readv", "perf_event_open", "userfaultfd", "kexec_load",
                 "init_module", "open_by_handle_at"):  # fmt: skip
        assert run_bpf(prog, nr[name], audit) == EPERM, name
    assert run_bpf(prog, nr["clone3"], audit) == ENOSYS
    assert run_bpf(prog, nr["ioctl"], audit, (0, 0x5412)) == EPERM  # TIOCSTI
    assert run_bpf(prog, nr["ioctl"], audit, (0, 0x541C)) == EPERM  # TIOCLINUX
    assert run_bpf(prog, nr["ioctl"], audit, (0, 0x5401)) == ALLOW  # TCGETS
    assert run_bpf(prog, 0, audit) == ALLOW  # read / io_setup
    other = next(a for n, (a, _, _) in ARCHES.items() if n != arch)
    assert run_bpf(prog, nr["ptrace"], other) == KILL  # another architecture's numbering
    if x32:
        assert run_bpf(prog, 0x40000000 | 101, audit) == KILL


def test_policy_errors_are_refused() -> None:
    good = {"format": "ect.seccomp-policy/1", "default": "allow", "deny": {"ptrace": "EPERM"}}
    assert compile_policy(good, "x86_64")
    with pytest.raises(SeccompPolicyError, match="unknown syscall"):
        compile_policy({**good, "deny": {"no_such_call": "EPERM"}}, "x86_64")
    with pytest.raises(SeccompPolicyError, match="unknown errno"):
        compile_policy({**good, "deny": {"ptrace": "EWHATEVER"}}, "x86_64")
    with pytest.raises(SeccompPolicyError, match="architecture"):
        compile_policy(good, "mips")
    with pytest.raises(SeccompPolicyError, match="format"):
        compile_policy({**good, "default": "deny"}, "x86_64")
    with pytest.raises(SeccompPolicyError, match="TOML"):
        compile_policy_file(b"format = [", "x86_64")
