"""Process probes: a private pid namespace, and no ptrace, unshare, mount or privileged syscalls."""

import errno as _errno
import os
import sys

_SIGKILL = 9  # (the signal module imports enum: a start every probe of this program pays)


def report(observed):
    """Print the one JSON line the parent reads, ``{"observed": "..."}``. Written without
    ``json``: importing it (it imports ``re`` and ``enum``) would cost more than the check."""
    sys.stdout.write('{"observed": ' + _quoted(str(observed)) + "}\n")
    sys.stdout.flush()


def _quoted(text):
    """``text`` as an ASCII JSON string (what ``json.dumps`` writes, escapes aside)."""
    out = []
    for c in text:
        n = ord(c)
        if 0x20 <= n < 0x7F and c not in '"\\':
            out.append(c)
        elif n > 0xFFFF:  # outside the BMP: a UTF-16 surrogate pair
            n -= 0x10000
            out.append(f"\\u{0xD800 | n >> 10:04x}\\u{0xDC00 | n & 0x3FF:04x}")
        else:
            out.append(f"\\u{n:04x}")
    return '"' + "".join(out) + '"'


def errname(e):
    return _errno.errorcode.get(e.errno or 0, f"errno{e.errno}")


_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine, -1)


def _call(name, *a):
    """Call libc's ``name`` through ctypes (imported by the probes that use it) and report."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    a = tuple(ctypes.byref(ctypes.c_char(b"x")) if x is _BYTE else x for x in a)
    if getattr(libc, name)(*a) == -1:
        e = ctypes.get_errno()
        return report(errname(OSError(e, os.strerror(e))))
    report("allowed")


_BYTE = object()  # stands for a pointer to one byte "x" (TIOCSTI's argument)


def main(probe, *args):
    if probe == "pidns":
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        return report("isolated" if pids and pids[-1] < 100 else f"host-pids:{len(pids)}")
    if probe == "kill_init":
        try:
            os.kill(1, _SIGKILL)
        except OSError as e:
            return report(errname(e))
        return report("sent")
    if probe == "ptrace":
        return _call("ptrace", 16, 1, None, None)  # PTRACE_ATTACH to pid 1
    if probe == "unshare_user":
        return _call("unshare", 0x10000000)  # CLONE_NEWUSER
    if probe == "unshare_mount":
        return _call("unshare", 0x00020000)  # CLONE_NEWNS
    if probe == "mount":
        return _call("mount", b"none", b"/tmp", b"tmpfs", 0, None)
    if probe == "clone3":
        return _call("syscall", 435, None, 0)
    if probe == "bpf":
        return _call("syscall", _BPF, 0, None, 0)
    if probe == "io_uring":
        return _call("syscall", 425, 1, None)
    if probe == "tiocsti":
        return _call("ioctl", 0, 0x5412, _BYTE)
    if probe == "setuid_root":
        try:
            os.setuid(0)
        except OSError as e:
            return report(errname(e))
        return report("allowed")
    report(f"unknown probe {probe}")


if __name__ == "__main__":
    main(*sys.argv[1:])
