"""Benchmark: ``ect verify`` on the worst hostile input the size cap admits.

The certificate is the hierarchy example with one claim citing one receipt 1.67 million times:
16,700,553 bytes, just under the 16 MiB cap of each ``ect verify`` input (docs/formats.md,
"Bounds"). Each side runs in a fresh child process and reports wall time and peak memory
(``ru_maxrss`` of the child):

* ours: ``python -m runner verify`` on the hostile certificate (reasons capped at 16 per code
  and slot, output a few KB);
* baseline: the floor every verifier pays for that file -- a child that only reads it and
  ``json.loads`` it.

Target: the hostile input is verified within 10 s (the bound docs/formats.md states is about
5 s on the development machine). Headline last: ``verify_hostile: <s> s (baseline <s> s,
target 10 s)``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "examples" / "hierarchy"


def _child(argv: list[str]) -> tuple[float, float, int, int]:
    """(wall s, peak MB, stdout bytes, exit code) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024, len(res.stdout), res.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--smoke", action="store_true",
                    help="10,000 citations instead of 1,670,000: checks that the benchmark runs, "
                    "measures nothing")
    args = ap.parse_args()
    cites = 10_000 if args.smoke else 1_670_000
    cert = json.loads((EXAMPLE / "certificate.json").read_bytes())
    cert["claims"][0]["evidence"] = ["r-0001"] * cites
    with tempfile.TemporaryDirectory(prefix="ect-bench-") as tmp:
        path = Path(tmp) / "hostile.json"
        path.write_text(json.dumps(cert))  # noqa: TID251 - benchmark input, not hashed
        size = path.stat().st_size
        baseline = _child([sys.executable, "-c",
                           "import json,sys; json.loads(open(sys.argv[1],'rb').read())",
                           str(path)])
        ours = _child([sys.executable, "-m", "runner", "verify", "--contract",
                       str(EXAMPLE / "contract.json"), "--ledger", str(EXAMPLE / "ledger.json"),
                       "--certificate", str(path)])
    if ours[3] not in (0, 1):  # 0 complete, 1 continue: a verdict either way
        raise SystemExit(f"ect verify exited {ours[3]} on the hostile certificate")
    print(f"hostile certificate: {size} bytes, one receipt cited {cites:,} times")
    print(f"ect verify     : {ours[0]:.2f} s, peak {ours[1]:.0f} MB (children so far), "
          f"stdout {ours[2]} bytes, exit {ours[3]}")
    print(f"json.loads only: {baseline[0]:.2f} s, peak {baseline[1]:.0f} MB")
    print("(wall times on a shared machine; the peak is the largest child so far)")
    print(f"verify_hostile: {ours[0]:.2f} s (baseline {baseline[0]:.2f} s, target 10 s)")


if __name__ == "__main__":
    main()
