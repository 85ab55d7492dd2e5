"""Network probes: every socket family but AF_UNIX is refused; no name resolution; no loopback."""

import errno as _errno
import socket
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


def main(probe, *args):
    try:
        if probe == "inet":
            socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        elif probe == "inet6":
            socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        elif probe == "netlink":
            socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
        elif probe == "udp":
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        elif probe == "loopback":
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect(("127.0.0.1", int(args[0])))
            return report("connected")
        elif probe == "dns":
            try:
                socket.getaddrinfo("example.com", 443)
            except socket.gaierror as e:
                names = {getattr(socket, n): n for n in dir(socket) if n.startswith("EAI_")}
                return report(names.get(e.errno, f"gai{e.errno}"))
            return report("resolved")
        else:
            return report(f"unknown probe {probe}")
    except OSError as e:
        return report(errname(e))
    report("allowed")


if __name__ == "__main__":
    main(*sys.argv[1:])
