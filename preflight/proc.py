"""Process probes: a private pid namespace, and no ptrace, unshare, mount or privileged syscalls."""

import ctypes
import errno as _errno
import json as _json
import os
import platform
import signal
import sys


def report(observed):
    """Print the one JSON line the parent reads."""
    sys.stdout.write(_json.dumps({"observed": str(observed)}) + "\n")  # noqa: TID251
    sys.stdout.flush()


def errname(e):
    return _errno.errorcode.get(e.errno or 0, f"errno{e.errno}")


libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
_ARCH = platform.machine()
_BPF = {"x86_64": 321, "aarch64": 280}.get(_ARCH, -1)


def _call(fn, *a):
    if fn(*a) == -1:
        e = ctypes.get_errno()
        return report(errname(OSError(e, os.strerror(e))))
    report("allowed")


def main(probe, *args):
    if probe == "pidns":
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        return report("isolated" if pids and pids[-1] < 100 else f"host-pids:{len(pids)}")
    if probe == "kill_init":
        try:
            os.kill(1, signal.SIGKILL)
        except OSError as e:
            return report(errname(e))
        return report("sent")
    if probe == "ptrace":
        return _call(libc.ptrace, 16, 1, None, None)  # PTRACE_ATTACH to pid 1
    if probe == "unshare_user":
        return _call(libc.unshare, 0x10000000)  # CLONE_NEWUSER
    if probe == "unshare_mount":
        return _call(libc.unshare, 0x00020000)  # CLONE_NEWNS
    if probe == "mount":
        return _call(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None)
    if probe == "clone3":
        return _call(libc.syscall, 435, None, 0)
    if probe == "bpf":
        return _call(libc.syscall, _BPF, 0, None, 0)
    if probe == "io_uring":
        return _call(libc.syscall, 425, 1, None)
    if probe == "tiocsti":
        c = ctypes.c_char(b"x")
        return _call(libc.ioctl, 0, 0x5412, ctypes.byref(c))
    if probe == "setuid_root":
        try:
            os.setuid(0)
        except OSError as e:
            return report(errname(e))
        return report("allowed")
    report(f"unknown probe {probe}")


if __name__ == "__main__":
    main(*sys.argv[1:])
