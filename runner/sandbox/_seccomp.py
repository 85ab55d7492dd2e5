"""Compile the Linux seccomp policy (``sandbox_profiles/seccomp.toml``) into a classic BPF program.

Why our own compiler rather than libseccomp: Debian's ``python3-seccomp`` is built for the
distribution's interpreter, not the one the runner uses (pyenv, venvs), and a pip build needs
the C library and headers. The program is small enough to write out and review by hand; the bytes
are deterministic, committed and pinned in ``PINS``. The syscall numbers below were generated
with libseccomp's ``scmp_sys_resolver`` and a test checks them against it.

The policy is an allow-list (``format = "ect.seccomp-policy/3"``, which added ``null_args``):
``[allow]`` syscalls run,
``[enosys]`` ones answer ``ENOSYS`` (feature probes fall back), ``[[arg]]`` rules allow a syscall
only for some values of one argument (``allow_values``) or refuse it when any bit of a mask is set
(``deny_mask``), optionally also requiring other (pointer) arguments to be NULL (``null_args``,
both 32-bit halves compared), and everything else gets the ``default`` errno. ``[refused]`` documents notable
omissions; the compiler checks none of them is allowed. A name one architecture lacks is skipped
there (aarch64 has no legacy ``open``/``stat``/``fork``...); a name neither knows is an error.

The output is what ``bwrap --seccomp FD`` reads: a packed array of ``struct sock_filter``
(``u16 code; u8 jt; u8 jf; u32 k``), little-endian on both supported architectures. The lookup
is a binary search over the syscall number, so a call costs about eight comparisons.
"""

from __future__ import annotations

import struct
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from runner.errors import ExitCategory, SandboxError

__all__ = [
    "ARCHES",
    "SeccompPolicyError",
    "compile_policy",
    "compile_policy_file",
    "host_arch",
    "policy_summary",
]


class SeccompPolicyError(SandboxError):
    """The seccomp policy source is malformed (unknown syscall, errno or constant)."""

    exit_category = ExitCategory.RUNTIME


# BPF opcodes (linux/bpf_common.h)
_LD_W_ABS = 0x20
_JA = 0x05
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# struct seccomp_data offsets: int nr; u32 arch; u64 ip; u64 args[6] (low word first: LE).
# Every argument checked here is an int or unsigned int in the kernel (socket family, prctl
# option, ioctl request, personality) or uses only its low 32 bits (clone flags), so comparing
# the low word is exact.
_OFF_NR = 0
_OFF_ARCH = 4


def _off_arg(i: int) -> int:
    return 16 + 8 * i


_X32_SYSCALL_BIT = 0x40000000
FORMAT = "ect.seccomp-policy/3"

# Linux errno values are the same on x86_64 and aarch64; spelled out so the bytes never depend
# on the host's errno module.
_ERRNO = {"EPERM": 1, "EACCES": 13, "EINVAL": 22, "ENOSYS": 38, "EAFNOSUPPORT": 97}
_CONST = {
    "AF_UNIX": 1,
    # prctl options (linux/prctl.h)
    "PR_SET_PDEATHSIG": 1, "PR_GET_PDEATHSIG": 2, "PR_GET_DUMPABLE": 3, "PR_SET_NAME": 15,
    "PR_GET_NAME": 16, "PR_GET_SECCOMP": 21, "PR_CAPBSET_READ": 23, "PR_CAPBSET_DROP": 24,
    "PR_SET_NO_NEW_PRIVS": 38,
    "PR_GET_NO_NEW_PRIVS": 39,
    # ioctl requests (asm-generic/ioctls.h, the same on x86_64 and aarch64)
    "TCGETS": 0x5401, "TIOCGPGRP": 0x540F, "TIOCSTI": 0x5412, "TIOCGWINSZ": 0x5413,
    "FIONREAD": 0x541B, "TIOCLINUX": 0x541C, "FIONBIO": 0x5421, "FIONCLEX": 0x5450,
    "FIOCLEX": 0x5451,
    "KEYCTL_JOIN_SESSION_KEYRING": 1,
    # personality (linux/personality.h): 0xffffffff queries without changing
    "PER_LINUX": 0, "PER_QUERY": 0xFFFFFFFF,
    # clone flags (linux/sched.h)
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}  # fmt: skip

# Syscall numbers (asm/unistd_64.h and asm-generic/unistd.h), only the names the policy uses.
_X86_64 = {
    "getxattr": 191, "lgetxattr": 192, "fgetxattr": 193, "listxattr": 194, "llistxattr": 195, "flistxattr": 196,
    "read": 0, "write": 1, "open": 2, "close": 3, "stat": 4, "fstat": 5, "lstat": 6, "poll": 7,
    "lseek": 8, "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12, "rt_sigaction": 13,
    "rt_sigprocmask": 14, "rt_sigreturn": 15, "ioctl": 16, "pread64": 17, "pwrite64": 18,
    "readv": 19, "writev": 20, "access": 21, "pipe": 22, "select": 23, "sched_yield": 24,
    "mremap": 25, "madvise": 28, "dup": 32, "dup2": 33, "nanosleep": 35, "getpid": 39,
    "sendfile": 40, "socket": 41, "connect": 42, "sendto": 44, "recvfrom": 45, "sendmsg": 46,
    "recvmsg": 47, "shutdown": 48, "bind": 49, "listen": 50, "getsockname": 51, "getpeername":
    52, "socketpair": 53, "setsockopt": 54, "getsockopt": 55, "clone": 56, "fork": 57, "vfork":
    58, "execve": 59, "exit": 60, "wait4": 61, "kill": 62, "uname": 63, "fcntl": 72, "flock":
    73, "fsync": 74, "fdatasync": 75, "truncate": 76, "ftruncate": 77, "getcwd": 79, "chdir":
    80, "fchdir": 81, "rename": 82, "mkdir": 83, "rmdir": 84, "creat": 85, "link": 86, "unlink":
    87, "symlink": 88, "readlink": 89, "chmod": 90, "fchmod": 91, "umask": 95, "gettimeofday":
    96, "getrlimit": 97, "getrusage": 98, "sysinfo": 99, "times": 100, "ptrace": 101, "getuid":
    102, "syslog": 103, "getgid": 104, "setuid": 105, "setgid": 106, "geteuid": 107, "getegid":
    108, "setpgid": 109, "getppid": 110, "getpgrp": 111, "setsid": 112, "getgroups": 115,
    "setgroups": 116, "setresuid": 117, "getresuid": 118, "setresgid": 119, "getresgid": 120,
    "getpgid": 121, "getsid": 124, "capset": 126, "rt_sigsuspend": 130, "sigaltstack": 131,
    "personality": 135, "statfs": 137, "fstatfs": 138, "vhangup": 153, "modify_ldt": 154,
    "pivot_root": 155, "prctl": 157, "arch_prctl": 158, "adjtimex": 159, "setrlimit": 160,
    "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon":
    167, "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "init_module":
    175, "delete_module": 176, "quotactl": 179, "gettid": 186, "tkill": 200, "time": 201,
    "futex": 202, "sched_getaffinity": 204, "io_setup": 206, "lookup_dcookie": 212,
    "epoll_create": 213, "getdents64": 217, "set_tid_address": 218, "fadvise64": 221,
    "clock_settime": 227, "clock_gettime": 228, "clock_getres": 229, "clock_nanosleep": 230,
    "exit_group": 231, "epoll_wait": 232, "epoll_ctl": 233, "tgkill": 234, "mbind": 237,
    "set_mempolicy": 238, "kexec_load": 246, "waitid": 247, "add_key": 248, "request_key": 249,
    "keyctl": 250, "inotify_init": 253, "migrate_pages": 256, "openat": 257, "mkdirat": 258,
    "newfstatat": 262, "unlinkat": 263, "renameat": 264, "linkat": 265, "symlinkat": 266,
    "readlinkat": 267, "fchmodat": 268, "faccessat": 269, "pselect6": 270, "ppoll": 271,
    "unshare": 272, "set_robust_list": 273, "move_pages": 279, "utimensat": 280, "epoll_pwait":
    281, "accept4": 288, "epoll_create1": 291, "dup3": 292, "pipe2": 293, "inotify_init1": 294,
    "perf_event_open": 298, "fanotify_init": 300, "prlimit64": 302, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "kcmp": 312, "finit_module": 313, "renameat2": 316, "getrandom": 318, "memfd_create": 319,
    "kexec_file_load": 320, "bpf": 321, "execveat": 322, "userfaultfd": 323, "copy_file_range":
    326, "statx": 332, "rseq": 334, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig":
    431, "fsmount": 432, "fspick": 433, "clone3": 435, "close_range": 436, "pidfd_getfd": 438,
    "faccessat2": 439, "mount_setattr": 442, "landlock_create_ruleset": 444,
    "landlock_add_rule": 445, "landlock_restrict_self": 446, "memfd_secret": 447,
    "open_tree_attr": 467,
}  # fmt: skip
_AARCH64 = {
    "getxattr": 8, "lgetxattr": 9, "fgetxattr": 10, "listxattr": 11, "llistxattr": 12, "flistxattr": 13,
    "io_setup": 0, "getcwd": 17, "lookup_dcookie": 18, "epoll_create1": 20, "epoll_ctl": 21,
    "epoll_pwait": 22, "dup": 23, "dup3": 24, "fcntl": 25, "inotify_init1": 26, "ioctl": 29,
    "flock": 32, "mkdirat": 34, "unlinkat": 35, "symlinkat": 36, "linkat": 37, "renameat": 38,
    "umount2": 39, "mount": 40, "pivot_root": 41, "statfs": 43, "fstatfs": 44, "truncate": 45,
    "ftruncate": 46, "faccessat": 48, "chdir": 49, "fchdir": 50, "chroot": 51, "fchmod": 52,
    "fchmodat": 53, "openat": 56, "close": 57, "vhangup": 58, "pipe2": 59, "quotactl": 60,
    "getdents64": 61, "lseek": 62, "read": 63, "write": 64, "readv": 65, "writev": 66,
    "pread64": 67, "pwrite64": 68, "sendfile": 71, "pselect6": 72, "ppoll": 73, "readlinkat":
    78, "newfstatat": 79, "fstat": 80, "fsync": 82, "fdatasync": 83, "utimensat": 88, "acct":
    89, "capset": 91, "personality": 92, "exit": 93, "exit_group": 94, "waitid": 95,
    "set_tid_address": 96, "unshare": 97, "futex": 98, "set_robust_list": 99, "nanosleep": 101,
    "kexec_load": 104, "init_module": 105, "delete_module": 106, "clock_settime": 112,
    "clock_gettime": 113, "clock_getres": 114, "clock_nanosleep": 115, "syslog": 116, "ptrace":
    117, "sched_getaffinity": 123, "sched_yield": 124, "kill": 129, "tkill": 130, "tgkill": 131,
    "sigaltstack": 132, "rt_sigsuspend": 133, "rt_sigaction": 134, "rt_sigprocmask": 135,
    "rt_sigreturn": 139, "reboot": 142, "setgid": 144, "setuid": 146, "setresuid": 147,
    "getresuid": 148, "setresgid": 149, "getresgid": 150, "times": 153, "setpgid": 154,
    "getpgid": 155, "getsid": 156, "setsid": 157, "getgroups": 158, "setgroups": 159, "uname":
    160, "sethostname": 161, "setdomainname": 162, "getrlimit": 163, "setrlimit": 164,
    "getrusage": 165, "umask": 166, "prctl": 167, "gettimeofday": 169, "settimeofday": 170,
    "adjtimex": 171, "getpid": 172, "getppid": 173, "getuid": 174, "geteuid": 175, "getgid":
    176, "getegid": 177, "gettid": 178, "sysinfo": 179, "socket": 198, "socketpair": 199,
    "bind": 200, "listen": 201, "connect": 203, "getsockname": 204, "getpeername": 205,
    "sendto": 206, "recvfrom": 207, "setsockopt": 208, "getsockopt": 209, "shutdown": 210,
    "sendmsg": 211, "recvmsg": 212, "brk": 214, "munmap": 215, "mremap": 216, "add_key": 217,
    "request_key": 218, "keyctl": 219, "clone": 220, "execve": 221, "mmap": 222, "fadvise64":
    223, "swapon": 224, "swapoff": 225, "mprotect": 226, "madvise": 233, "mbind": 235,
    "set_mempolicy": 237, "migrate_pages": 238, "move_pages": 239, "perf_event_open": 241,
    "accept4": 242, "wait4": 260, "prlimit64": 261, "fanotify_init": 262, "name_to_handle_at":
    264, "open_by_handle_at": 265, "setns": 268, "process_vm_readv": 270, "process_vm_writev":
    271, "kcmp": 272, "finit_module": 273, "renameat2": 276, "getrandom": 278, "memfd_create":
    279, "bpf": 280, "execveat": 281, "userfaultfd": 282, "copy_file_range": 285, "statx": 291,
    "rseq": 293, "kexec_file_load": 294, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig":
    431, "fsmount": 432, "fspick": 433, "clone3": 435, "close_range": 436, "pidfd_getfd": 438,
    "faccessat2": 439, "mount_setattr": 442, "landlock_create_ruleset": 444,
    "landlock_add_rule": 445, "landlock_restrict_self": 446, "memfd_secret": 447,
    "open_tree_attr": 467,
}  # fmt: skip

# arch name -> (AUDIT_ARCH_*, syscall table, reject the x32 ABI)
ARCHES: dict[str, tuple[int, Mapping[str, int], bool]] = {
    "x86_64": (0xC000003E, _X86_64, True),
    "aarch64": (0xC00000B7, _AARCH64, False),
}
_KNOWN = set(_X86_64) | set(_AARCH64)


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


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or name not in _KNOWN:
        raise SeccompPolicyError(f"seccomp policy: unknown syscall {name!r}")
    return name


def _arg_block(rule: Mapping[str, Any]) -> list[bytes]:
    """A block that runs with A = nr and returns on every path."""
    where = f"arg rule for {rule.get('syscall')!r}"
    arg = rule.get("arg")
    if not isinstance(arg, int) or isinstance(arg, bool) or not 0 <= arg <= 5:
        raise SeccompPolicyError(f"seccomp policy: {where}: arg must be 0..5")
    deny = _RET_ERRNO | _errno(rule.get("errno"), where)
    nulls = rule.get("null_args", [])
    if not isinstance(nulls, list) or any(
        not isinstance(i, int) or isinstance(i, bool) or not 0 <= i <= 5 or i == arg for i in nulls
    ):
        raise SeccompPolicyError(f"seccomp policy: {where}: null_args must be other args 0..5")
    # each NULL-only argument (a pointer) must be zero in both 32-bit halves, else the deny return
    # of the block below: 4 instructions per argument in front of it
    checks = 4 * len(nulls)
    main = [_ins(_LD_W_ABS, _off_arg(arg))]
    if "allow_values" in rule and "deny_mask" not in rule:
        values = [_const(v, where) for v in rule["allow_values"]]
        n = len(values)
        main += [_ins(_JEQ_K, v, n - i, 0) for i, v in enumerate(values)]
        main += [_ins(_RET_K, deny), _ins(_RET_K, _RET_ALLOW)]
        deny_at = checks + 1 + n
    elif "deny_mask" in rule and "allow_values" not in rule:
        mask = 0
        for v in rule["deny_mask"]:
            mask |= _const(v, where)
        main += [_ins(_JSET_K, mask, 0, 1), _ins(_RET_K, deny), _ins(_RET_K, _RET_ALLOW)]
        deny_at = checks + 2
    else:
        raise SeccompPolicyError(f"seccomp policy: {where}: give allow_values or deny_mask")
    block: list[bytes] = []
    for i in nulls:
        for half in (0, 4):
            block.append(_ins(_LD_W_ABS, _off_arg(i) + half))
            block.append(_ins(_JEQ_K, 0, 0, deny_at - len(block) - 1))
    return block + main


def _search(entries: Sequence[tuple[int, list[bytes]]], default: bytes) -> list[bytes]:
    """Binary search on A (the syscall number) over sorted ``entries``; ``default`` otherwise."""
    if len(entries) <= 3:
        out: list[bytes] = []
        for nr, block in entries:
            out.append(_ins(_JEQ_K, nr, 0, len(block)))
            out += block
        return [*out, default]
    half = len(entries) // 2
    left = _search(entries[:half], default)
    right = _search(entries[half:], default)
    # A >= pivot: fall through to the long jump over the left half; else skip it
    return [_ins(_JGE_K, entries[half][0], 0, 1), struct.pack("<HBBI", _JA, 0, 0, len(left)),
            *left, *right]  # fmt: skip


def compile_policy(policy: Mapping[str, Any], arch: str) -> bytes:
    """Return the BPF program bytes for ``policy`` (parsed TOML) on ``arch``.

    Raises:
        SeccompPolicyError: unknown format, arch, syscall, errno or constant; a syscall listed
            twice, or listed as refused and allowed.
    """
    if policy.get("format") != FORMAT:
        raise SeccompPolicyError(f"seccomp policy: expected format {FORMAT}")
    if arch not in ARCHES:
        raise SeccompPolicyError(f"seccomp policy: unsupported architecture {arch!r}")
    audit_arch, table, reject_x32 = ARCHES[arch]
    default = _ins(_RET_K, _RET_ERRNO | _errno(policy.get("default"), "default"))

    actions: dict[str, list[bytes]] = {}

    def put(name: Any, block: list[bytes]) -> None:
        if _check_name(name) in actions:
            raise SeccompPolicyError(f"seccomp policy: syscall {name!r} listed twice")
        actions[name] = block

    for name in policy.get("allow", {}):
        put(name, [_ins(_RET_K, _RET_ALLOW)])
    for name in policy.get("enosys", {}):
        put(name, [_ins(_RET_K, _RET_ERRNO | _ERRNO["ENOSYS"])])
    for rule in policy.get("arg", []):
        put(rule.get("syscall"), _arg_block(rule))
    for name in policy.get("refused", {}):
        if _check_name(name) in actions:
            raise SeccompPolicyError(f"seccomp policy: {name!r} is both refused and allowed")

    entries = sorted((table[n], b) for n, b in actions.items() if n in table)
    prog: list[bytes] = [
        _ins(_LD_W_ABS, _OFF_ARCH),
        _ins(_JEQ_K, audit_arch, 1, 0),
        _ins(_RET_K, _RET_KILL_PROCESS),
        _ins(_LD_W_ABS, _OFF_NR),
    ]
    if reject_x32:
        prog += [_ins(_JGE_K, _X32_SYSCALL_BIT, 0, 1), _ins(_RET_K, _RET_KILL_PROCESS)]
    prog += _search(entries, default)
    if len(prog) > 4096:
        raise SeccompPolicyError("seccomp program longer than BPF_MAXINSNS")
    return b"".join(prog)


def compile_policy_file(source: bytes, arch: str) -> bytes:
    """Parse the TOML policy ``source`` bytes and compile it for ``arch``."""
    return compile_policy(_parse(source), arch)


def _parse(source: bytes) -> dict[str, Any]:
    try:
        return tomllib.loads(source.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SeccompPolicyError(f"seccomp policy is not valid TOML: {e}") from e


def policy_summary(source: bytes) -> dict[str, Any]:
    """What the policy says, for records: default errno and the sizes of each list."""
    p = _parse(source)
    return {
        "format": p.get("format"),
        "default": p.get("default"),
        "allowed": len(p.get("allow", {})) + len(p.get("arg", [])),
        "argument_checked": sorted(r.get("syscall") for r in p.get("arg", [])),
        "enosys": sorted(p.get("enosys", {})),
    }
