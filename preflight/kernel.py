"""Kernel-surface probes: the seccomp allow-list's default, argument filters and the kernel's
pass-through, identity, capabilities, knobs, keys, host facts, and the exactness of the record.

Each probe imports what it uses (``ctypes``, ``socket``, ...) when it runs: a probe program's
start is paid by every probe that runs it."""

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


_X86 = os.uname().machine == "x86_64"


def _libc():
    """ctypes and libc, for the probes that make a raw call."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return ctypes, libc


def _unlisted(ctypes):
    """Syscalls not on the allow-list, each with harmless arguments that would succeed (or fail
    with another errno) without the filter: the default action must answer EPERM for every one."""
    buf = ctypes.create_string_buffer(4096)
    ctx = ctypes.c_ulong(0)
    table = [
        ("name_to_handle_at", 303 if _X86 else 264,
         (-100, b"/", buf, ctypes.byref(ctypes.c_int()), 0)),
        ("set_mempolicy", 238 if _X86 else 237, (0, None, 0)),
        ("move_pages", 279 if _X86 else 239, (0, 0, None, None, None, 0)),
        ("io_setup", 206 if _X86 else 0, (1, ctypes.byref(ctx))),
        ("inotify_init1", 294 if _X86 else 26, (0,)),
        ("fanotify_init", 300 if _X86 else 262, (0, 0)),
        ("memfd_secret", 447, (0,)),
        ("open_tree_attr", 467, (-1, b"", 0, None, 0)),
        ("keyctl_get_keyring_id", 250 if _X86 else 219, (0, -3, 0)),
        ("number_1000", 1000, ()),
    ]  # fmt: skip
    if _X86:
        table.append(("modify_ldt", 154, (0, buf, 16)))
    return table, (buf, ctx)


def _families(socket):
    return [(n, getattr(socket, n, v)) for n, v in (("AF_INET", 2), ("AF_INET6", 10),
            ("AF_NETLINK", 16), ("AF_PACKET", 17), ("AF_TIPC", 30), ("AF_ALG", 38),
            ("AF_VSOCK", 40), ("AF_XDP", 44))]  # fmt: skip


def main(probe, *args):
    if probe == "unlisted":
        ctypes, libc = _libc()
        table, _held = _unlisted(ctypes)  # the buffers stay alive while the calls use them
        for name, nr, a in table:
            if libc.syscall(nr, *a) != -1 or ctypes.get_errno() != _errno.EPERM:
                return report(f"{name}:{errname(ctypes.get_errno())}")
        return report("EPERM")
    if probe == "socketpair":
        import socket

        for name, fam in _families(socket):
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
        import socket

        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        a.sendall(b"x")
        return report("ok" if b.recv(1) == b"x" else "mismatch")
    if probe == "personality":
        ctypes, libc = _libc()
        libc.personality.restype = ctypes.c_int
        if libc.personality(0x0040000) != -1:  # ADDR_NO_RANDOMIZE
            return report("changed")
        return report(errname(ctypes.get_errno()))
    if probe == "personality_query":
        ctypes, libc = _libc()
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
    if probe == "keyctl_named":
        # a named session keyring persists, is charged to the uid's key quota (filling it made
        # every concurrent call fail) and is listed in /proc/keys to everything of that uid
        ctypes, libc = _libc()
        r = libc.syscall(250 if _X86 else 219, 1, b"ect-probe-" + b"k" * 200)
        return report("joined" if r >= 0 else errname(ctypes.get_errno()))
    if probe == "capabilities":
        held = []
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(("CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:")):
                    name, value = line.split()
                    if int(value, 16):
                        held.append(f"{name}{int(value, 16):x}")
        return report(",".join(held) if held else "none")
    if probe == "mountinfo":
        # the 4th field is the mounted path within its filesystem: a bind of a host file shows
        # the host path there, unless it equals (or ends) the mount point, as /usr or /proc/sys do
        for line in open("/proc/self/mountinfo").read().splitlines():
            fields = line.split()
            root, point = fields[3], fields[4]
            if root == "/" or point.endswith(root) or root.startswith(("/bindfile", "/newroot")):
                continue
            return report(f"host-path-at:{point}")
        return report("none")
    if probe == "cgroup_names":
        parent = args[0]
        for line in open("/proc/self/cgroup").read().splitlines():
            path = line.split(":", 2)[2]
            if any(parent in part.split("-") for part in path.split("/")):
                return report("runner-pid")
        return report("anonymous")
    if probe == "boot_id":
        import hashlib
        import re

        try:
            text = open("/proc/sys/kernel/random/boot_id").read().strip()
        except OSError as e:
            return report(errname(e.errno))
        if hashlib.sha256(text.encode()).hexdigest() == args[0]:
            return report("host")
        return report("per-call" if re.fullmatch(r"[0-9a-f-]{36}", text) else "malformed")
    if probe == "key_users":
        try:
            text = open("/proc/key-users").read()
        except OSError as e:
            return report(errname(e.errno))
        lines = text.strip().splitlines()
        return report(f"listed:{len(lines)}" if lines else "masked")
    if probe == "passthrough":
        if not _X86:
            return report("EPERM")  # no such syscalls here: the filter's default answers
        ctypes, libc = _libc()
        seen = []
        if libc.syscall(336) == -1 and ctypes.get_errno() == _errno.EPERM:
            seen.append("EPERM")
        pid = os.fork()
        if pid == 0:
            libc.syscall(335)
            os._exit(0 if ctypes.get_errno() == _errno.EPERM else 3)
        status = os.waitpid(pid, 0)[1]
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            seen.append("EPERM")
        return report("EPERM" if seen == ["EPERM", "EPERM"] else "passthrough")
    if probe == "record_rlimits":
        import json
        import resource

        claimed = json.loads(bytes.fromhex(args[0]))
        table = {"cpu_s": resource.RLIMIT_CPU, "address_space_bytes": resource.RLIMIT_AS,
                 "file_size_bytes": resource.RLIMIT_FSIZE, "nproc": resource.RLIMIT_NPROC,
                 "nofile": resource.RLIMIT_NOFILE}  # fmt: skip
        # the soft limit in force must be the one the record's call was given (RLIMIT_CPU's
        # hard limit is one second above it)
        over = [k for k in sorted(claimed) if resource.getrlimit(table[k])[0] != claimed[k]]
        return report("overstated:" + ",".join(over) if over else "exact")
    if probe == "per_call_uid":
        host = None
        with open("/proc/self/uid_map") as fh:
            for line in fh:
                inside, outside, count = (int(x) for x in line.split())
                if inside <= os.getuid() < inside + count:
                    host = outside + (os.getuid() - inside)
        return report("shared-uid" if str(host) == args[0] else "own-uid")
    if probe == "hold":  # the sibling call of per_call_uid: alive until the parent kills it
        import time

        time.sleep(60)
        return report("held")
    report(f"unknown probe {probe}")


if __name__ == "__main__":
    main(*sys.argv[1:])
