"""The seccomp compiler: deterministic, matches the committed filters, and decides as intended.

The decisions are checked with a small classic-BPF interpreter over the compiled bytes, so the
test exercises the exact program bwrap loads (the live probes exercise the kernel side).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import tomllib
from pathlib import Path

import pytest

from runner.sandbox import compile_policy, compile_policy_file
from runner.sandbox._seccomp import ARCHES, SeccompPolicyError

REPO = Path(__file__).resolve().parents[2]
SOURCE = (REPO / "sandbox_profiles" / "seccomp.toml").read_bytes()
POLICY = tomllib.loads(SOURCE.decode())
ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, EINVAL, ENOSYS, EAFNOSUPPORT = 0x50001, 0x50016, 0x50026, 0x50061


def run_bpf(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    ins = [struct.unpack("<HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    a6 = list(args) + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *a6)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x05:
            pc += k
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x35:
            pc += jt if acc >= k else jf
        elif code == 0x45:
            pc += jt if acc & k else jf
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
def test_every_listed_syscall_gets_its_action_and_everything_else_is_refused(arch: str) -> None:
    audit, table, _ = ARCHES[arch]
    prog = compile_policy_file(SOURCE, arch)
    listed = set()
    for name in POLICY["allow"]:
        if name in table:
            assert run_bpf(prog, table[name], audit) == ALLOW, name
            listed.add(table[name])
    for name in POLICY["enosys"]:
        assert run_bpf(prog, table[name], audit) == ENOSYS, name
        listed.add(table[name])
    for rule in POLICY["arg"]:
        listed.add(table[rule["syscall"]])
    for name in POLICY["refused"]:
        if name in table:
            assert run_bpf(prog, table[name], audit) == EPERM, name
    # every number the kernel might know that the policy does not list: the default errno
    for nr in range(0, 600):
        if nr not in listed:
            assert run_bpf(prog, nr, audit) == EPERM, nr


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_argument_filters(arch: str) -> None:
    audit, nr, x32 = ARCHES[arch]
    prog = compile_policy_file(SOURCE, arch)
    for call in ("socket", "socketpair"):
        for family in (2, 10, 16, 30, 40, 44):  # inet, inet6, netlink, tipc, vsock, xdp
            assert run_bpf(prog, nr[call], audit, (family, 1, 0)) == EAFNOSUPPORT
        assert run_bpf(prog, nr[call], audit, (1, 1, 0)) == ALLOW  # AF_UNIX
        assert run_bpf(prog, nr[call], audit, (1 | (1 << 32), 1, 0)) == ALLOW  # int domain
    assert run_bpf(prog, nr["ioctl"], audit, (0, 0x5412)) == EPERM  # TIOCSTI
    assert run_bpf(prog, nr["ioctl"], audit, (0, 0x541C)) == EPERM  # TIOCLINUX
    assert run_bpf(prog, nr["ioctl"], audit, (0, 0x4B3A)) == EPERM  # KDSETMODE
    assert run_bpf(prog, nr["ioctl"], audit, (0, 0x5401)) == ALLOW  # TCGETS
    assert run_bpf(prog, nr["ioctl"], audit, (0, 0x5451)) == ALLOW  # FIOCLEX
    sigchld = 17
    assert run_bpf(prog, nr["clone"], audit, (0x01200000 | sigchld,)) == ALLOW  # fork via clone
    assert run_bpf(prog, nr["clone"], audit, (0x003D0F00,)) == ALLOW  # pthread_create's flags
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                 0x40000000):  # fmt: skip
        assert run_bpf(prog, nr["clone"], audit, (flag | sigchld,)) == EPERM, hex(flag)
    assert run_bpf(prog, nr["prctl"], audit, (38, 1)) == ALLOW  # PR_SET_NO_NEW_PRIVS
    assert run_bpf(prog, nr["prctl"], audit, (15,)) == ALLOW  # PR_SET_NAME
    for option in (4, 8, 22, 36, 0x59616D61):  # SET_DUMPABLE, SET_KEEPCAPS, SET_SECCOMP,
        assert run_bpf(prog, nr["prctl"], audit, (option,)) == EINVAL  # SUBREAPER, SET_PTRACER
    assert run_bpf(prog, nr["personality"], audit, (0xFFFFFFFF,)) == ALLOW  # query
    assert run_bpf(prog, nr["personality"], audit, (0,)) == ALLOW  # PER_LINUX
    assert run_bpf(prog, nr["personality"], audit, (0x0040000,)) == EPERM  # ADDR_NO_RANDOMIZE
    assert run_bpf(prog, nr["personality"], audit, (0x0400000,)) == EPERM  # READ_IMPLIES_EXEC
    # keyctl: only JOIN_SESSION_KEYRING (1) with a NULL name, checked in both 32-bit halves; a
    # named keyring would persist, fill the uid's key quota and be listed to other calls
    assert run_bpf(prog, nr["keyctl"], audit, (1, 0)) == ALLOW
    assert run_bpf(prog, nr["keyctl"], audit, (1, 0x7FFF0000)) == EPERM
    assert run_bpf(prog, nr["keyctl"], audit, (1, 0x7F00_0000_0000)) == EPERM  # high half only
    assert run_bpf(prog, nr["keyctl"], audit, (1, 1 << 63)) == EPERM
    assert run_bpf(prog, nr["keyctl"], audit, (0, 0)) == EPERM  # GET_KEYRING_ID
    assert run_bpf(prog, nr["keyctl"], audit, (1 | (1 << 32), 0)) == ALLOW  # int operation
    other = next(a for n, (a, _, _) in ARCHES.items() if n != arch)
    assert run_bpf(prog, nr["read"], other) == KILL  # another architecture's numbering
    if x32:
        assert run_bpf(prog, 0x40000000 | 0, audit) == KILL


def test_both_architectures_allow_the_same_set_modulo_legacy_calls() -> None:
    x86, arm = ARCHES["x86_64"][1], ARCHES["aarch64"][1]
    names = set(POLICY["allow"]) | set(POLICY["enosys"]) | {r["syscall"] for r in POLICY["arg"]}
    only_x86 = {n for n in names if n in x86 and n not in arm}
    # aarch64 has only the *at / 2 / 3 / p-forms of these; each has its modern twin allowed
    twins = {"open": "openat", "creat": "openat", "stat": "newfstatat", "lstat": "newfstatat",
             "access": "faccessat", "readlink": "readlinkat", "dup2": "dup3", "pipe": "pipe2",
             "mkdir": "mkdirat", "unlink": "unlinkat", "rmdir": "unlinkat", "rename": "renameat",
             "symlink": "symlinkat", "link": "linkat", "chmod": "fchmodat", "fork": "clone",
             "vfork": "clone", "getpgrp": "getpgid", "time": "clock_gettime", "poll": "ppoll",
             "select": "pselect6", "epoll_create": "epoll_create1", "epoll_wait": "epoll_pwait",
             "arch_prctl": "set_tid_address"}  # fmt: skip
    assert only_x86 == set(twins)
    assert all(t in names and t in arm for t in twins.values())
    assert {n for n in names if n in arm and n not in x86} == set()


@pytest.mark.skipif(shutil.which("scmp_sys_resolver") is None,
                    reason="libseccomp's scmp_sys_resolver is installed by make sysdeps-test")  # fmt: skip
@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_syscall_numbers_match_libseccomp(arch: str) -> None:
    table = ARCHES[arch][1]
    newer_than_libseccomp = {"open_tree_attr"}  # Linux 6.15; 467 on every architecture
    names = sorted(set(table) - newer_than_libseccomp)
    out = subprocess.run(["sh", "-c", f'for n in {" ".join(names)}; do scmp_sys_resolver '
                          f'-a {arch} $n; done'], capture_output=True, text=True, check=True)  # fmt: skip
    assert [int(x) for x in out.stdout.split()] == [table[n] for n in names]
    other = ARCHES["aarch64" if arch == "x86_64" else "x86_64"][1]
    for name in sorted(set(other) - set(table) - newer_than_libseccomp):  # absent here: truly absent
        r = subprocess.run(["scmp_sys_resolver", "-a", arch, name], capture_output=True, text=True)
        assert int(r.stdout.strip()) < 0, name
    assert table["open_tree_attr"] == 467


def test_policy_errors_are_refused() -> None:
    good = {"format": "ect.seccomp-policy/3", "default": "EPERM", "allow": {"read": "x"}}
    assert compile_policy(good, "x86_64")
    with pytest.raises(SeccompPolicyError, match="unknown syscall"):
        compile_policy({**good, "allow": {"no_such_call": "x"}}, "x86_64")
    with pytest.raises(SeccompPolicyError, match="unknown errno"):
        compile_policy({**good, "default": "EWHATEVER"}, "x86_64")
    with pytest.raises(SeccompPolicyError, match="architecture"):
        compile_policy(good, "mips")
    with pytest.raises(SeccompPolicyError, match="format"):
        compile_policy({**good, "format": "ect.seccomp-policy/1"}, "x86_64")
    with pytest.raises(SeccompPolicyError, match="twice"):
        compile_policy({**good, "enosys": {"read": "x"}}, "x86_64")
    with pytest.raises(SeccompPolicyError, match="refused and allowed"):
        compile_policy({**good, "refused": {"read": "x"}}, "x86_64")
    with pytest.raises(SeccompPolicyError, match="null_args"):
        compile_policy({**good, "arg": [{"syscall": "keyctl", "arg": 0, "errno": "EPERM",
                                         "allow_values": ["AF_UNIX"], "null_args": [0]}]},
                       "x86_64")  # fmt: skip
    with pytest.raises(SeccompPolicyError, match="allow_values or deny_mask"):
        compile_policy({**good, "arg": [{"syscall": "socket", "arg": 0, "errno": "EPERM"}]},
                       "x86_64")  # fmt: skip
    with pytest.raises(SeccompPolicyError, match="unknown constant"):
        compile_policy({**good, "arg": [{"syscall": "socket", "arg": 0, "errno": "EPERM",
                                         "allow_values": ["AF_NOPE"]}]}, "x86_64")  # fmt: skip
    with pytest.raises(SeccompPolicyError, match="TOML"):
        compile_policy_file(b"format = [", "x86_64")
