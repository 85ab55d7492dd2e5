"""Limit probes: CPU, memory, file size, processes, open files, output, wall clock, orphans."""

import errno as _errno
import os
import sys
import time


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
    if probe == "start":
        # only starts and reports: the parent measures the CPU a start of this program costs
        return report("started")
    if probe == "cpu":
        print("started", flush=True)  # the parent's sign that the start did not use the budget
        while True:
            pass
    if probe == "memory":
        try:
            block = bytearray(2 << 30)
        except MemoryError:
            return report("MemoryError")
        return report(f"allocated {len(block)}")
    if probe == "memory_tree":
        # several children, each well under RLIMIT_AS, together over the call's memory limit: each
        # touches its block (args: how many children, how many MiB each), says so on its own
        # pipe, and holds the block until every child has touched its block or died (no fixed
        # wait: a slow machine only takes longer)
        go_r, go_w = os.pipe()
        kids, said = [], []
        mib = int(args[1]) if len(args) > 1 else 96
        for _ in range(int(args[0]) if args else 4):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(go_w)
                os.close(r)
                block = b"\x01" * (mib << 20)  # touched, not just reserved
                os.write(w, b"1")
                os.read(go_r, 1)  # until the parent lets go (end of file)
                os._exit(0 if block else 1)
            os.close(w)
            kids.append(pid)
            said.append(r)
        for r in said:
            os.read(r, 1)  # b"1": touched; b"": the child died first
            os.close(r)
        os.close(go_w)
        codes = [os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids]
        return report("oom-killed" if -9 in codes else "completed")
    if probe == "cpu_tree":
        # several processes spinning, each under RLIMIT_CPU, together past the call's cpu_s
        print("started", flush=True)  # the parent's sign that the start did not use the budget
        kids = []
        for _ in range(int(args[0]) if args else 4):
            pid = os.fork()
            if pid == 0:
                while True:
                    pass
            kids.append(pid)
        for k in kids:
            os.waitpid(k, 0)
        return report("completed")
    if probe == "fsize":
        try:
            with open("/tmp/big", "wb") as fh:
                for _ in range(64):
                    fh.write(b"\0" * (1 << 20))
        except OSError as e:
            return report(errname(e))
        return report("written")
    if probe == "nproc":
        n = 0
        try:
            for _ in range(4096):
                pid = os.fork()
                if pid == 0:
                    time.sleep(3)
                    os._exit(0)
                n += 1
        except OSError as e:
            return report(errname(e))
        return report(f"forked {n}")
    if probe == "nofile":
        fds = []
        try:
            for _ in range(100000):
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            return report(errname(e))
        return report(f"opened {len(fds)}")
    if probe == "flood":
        chunk = b"x" * 65536
        while True:
            os.write(1, chunk)
    if probe == "sleep":
        time.sleep(3600)
        return report("woke")
    if probe == "orphan":
        marker = args[0]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                os.close(r)
                os.close(w)
                os.execv(sys.executable, [sys.executable, "-I", "-S", "-c",
                                          "import time; time.sleep(120)", marker])  # fmt: skip
            os.write(w, b"1")
            os._exit(0)
        os.waitpid(pid, 0)
        os.close(w)
        return report("spawned" if os.read(r, 1) == b"1" else "spawn-failed")
    report(f"unknown probe {probe}")


if __name__ == "__main__":
    main(*sys.argv[1:])
