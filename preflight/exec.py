"""Exec probes: programs run only from the read-only system binds (no memfd, no fd, no scratch)."""

import errno as _errno
import os
import sys


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
    return _errno.errorcode.get(e, f"errno{e}")


_EXECVEAT = {"x86_64": 322, "aarch64": 281}.get(os.uname().machine, -1)
_AT_EMPTY_PATH = 0x1000
_TRUE = "/usr/bin/true"


def _argv(ctypes, *args):
    arr = (ctypes.c_char_p * (len(args) + 1))(*[a.encode() for a in args], None)
    return arr


def _copy_true(dest):
    """A copy of ``_TRUE`` at ``dest``, executable."""
    with open(_TRUE, "rb") as src, open(dest, "wb") as out:
        out.write(src.read())
    os.chmod(dest, 0o755)


def main(probe, *args):
    if probe == "memfd":
        try:
            fd = os.memfd_create("ect-probe", 0)
        except OSError as e:
            return report(errname(e.errno))
        with open(_TRUE, "rb") as src:
            os.write(fd, src.read())
        os.execv(f"/proc/self/fd/{fd}", ["memfd"])  # a successful exec prints nothing
    if probe == "execveat":
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        fd = os.open(_TRUE, os.O_RDONLY)
        libc.syscall(_EXECVEAT, fd, b"", _argv(ctypes, "true"), _argv(ctypes), _AT_EMPTY_PATH)
        return report(errname(ctypes.get_errno()))
    if probe == "scratch":
        _copy_true("/tmp/ect-true")
        try:
            os.execv("/tmp/ect-true", ["ect-true"])
        except OSError as e:
            return report(errname(e.errno))
    if probe == "scratch_fd":
        _copy_true("/tmp/ect-true")
        fd = os.open("/tmp/ect-true", os.O_RDONLY)
        try:
            os.execv(f"/proc/self/fd/{fd}", ["ect-true"])
        except OSError as e:
            return report(errname(e.errno))
    if probe == "system_control":
        pid = os.fork()
        if pid == 0:
            os.execv(_TRUE, ["true"])
        return report("ran" if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 else "failed")
    report(f"unknown probe {probe}")


if __name__ == "__main__":
    main(*sys.argv[1:])
