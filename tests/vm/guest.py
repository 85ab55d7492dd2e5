"""Runs inside the `make test-vm` guest (Debian 12, its stock kernel, cgroup v2), as root, from
the one-shot unit `ect-vm-test.service`; stdlib only, run by the guest's own /usr/bin/python3.

For each way a user starts the runner (below) it records: the identity and cgroup it started
in, `ect sandbox probe --json`, a memory and a CPU over-limit call through the sandbox backend,
`ect preflight --json` and `ect demo --limit 24`. The results go to /root/ect-vm-results.json,
which the host reads out of the disk image after the guest powers off (tests/vm/run.sh), and
progress goes to the console. Nothing here judges a result: the host compares.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ECT = "/opt/ect/bin/ect"
PYTHON = "/opt/ect/bin/python"

# Over-limit calls through the backend the tools use, with limits a slow (emulated) guest can
# tell apart: a generous CPU budget, so only the limit under test can end the call.
OVER_LIMIT_CALL = """
import json, sys
from runner.sandbox import Limits, select_backend
limits = Limits(**json.loads(sys.argv[1]))
r = select_backend().run(["/usr/bin/python3", "-c", sys.argv[2]], stdin=b"", limits=limits)
print(json.dumps({"kill_reason": r.kill_reason, "exit_status": r.exit_status,
                  "term_signal": r.term_signal, "wall_s": round(r.wall_s, 2)}))
"""
OVER_LIMIT: list[tuple[str, dict[str, int | float], str]] = [
    ("memory_over_limit", {"memory_bytes": 64 << 20, "cpu_s": 120, "wall_s": 300},
     "x = bytearray(160 * 2**20); print(len(x))"),
    ("cpu_over_limit", {"cpu_s": 3, "wall_s": 300}, "while True: pass"),
]
RESULTS = Path("/root/ect-vm-results.json")
USER, UID = "ect", 1000

# (name, how the commands are started, what it stands for)
CASES: list[tuple[str, list[str], str]] = [
    ("user-plain", ["runuser", "-u", USER, "--"],
     "a normal user (uid 1000) with no delegated cgroup (runuser from a root service)"),
    ("user-session", ["systemd-run", "--quiet", "--wait", "--pipe", "--collect",
                      f"--machine={USER}@", "--user", "--property=Delegate=yes", "--"],
     "a normal user (uid 1000) in their login session's systemd-delegated cgroup"),
    ("root-service", ["systemd-run", "--quiet", "--wait", "--pipe", "--collect",
                      "--property=Type=exec", "--"],
     "root in a service-like leaf cgroup (a systemd unit, as a scheduler or CI agent starts it)"),
    ("root", ["sh", "-c", 'echo $$ > /sys/fs/cgroup/cgroup.procs && exec "$@"', "sh"],
     "root in the root cgroup, as a shell on a host or in a VM started by hand"),
]


def say(msg: str) -> None:
    line = f"[ect-vm {time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    try:
        with open("/dev/console", "w") as c:
            c.write(line + "\n")
    except OSError:
        pass


def run(prefix: list[str], argv: list[str], cwd: str, timeout: float) -> dict[str, object]:
    """Run ``argv`` under ``prefix`` in ``cwd``; exit code, wall time, the tails of its output."""
    env = {"PATH": "/opt/ect/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "HOME": cwd}
    cmd = [*prefix, "env", f"HOME={cwd}", "sh", "-c", 'cd "$1" && shift && exec "$@"', "sh",
           cwd, *argv]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           check=False)
        rc: int | str = p.returncode
        out, err = p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    return {"argv": argv, "rc": rc, "wall_s": round(time.monotonic() - t0, 1),
            "stdout": out, "stderr": err[-4000:]}


def as_json(result: dict[str, object]) -> object:
    try:
        return json.loads(str(result["stdout"]))
    except ValueError:
        return None


def one_case(name: str, prefix: list[str]) -> dict[str, object]:
    home = "/root" if name.startswith("root") else f"/home/{USER}"
    cwd = f"{home}/{name}"
    os.makedirs(cwd, exist_ok=True)
    if not name.startswith("root"):
        shutil.chown(cwd, USER, USER)
    out: dict[str, object] = {}
    who = run(prefix, ["sh", "-c", "id -u; cat /proc/self/cgroup"], cwd, 120)
    out["identity"] = who["stdout"]
    say(f"{name}: {str(who['stdout']).split()}")
    probe = run(prefix, [ECT, "sandbox", "probe", "--json"], cwd, 1800)
    out["probe"] = {"rc": probe["rc"], "wall_s": probe["wall_s"], "stderr": probe["stderr"],
                    "result": as_json(probe)}
    say(f"{name}: sandbox probe exit {probe['rc']} in {probe['wall_s']} s")
    for key, limits, code in OVER_LIMIT:
        r = run(prefix, [PYTHON, "-c", OVER_LIMIT_CALL, json.dumps(limits), code], cwd, 900)  # noqa: TID251
        out[key] = {"rc": r["rc"], "wall_s": r["wall_s"], "stderr": r["stderr"],
                    "result": as_json(r)}
        say(f"{name}: {key}: exit {r['rc']}: {str(r['stdout']).strip()[-160:]}"
            f"{str(r['stderr']).strip()[-160:]}")
    pre = run(prefix, [ECT, "preflight", "--store", f"{cwd}/pre.db", "--json"], cwd, 1800)
    out["preflight"] = {"rc": pre["rc"], "wall_s": pre["wall_s"], "stderr": pre["stderr"],
                        "result": as_json(pre)}
    say(f"{name}: preflight exit {pre['rc']} in {pre['wall_s']} s")
    demo = run(prefix, [ECT, "demo", "--limit", "24"], cwd, 3600)
    out["demo"] = {"rc": demo["rc"], "wall_s": demo["wall_s"],
                   "stdout_tail": str(demo["stdout"])[-3000:], "stderr": demo["stderr"]}
    say(f"{name}: demo --limit 24 exit {demo['rc']} in {demo['wall_s']} s")
    left = run([], ["sh", "-c", "ps -eo pid,ppid,user,comm | grep -E 'bwrap|ect-worker' "
                    "| grep -v grep; find /sys/fs/cgroup -name 'ect-sandbox-*' -type d"],
               "/root", 60)
    out["left_behind"] = str(left["stdout"]).split("\n") if left["stdout"] else []
    return out


def main() -> int:
    facts: dict[str, object] = {
        "kernel": platform.release(),
        "os": Path("/etc/os-release").read_text().split("PRETTY_NAME=")[1].split("\n")[0],
        "python": sys.version.split()[0],
        "cgroup": "v2" if Path("/sys/fs/cgroup/cgroup.controllers").exists() else "v1",
        "cgroup_controllers": Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
        if Path("/sys/fs/cgroup/cgroup.controllers").exists() else [],
        "bwrap": subprocess.run(["bwrap", "--version"], capture_output=True, text=True,
                                check=False).stdout.strip(),
        "unprivileged_userns_clone": Path("/proc/sys/kernel/unprivileged_userns_clone")
        .read_text().strip() if Path("/proc/sys/kernel/unprivileged_userns_clone").exists()
        else None,
        "cpus": os.cpu_count(),
    }
    lsm = Path("/sys/kernel/security/lsm")
    facts["lsm"] = lsm.read_text().strip() if lsm.exists() else None
    say(f"guest: {facts}")
    results: dict[str, object] = {"facts": facts, "cases": {}}
    chosen = Path("/opt/ect-vm/cases")  # ECT_VM_CASES on the host, written there by run.sh
    only = [c for c in chosen.read_text().strip().split(",") if c] if chosen.exists() else []
    for name, prefix, what in CASES:
        if only and name not in only:
            continue
        say(f"case {name}: {what}")
        case = {"what": what, **one_case(name, prefix)}
        results["cases"][name] = case  # type: ignore[index]
        RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True))  # noqa: TID251
        os.sync()  # a run stopped early still leaves the cases done so far in the image
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
