"""Compile the Linux seccomp policy (``sandbox_profiles/seccomp.toml``) into a classic BPF program.

Why our own compiler rather than libseccomp: Debian's ``python3-seccomp`` is built for the
distribution's interpreter, not the one the runner uses (pyenv, venvs), and a pip build needs
the C library and headers. The policy is a short deny list, so the program is small enough to
write out and review by hand; the bytes are deterministic, committed and pinned in ``PINS``.

The output is what ``bwrap --seccomp FD`` reads: a packed array of ``struct sock_filter``
(``u16 code; u8 jt; u8 jf; u32 k``), little-endian on both supported architectures.
"""

from __future__ import annotations

import struct
import tomllib
from collections.abc import Mapping
from typing import Any

from runner.errors import SandboxError

__all__ = ["ARCHES", "SeccompPolicyError", "compile_policy", "compile_policy_file", "host_arch"]


class SeccompPolicyError(SandboxError):
    """The seccomp policy source is malformed (unknown syscall, errno or constant)."""


# BPF opcodes (linux/bpf_common.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06

_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# struct seccomp_data offsets: int nr; u32 arch; u64 ip; u64 args[6] (low word first: LE)
_OFF_NR = 0
_OFF_ARCH = 4


def _off_arg(i: int) -> int:
    return 16 + 8 * i


_X32_SYSCALL_BIT = 0x40000000

# Linux errno values are the same on x86_64 and aarch64; spelled out so the bytes never depend
# on the host's errno module.
_ERRNO = {"EPERM": 1, "EACCES": 13, "ENOSYS": 38, "EAFNOSUPPORT": 97}
_CONST = {"AF_UNIX": 1, "TIOCSTI": 0x5412, "TIOCLINUX": 0x541C}

# Syscall numbers (asm/unistd_64.h and asm-generic/unistd.h).
_X86_64 = {
    "socket": 41, "ioctl": 16, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321,
    "perf_event_open": 298, "userfaultfd": 323, "add_key": 248, "request_key": 249, "keyctl": 250,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "unshare": 272, "setns": 308, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "open_by_handle_at": 304,
    "swapon": 167, "swapoff": 168, "reboot": 169, "syslog": 103, "clone3": 435,
}  # fmt: skip
_AARCH64 = {
    "socket": 198, "ioctl": 29, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 280,
    "perf_event_open": 241, "userfaultfd": 282, "add_key": 217, "request_key": 218, "keyctl": 219,
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "unshare": 97, "setns": 268, "init_module": 105, "finit_module": 273,
    "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "open_by_handle_at": 265,
    "swapon": 224, "swapoff": 225, "reboot": 142, "syslog": 116, "clone3": 435,
}  # fmt: skip

# arch name -> (AUDIT_ARCH_*, syscall table, reject the x32 ABI)
ARCHES: dict[str, tuple[int, Mapping[str, int], bool]] = {
    "x86_64": (0xC000003E, _X86_64, True),
    "aarch64": (0xC00000B7, _AARCH64, False),
}


def host_arch() -> str:
    """The running machine's architecture name as used in filter file names."""
    import platform

    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    if not (0 <= jt <= 255 and 0 <= jf <= 255):
        raise SeccompPolicyError("seccomp jump out of range (policy too long)")
    return struct.pack("<HBBI", code, jt, jf, k)


def _errno(name: Any, where: str) -> int:
    if not isinstance(name, str) or name not in _ERRNO:
        raise SeccompPolicyError(f"seccomp policy: unknown errno {name!r} at {where}")
    return _ERRNO[name]


def _const(name: Any, where: str) -> int:
    if not isinstance(name, str) or name not in _CONST:
        raise SeccompPolicyError(f"seccomp policy: unknown constant {name!r} at {where}")
    return _CONST[name]


def _nr(table: Mapping[str, int], name: str) -> int:
    if name not in table:
        raise SeccompPolicyError(f"seccomp policy: unknown syscall {name!r}")
    return table[name]


def compile_policy(policy: Mapping[str, Any], arch: str) -> bytes:
    """Return the BPF program bytes for ``policy`` (parsed TOML) on ``arch``.

    Raises:
        SeccompPolicyError: unknown format, arch, syscall, errno or constant.
    """
    if policy.get("format") != "ect.seccomp-policy/1" or policy.get("default") != "allow":
        raise SeccompPolicyError(
            "seccomp policy: expected format ect.seccomp-policy/1, default allow"
        )
    if arch not in ARCHES:
        raise SeccompPolicyError(f"seccomp policy: unsupported architecture {arch!r}")
    audit_arch, table, reject_x32 = ARCHES[arch]

    prog: list[bytes] = [
        _ins(_LD_W_ABS, _OFF_ARCH),
        _ins(_JEQ_K, audit_arch, 1, 0),
        _ins(_RET_K, _RET_KILL_PROCESS),
        _ins(_LD_W_ABS, _OFF_NR),
    ]
    if reject_x32:
        prog += [_ins(_JGE_K, _X32_SYSCALL_BIT, 0, 1), _ins(_RET_K, _RET_KILL_PROCESS)]

    # (nr, block) pairs; each block runs with A = nr and ends in a RET on every path.
    blocks: list[tuple[int, list[bytes]]] = []
    deny = policy.get("deny", {})
    for name in sorted(deny):
        blocks.append((_nr(table, name), [_ins(_RET_K, _RET_ERRNO | _errno(deny[name], name))]))

    sock = policy.get("socket")
    if sock is not None:
        domains = [_const(d, "socket.allow_domains") for d in sock["allow_domains"]]
        n = len(domains)
        block = [_ins(_LD_W_ABS, _off_arg(0))]
        block += [_ins(_JEQ_K, d, n - i, 0) for i, d in enumerate(domains)]
        block += [_ins(_RET_K, _RET_ERRNO | _errno(sock["errno"], "socket.errno"))]
        block += [_ins(_RET_K, _RET_ALLOW)]
        blocks.append((_nr(table, "socket"), block))

    ioc = policy.get("ioctl")
    if ioc is not None:
        reqs = [_const(r, "ioctl.deny_requests") for r in ioc["deny_requests"]]
        n = len(reqs)
        block = [_ins(_LD_W_ABS, _off_arg(1))]
        block += [_ins(_JEQ_K, r, n - i, 0) for i, r in enumerate(reqs)]
        block += [_ins(_RET_K, _RET_ALLOW)]
        block += [_ins(_RET_K, _RET_ERRNO | _errno(ioc["errno"], "ioctl.errno"))]
        blocks.append((_nr(table, "ioctl"), block))

    for nr, block in sorted(blocks, key=lambda b: b[0]):
        prog.append(_ins(_JEQ_K, nr, 0, len(block)))
        prog += block
    prog.append(_ins(_RET_K, _RET_ALLOW))
    if len(prog) > 4096:
        raise SeccompPolicyError("seccomp program longer than BPF_MAXINSNS")
    return b"".join(prog)


def compile_policy_file(source: bytes, arch: str) -> bytes:
    """Parse the TOML policy ``source`` bytes and compile it for ``arch``."""
    try:
        policy = tomllib.loads(source.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SeccompPolicyError(f"seccomp policy is not valid TOML: {e}") from e
    return compile_policy(policy, arch)
