"""One scenario of `make test-vm` (tests/vm/run.sh): the sandbox as this process's user and cgroup
get it, written as one JSON file. Runs inside the Debian 12 guest (as root, as root in a
service's leaf cgroup, as a normal user, as a user with a delegated cgroup) and on this host for
comparison.

Records: the kernel, the Landlock ABI, the cgroup this process is in, every layer the backend
recorded, every probe's result, a memory and a CPU over-limit call (their kill reasons),
`ect preflight` and `ect demo --limit 24` (exit code, last line, wall time), and any per-call
cgroup left behind afterwards.

Usage: python tests/vm/collect.py LABEL OUT.json   (cwd: the project checkout)
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from runner.canonical import canonical_bytes, loads_strict  # noqa: E402

TOUCH = "b = bytearray({n} << 20); b[::4096] = b'x' * len(b[::4096]); print(len(b))"
SPIN = "while True: pass"


def _cli(args: list[str], timeout: float) -> dict[str, Any]:
    t = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "runner", *args], cwd=REPO, capture_output=True,
                           timeout=timeout)  # fmt: skip
        code, out, err = r.returncode, r.stdout.decode(), r.stderr.decode()
    except subprocess.TimeoutExpired:
        code, out, err = None, "", f"timed out after {timeout} s"
    lines = err.strip().splitlines() or out.strip().splitlines()
    return {"exit": code, "last_line": lines[-1][:400] if lines else "",
            "wall_s": round(time.monotonic() - t, 1), "stdout": out}


def _left_groups(mine: str | None) -> list[str]:
    """Per-call groups under any cgroup mount, but this process's own (pooled until it exits)."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] in ("cgroup", "cgroup2"):
            for d in Path(parts[1]).rglob("ect-sandbox-*"):
                if d.is_dir() and not (mine and d.name.startswith(f"ect-sandbox-{mine}-")):
                    found.append(str(d))
    return sorted(found)


def main() -> None:
    label, out = sys.argv[1], Path(sys.argv[2])
    from runner.sandbox import BwrapBackend, Limits
    from runner.sandbox._linux import landlock_abi

    res: dict[str, Any] = {
        "label": label, "kernel": platform.release(), "euid": os.geteuid(),
        "cgroup": Path("/proc/self/cgroup").read_text().strip().splitlines(),
        "landlock_abi": landlock_abi(),
        "bwrap": subprocess.run(["bwrap", "--version"], capture_output=True,
                                text=True).stdout.strip(),
    }  # fmt: skip
    try:
        be = BwrapBackend()
    except Exception as e:  # recorded: the scenario could not start a sandbox at all
        res["backend_error"] = f"{type(e).__name__}: {e}"
        out.write_bytes(canonical_bytes(res))
        return
    res["layers"] = be.layers()
    mine = be.cgroups.owner if be.cgroups is not None else None
    py = str(be.python)
    mem = be.run([py, "-I", "-S", "-c", TOUCH.format(n=160)], stdin=b"",
                 limits=Limits(memory_bytes=64 << 20, wall_s=120.0))  # fmt: skip
    cpu = be.run([py, "-I", "-S", "-c", SPIN], stdin=b"", limits=Limits(cpu_s=1, wall_s=120.0))
    res["over_memory"] = {"exit": mem.exit_status, "signal": mem.term_signal,
                          "kill_reason": mem.kill_reason,
                          "stderr": mem.stderr.decode("utf-8", "replace")[-200:]}  # fmt: skip
    res["over_cpu"] = {"exit": cpu.exit_status, "signal": cpu.term_signal,
                       "kill_reason": cpu.kill_reason, "cpu_s": round(cpu.cpu_s, 2)}
    be.close()
    with tempfile.TemporaryDirectory(prefix="ect-vm-") as tmp:
        os.chmod(tmp, 0o755)
        # every probe, as preflight runs them (its JSON report holds each probe's check)
        res["preflight"] = _cli(["preflight", "--store", f"{tmp}/absent.db", "--json"], 1800)
        try:
            report = loads_strict(res["preflight"].pop("stdout").encode())
            res["probes"] = {c["name"][len("probe."):]: {"passed": c["ok"], "detail": c["detail"]}
                             for c in report["checks"] if c["name"].startswith("probe.")}
            res["preflight"]["passed"] = report["passed"]
        except Exception as e:  # recorded: no report
            res["probes"] = {"(no report)": {"passed": False, "detail": repr(e)[:300]}}
        res["demo"] = _cli(["demo", "--limit", "24", "--quiet", "--out", f"{tmp}/demo"], 3600)
        res["demo"].pop("stdout")
    time.sleep(2.0)
    res["cgroups_left"] = _left_groups(mine)
    out.write_bytes(canonical_bytes(res))


if __name__ == "__main__":
    main()
