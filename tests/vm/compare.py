"""Compare the `make test-vm` guest's results with this host's own sandbox probe.

Reads the guest's results (tests/vm/guest.py), runs `ect sandbox probe --json` here, writes
both with the accelerator used to ``<out-dir>/results-<guest kernel>.json``, and prints, per
case: the identity and cgroup it ran in, the kernel's Landlock ABI, the layers and bounds the
sandbox recorded, every probe that did not pass (or "all N passed"), the over-limit calls, the
preflight and the demo. Exit 1 when, in any case, a probe, the preflight or the demo failed or a
sandbox process or cgroup was left behind; 0 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ECT = Path(sys.executable).with_name("ect")


def _layers(probe: dict[str, Any] | None) -> dict[str, Any]:
    if not probe:
        return {}
    backend = probe.get("backend", {})
    layers = backend.get("layers", {})
    return {"landlock_abi": backend.get("landlock_abi"), "cgroups": layers.get("cgroups"),
            "bounds": layers.get("bounds"), "host_uid": layers.get("host_uid"),
            "uid_map": backend.get("landlock_applied", {}).get("uid_map")}


def _failed(probe: dict[str, Any] | None) -> list[str]:
    if not probe:
        return ["(no probe result)"]
    return [f"{p['name']}: expected {p['expected']}, observed {p['observed']}"
            for p in probe.get("probes", []) if not p.get("passed")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--guest", type=Path, required=True)
    ap.add_argument("--accel", default="unknown")
    ap.add_argument("--out-dir", type=Path, required=True)
    args = ap.parse_args()
    guest = json.loads(args.guest.read_text("utf-8"))
    host_run = subprocess.run([str(ECT), "sandbox", "probe", "--json"], capture_output=True,
                              text=True, check=False)
    host = json.loads(host_run.stdout) if host_run.stdout.strip() else None
    facts = guest["facts"]
    out = args.out_dir / f"results-{facts['kernel']}.json"
    record = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "accelerator": args.accel, "guest": guest,
              "host": {"kernel": subprocess.run(["uname", "-r"], capture_output=True, text=True,
                                                check=False).stdout.strip(),
                       "probe": host}}
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", "utf-8")  # noqa: TID251

    bad = 0
    print(f"guest: {facts['os']}, kernel {facts['kernel']}, cgroup {facts['cgroup']} "
          f"({' '.join(facts['cgroup_controllers'])}), {facts['bwrap']}, Python "
          f"{facts['python']}, accelerator {args.accel}")
    print(f"host:  kernel {record['host']['kernel']}, {_layers(host)}; "
          f"{len(host['probes']) if host else 0} probes, failed: {_failed(host) or 'none'}")
    for name, case in guest["cases"].items():
        probe = case["probe"]["result"]
        failed = _failed(probe)
        n = len(probe["probes"]) if probe else 0
        print(f"\n[{name}] {case['what']}")
        print(f"  identity: {' '.join(case['identity'].split())}")
        print(f"  layers:   {_layers(probe)}")
        print(f"  probes:   exit {case['probe']['rc']} in {case['probe']['wall_s']} s; "
              + (f"all {n} passed" if not failed else f"{len(failed)} of {n} failed: {failed}"))
        for k in ("memory_over_limit", "cpu_over_limit"):
            c = case[k]
            print(f"  {k}: {c.get('result') or ('exit ' + str(c['rc']) + ': ' + c['stderr'].strip()[-160:])}")
        pre = case["preflight"]
        print(f"  preflight: exit {pre['rc']} in {pre['wall_s']} s"
              + (f": {pre['stderr'].strip()[-300:]}" if pre["rc"] != 0 else ""))
        demo = case["demo"]
        print(f"  demo --limit 24: exit {demo['rc']} in {demo['wall_s']} s"
              + (f": {demo['stderr'].strip()[-300:]}" if demo["rc"] != 0 else ""))
        left = [x for x in case.get("left_behind", []) if x.strip()]
        print(f"  left behind after the case: {left or 'nothing'}")
        bad += bool(failed) + (case["probe"]["rc"] != 0) + (pre["rc"] != 0) + \
            (demo["rc"] != 0) + bool(left)
    print(f"\nresults: {out}")
    print(f"test-vm: {'FAILED' if bad else 'passed'} ({len(guest['cases'])} cases, "
          f"kernel {facts['kernel']}, {args.accel})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
