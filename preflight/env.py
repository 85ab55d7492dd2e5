"""Environment probes: the parent's secrets are nowhere the child can look."""

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
    return _errno.errorcode.get(e.errno or 0, f"errno{e.errno}")


ALLOWED = {"PATH", "HOME", "TMPDIR", "LANG", "PWD"}


def _files(top, limit):
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for f in files:
            if limit[0] <= 0:
                return
            limit[0] -= 1
            yield os.path.join(root, f)


def canary(marker):
    needle = marker.encode()
    for k, v in os.environ.items():
        if marker in k or marker in v:
            return "found:os.environ"
    places = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            places += [f"/proc/{pid}/environ", f"/proc/{pid}/cmdline"]
    limit = [5000]
    for top in ("/tmp", "/ect", "/dev/shm", "/run", "/etc", "/root", "/home", "/var"):
        places += list(_files(top, limit))
    for path in places:
        try:
            with open(path, "rb") as fh:
                if needle in fh.read(1 << 20):
                    return f"found:{path}"
        except OSError:
            continue
    return "absent"


def main(probe, *args):
    if probe == "canary":
        return report(canary(bytes.fromhex(args[0]).decode()))
    if probe == "minimal":
        extra = sorted(set(os.environ) - ALLOWED)
        return report("minimal" if not extra else "extra:" + ",".join(extra))
    if probe == "proc1_environ":
        try:
            with open("/proc/1/environ", "rb") as fh:
                return report("empty" if fh.read() == b"" else "nonempty")
        except OSError as e:
            return report(errname(e))
    report(f"unknown probe {probe}")


if __name__ == "__main__":
    main(*sys.argv[1:])
