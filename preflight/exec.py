"""Exec probes: programs run only from the read-only system binds (no memfd, no fd, no scratch)."""

import ctypes
import errno as _errno
import json as _json
import os
import platform
import shutil
import sys


def report(observed):
    """Print the one JSON line the parent reads."""
    sys.stdout.write(_json.dumps({"observed": str(observed)}) + "\n")  # noqa: TID251
    sys.stdout.flush()


def errname(e):
    return _errno.errorcode.get(e, f"errno{e}")


libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
_EXECVEAT = {"x86_64": 322, "aarch64": 281}.get(platform.machine(), -1)
_AT_EMPTY_PATH = 0x1000
_TRUE = "/usr/bin/true"


def _argv(*args):
    arr = (ctypes.c_char_p * (len(args) + 1))(*[a.encode() for a in args], None)
    return arr


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
        fd = os.open(_TRUE, os.O_RDONLY)
        libc.syscall(_EXECVEAT, fd, b"", _argv("true"), _argv(), _AT_EMPTY_PATH)
        return report(errname(ctypes.get_errno()))
    if probe == "scratch":
        shutil.copy(_TRUE, "/tmp/ect-true")
        os.chmod("/tmp/ect-true", 0o755)
        try:
            os.execv("/tmp/ect-true", ["ect-true"])
        except OSError as e:
            return report(errname(e.errno))
    if probe == "scratch_fd":
        shutil.copy(_TRUE, "/tmp/ect-true")
        os.chmod("/tmp/ect-true", 0o755)
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
