"""Print what each scenario of `make test-vm` recorded, beside this host's (tests/vm/run.sh).

Usage: python tests/vm/compare.py RESULTS_DIR. Exit 1 when a guest scenario is missing, could
not start a sandbox, failed a probe or preflight, or did not complete the demo.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ORDER = ("root", "root-service", "user", "user-delegated", "host")
LAYER_KEYS = ("landlock_abi", "cgroups", "cgroup_controllers", "host_uid", "nested_user_namespace",
              "uid_map", "uid_map_host", "missing_guarantees")


def describe(r: dict[str, Any]) -> list[str]:
    out = [f"kernel {r['kernel']}, Landlock ABI {r['landlock_abi']}, {r.get('bwrap', '?')}, "
           f"euid {r['euid']}, cgroup {r['cgroup'][-1] if r['cgroup'] else '?'}"]
    if "backend_error" in r:
        return [*out, f"NO SANDBOX: {r['backend_error']}"]
    layers = r["layers"]
    out.append("layers: " + ", ".join(f"{k}={layers.get(k)!r}" for k in LAYER_KEYS))
    for k, v in (layers.get("bounds") or {}).items():
        out.append(f"  bound {k}: {v}")
    probes = r.get("probes", {})
    failed = {k: v for k, v in probes.items() if not v["passed"]}
    out.append(f"probes: {len(probes) - len(failed)}/{len(probes)} passed")
    out += [f"  FAILED {k}: {v['detail']}" for k, v in sorted(failed.items())]
    for k in ("over_memory", "over_cpu"):
        out.append(f"{k}: kill_reason={r[k]['kill_reason']!r} exit={r[k]['exit']!r} "
                   f"signal={r[k]['signal']!r}")
    pf, demo = r["preflight"], r["demo"]
    out.append(f"ect preflight: exit {pf['exit']} passed={pf.get('passed')} ({pf['wall_s']} s)")
    out.append(f"ect demo --limit 24: exit {demo['exit']} ({demo['wall_s']} s) {demo['last_line']}")
    out.append(f"per-call cgroups left afterwards: {len(r['cgroups_left'])}")
    return out


def ok(r: dict[str, Any]) -> bool:
    return ("backend_error" not in r and all(v["passed"] for v in r.get("probes", {}).values())
            and bool(r.get("probes")) and r["preflight"].get("passed") is True
            and r["demo"]["exit"] == 0)


def main() -> None:
    d = Path(sys.argv[1])
    found = {p.stem: json.loads(p.read_text()) for p in d.glob("*.json")}
    accel = (d / "accelerator").read_text().strip() if (d / "accelerator").exists() else "?"
    print(f"== make test-vm results ({d}; guest accelerator: {accel})")
    bad = []
    for label in [*ORDER, *sorted(set(found) - set(ORDER))]:
        r = found.get(label)
        print(f"\n-- {label}")
        if r is None:
            print("MISSING (see the scenario's .log and the console log)")
            if label != "host":
                bad.append(label)
            continue
        print("\n".join(describe(r)))
        if label != "host" and not ok(r):
            bad.append(label)
    host = found.get("host")
    if host and "layers" in host:
        print("\n-- layers that differ from this host's")
        for label in ORDER[:-1]:
            r = found.get(label)
            if r and "layers" in r:
                diff = [k for k in LAYER_KEYS if r["layers"].get(k) != host["layers"].get(k)]
                print(f"{label}: " + (", ".join(f"{k} {r['layers'].get(k)!r} (host "
                                                f"{host['layers'].get(k)!r})" for k in diff)
                                      or "none"))
    print(f"\nverdict: {'every guest scenario passed' if not bad else 'FAILED: ' + ', '.join(bad)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
