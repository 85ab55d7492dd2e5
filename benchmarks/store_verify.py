"""Full verification of a 100,000-record store, beside the floor of reading every row and
sha256-hashing every body once (the baseline: no chain, no Merkle tree, no signatures).

Also printed, to show what the ratio is made of: the same floor over the columns full
verification must read (body, leaf, chain) with the three sha256 calls per record it must make
(the body's leaf, the chain link, about one Merkle node) and no checks at all; and SQLite's
integrity_check alone. Every sha256 call costs about a microsecond whatever its size (OpenSSL's
per-call setup), so three calls per record cannot fit in twice the time of one.

``--before DIR`` also times full verification by another checkout of the package (say the
original code) on the same store, in the same rounds, in a child process (the timing excludes
its start-up).

    python benchmarks/store_verify.py [--records N] [--rounds N] [--before DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runner.canonical import digest
from runner.store import Store, generate_key, verify_store


def body(i: int) -> dict[str, object]:
    return {
        "row": i,
        "cell_id": f"cell-{i:06d}",
        "schedule_row": {"row": i, "cell_id": f"cell-{i:06d}", "seed": i % 3},
        "result": {"outcome": {"stop_reason": "goal_met", "turns": i % 9}},
        "result_digest": "sha256:" + hashlib.sha256(str(i).encode()).hexdigest(),
        "audit_digest": "sha256:" + hashlib.sha256(str(-i).encode()).hexdigest(),
        "code_version": "bench",
    }


def baseline(path: Path) -> float:
    t0 = time.perf_counter()
    c0 = time.process_time()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    sha = hashlib.sha256
    n = 0
    for (b,) in conn.execute("SELECT body FROM records ORDER BY seq"):
        sha(b).digest()
        n += 1
    conn.close()
    CPU.append(time.process_time() - c0)
    return time.perf_counter() - t0


def hash_floor(path: Path) -> float:
    """Read body, leaf and chain of every record and make full verification's three sha256
    calls per record (leaf of the body, chain link, one Merkle node), without any check."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    sha = hashlib.sha256
    prefix = b"\x02" + bytes(16)
    for seq, body, leaf, chain in conn.execute(
        "SELECT seq, body, leaf, chain FROM records ORDER BY seq"
    ):
        sha(b"\x00" + body).digest()
        sha(prefix + seq.to_bytes(8, "big") + chain + leaf).digest()
        sha(b"\x01" + leaf + chain).digest()
    conn.close()
    return time.perf_counter() - t0


def integrity(path: Path) -> float:
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    return time.perf_counter() - t0


CPU: list[float] = []  # CPU seconds of each read+sha256 floor run (see baseline)

_BEFORE = """
import sys, time
from runner.store import load_public_key, verify_store
key = load_public_key(sys.argv[2])
t0, c0 = time.perf_counter(), time.process_time()
rep = verify_store(sys.argv[1], full=True, public_key=key)
dt, dc = time.perf_counter() - t0, time.process_time() - c0
assert rep.ok, rep.detail
print(dt, dc)
"""


def before(checkout: Path, store: Path, pub: Path) -> tuple[float, float]:
    """Wall and CPU seconds of full verification by the package at ``checkout`` (timed by the
    child itself: its start-up and imports are not counted)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", _BEFORE, str(store), str(pub)], cwd=checkout,
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    return float(out[-2]), float(out[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", type=Path, default=None, metavar="DIR",
                    help="also time full verification by a checkout of the package at DIR")
    ap.add_argument("--smoke", action="store_true",
                    help="2,000 records, 1 round: checks that the benchmark runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.records, args.rounds = 2_000, 1
    here = Path(__file__).resolve().parent.parent / "stores"
    with tempfile.TemporaryDirectory(dir=here if here.is_dir() else None) as tmp:
        d = Path(tmp)
        key = generate_key(d / "bench.key")
        header = {
            "lock_digest": digest("ect/lock/v1", 1),
            "preflight_digest": digest("ect/lock/v1", 2),
        }
        t0 = time.perf_counter()
        with Store.create(d / "big.db", header=header, signing_key=key) as store:
            for start in range(0, args.records - 1, 5000):  # record 0 is the header
                store.append_batch(
                    [body(i) for i in range(start, min(start + 5000, args.records - 1))]
                )
                if start % 20_000 == 0:
                    store.checkpoint()  # a realistic run checkpoints as it goes
            for i in range(20):
                a = store.attempt_begin({"cell_id": f"cell-{i:06d}"})
                store.attempt_end(a, {"status": 200})
            store.checkpoint()
            assert store.count == args.records
        print(f"built {args.records} records in {time.perf_counter() - t0:.1f} s")
        ours, base, floor3, integ, cpu = [], [], [], [], []
        old: list[tuple[float, float]] = []
        for _ in range(args.rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            rep = verify_store(d / "big.db", full=True, public_key=key.public_key())
            ours.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            assert rep.ok and rep.records == args.records, rep.detail
            base.append(baseline(d / "big.db"))
            floor3.append(hash_floor(d / "big.db"))
            integ.append(integrity(d / "big.db"))
            line = (f"full verify {ours[-1]:.2f} s   read+sha256 floor {base[-1]:.2f} s   "
                    f"3 sha256/record floor {floor3[-1]:.2f} s   integrity_check {integ[-1]:.2f} s")
            if args.before is not None:
                old.append(before(args.before.resolve(), d / "big.db", d / "bench.key.pub"))
                line += f"   before: full verify {old[-1][0]:.2f} s"
            print(line)
            line = f"  CPU time: full verify {cpu[-1]:.2f} s   read+sha256 floor {CPU[-1]:.2f} s"
            if old:
                line += f"   before: full verify {old[-1][1]:.2f} s"
            print(line)
        t0 = time.perf_counter()
        assert verify_store(d / "big.db").ok
        print(f"quick verify {time.perf_counter() - t0:.2f} s")
    o, b = statistics.median(ours), statistics.median(base)
    f3, ic = statistics.median(floor3), statistics.median(integ)
    print(f"medians: 3 sha256/record floor {f3:.2f} s ({f3 / b:.2f}x the floor) + integrity_check "
          f"{ic:.2f} s = {(f3 + ic) / b:.2f}x the floor before any check is made")
    oc, bc = statistics.median(cpu), statistics.median(CPU)
    cpu_line = f"medians of CPU time: full verify {oc:.2f} s, floor {bc:.2f} s: {oc / bc:.2f}x"
    if old:
        was_c = statistics.median(c for _, c in old)
        cpu_line += f"; before: {was_c:.2f} s, {was_c / bc:.2f}x"
    print(cpu_line)
    was = f", before {statistics.median(w for w, _ in old) / b:.2f}x" if old else ""
    print(
        f"store_verify: {o:.2f} s full verification of {args.records} records (baseline {b:.2f} s read+sha256 only, ratio {o / b:.2f}x{was}, target <= 2x)"
    )


if __name__ == "__main__":
    main()
