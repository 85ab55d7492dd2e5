"""Persistent-write probes: nothing outside the scratch /tmp can be created or changed."""

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


def _target(probe, args):
    return {"root": "/", "usr": "/usr", "prefix": sys.base_prefix,
            "snapshot": args[0] if args else "/", "snapshot_replace": os.path.dirname(args[0])
            if args else "/"}.get(probe)


def main(probe, *args):
    """A refused write reports EROFS when the target's mount is read-only, whichever check the
    kernel made first: under a root parent the sandbox's uid owns nothing, so DAC (EACCES) can
    refuse before the read-only mount would; the guarantee measured is the read-only mount."""
    try:
        if probe == "root":
            open("/ect-probe", "wb").close()
        elif probe == "usr":
            open("/usr/ect-probe", "wb").close()
        elif probe == "prefix":
            open(os.path.join(sys.base_prefix, "ect-probe"), "wb").close()
        elif probe == "snapshot":
            with open(args[0], "r+b") as fh:
                fh.write(b"{}")
        elif probe == "snapshot_replace":
            open(args[0] + ".new", "wb").close()
        elif probe == "tmp_control":
            with open("/tmp/ect-probe", "wb") as fh:
                fh.write(b"scratch")
            with open("/tmp/ect-probe", "rb") as fh:
                return report("ok" if fh.read() == b"scratch" else "mismatch")
        elif probe == "tmp_full":
            i = 0
            while True:
                with open(f"/tmp/fill{i}", "wb") as fh:
                    for _ in range(8):
                        fh.write(b"\0" * (1 << 20))
                i += 1
        else:
            return report(f"unknown probe {probe}")
    except OSError as e:
        target = _target(probe, args)
        if target is not None and os.statvfs(target).f_flag & os.ST_RDONLY:
            return report("EROFS")
        return report(errname(e))
    report("written")


if __name__ == "__main__":
    main(*sys.argv[1:])
