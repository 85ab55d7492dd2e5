"""Kernel-surface probes: the seccomp allow-list's default, argument filters, identity, knobs, keys."""

import ctypes
import errno as _errno
import json as _json
import os
import platform
import socket
import sys


def report(observed):
    """Print the one JSON line the parent reads."""
    sys.stdout.write(_json.dumps({"observed": str(observed)}) + "\n")  # noqa: TID251
    sys.stdout.flush()


def errname(e):
    return _errno.errorcode.get(e, f"errno{e}")


libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
_ARCH = platform.machine()
_X86 = _ARCH == "x86_64"
_buf = ctypes.create_string_buffer(4096)
_ctx = ctypes.c_ulong(0)

# Syscalls not on the allow-list, each with harmless arguments that would succeed (or fail with
# another errno) without the filter: the default action must answer EPERM for every one.
_UNLISTED = [
    ("name_to_handle_at", 303 if _X86 else 264, (-100, b"/", _buf, ctypes.byref(ctypes.c_int()), 0)),
    ("set_mempolicy", 238 if _X86 else 237, (0, None, 0)),
    ("move_pages", 279 if _X86 else 239, (0, 0, None, None, None, 0)),
    ("io_setup", 206 if _X86 else 0, (1, ctypes.byref(_ctx))),
    ("inotify_init1", 294 if _X86 else 26, (0,)),
    ("fanotify_init", 300 if _X86 else 262, (0, 0)),
    ("memfd_secret", 447, (0,)),
    ("open_tree_attr", 467, (-1, b"", 0, None, 0)),
    ("keyctl_get_keyring_id", 250 if _X86 else 219, (0, -3, 0)),
    ("number_1000", 1000, ()),
]
if _X86:
    _UNLISTED.append(("modify_ldt", 154, (0, _buf, 16)))


def _families():
    return [(n, getattr(socket, n, v)) for n, v in (("AF_INET", 2), ("AF_INET6", 10),
            ("AF_NETLINK", 16), ("AF_PACKET", 17), ("AF_TIPC", 30), ("AF_ALG", 38),
            ("AF_VSOCK", 40), ("AF_XDP", 44))]  # fmt: skip


def main(probe, *args):
    if probe == "unlisted":
        for name, nr, a in _UNLISTED:
            if libc.syscall(nr, *a) != -1 or ctypes.get_errno() != _errno.EPERM:
                return report(f"{name}:{errname(ctypes.get_errno())}")
        return report("EPERM")
    if probe == "socketpair":
        for name, fam in _families():
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
                try:
                    a, b = socket.socketpair(fam, kind)
                    a.close()
                    b.close()
                    return report(f"{name}:created")
                except OSError as e:
                    if e.errno != _errno.EAFNOSUPPORT:
                        return report(f"{name}:{errname(e.errno)}")
        return report("EAFNOSUPPORT")
    if probe == "socketpair_unix":
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        a.sendall(b"x")
        return report("ok" if b.recv(1) == b"x" else "mismatch")
    if probe == "personality":
        libc.personality.restype = ctypes.c_int
        if libc.personality(0x0040000) != -1:  # ADDR_NO_RANDOMIZE
            return report("changed")
        return report(errname(ctypes.get_errno()))
    if probe == "personality_query":
        libc.personality.restype = ctypes.c_int
        return report("ok" if libc.personality(0xFFFFFFFF) == 0 else "flags-set")
    if probe == "host_uid":
        uid = os.getuid()
        host = None
        with open("/proc/self/uid_map") as fh:
            for line in fh:
                inside, outside, count = (int(x) for x in line.split())
                if inside <= uid < inside + count:
                    host = outside + (uid - inside)
        caps = ""
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(("CapEff:", "CapPrm:", "CapBnd:")):
                    caps += line.split()[1].strip("0")
        if host is None:
            return report("unmapped")
        initial = open("/proc/self/uid_map").read().split() == ["0", "0", "4294967295"]
        if args and args[0] == "0" and not initial:
            # a user namespace made by a root parent is owned by host root: its per-user
            # counts (inotify instances, user namespaces, ...) are charged to root's
            return report("userns-owned-by-root")
        if host == 0 or os.geteuid() == 0 or caps:
            return report(f"host-uid-{host}-caps-{caps or 0}")
        return report("unprivileged")
    if probe == "proc_sys":
        for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
                     "/proc/sysrq-trigger"):  # fmt: skip
            if not os.path.exists(path):
                continue
            try:
                with open(path, "w") as fh:
                    fh.write("|/tmp/x" if "core" in path else "0")
                return report(f"{path}:written")
            except OSError as e:
                if e.errno != _errno.EROFS:
                    return report(f"{path}:{errname(e.errno)}")
        return report("EROFS")
    if probe == "keys":
        needle = bytes.fromhex(args[0]).decode()
        try:
            with open("/proc/keys") as fh:
                text = fh.read()
        except OSError as e:
            return report(errname(e.errno))
        if needle in text:
            return report("parent-key-listed")
        foreign = [ln for ln in text.splitlines() if ln.split()[5] == "0"]
        return report(f"root-keys:{len(foreign)}" if foreign else "own-only")
    report(f"unknown probe {probe}")


if __name__ == "__main__":
    main(*sys.argv[1:])
