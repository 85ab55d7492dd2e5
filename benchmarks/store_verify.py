"""Full verification of a 100,000-record store, beside the floor of reading every row and
sha256-hashing every body once (the baseline: no chain, no Merkle tree, no signatures).

    python benchmarks/store_verify.py [--records N]
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import statistics
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
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    sha = hashlib.sha256
    n = 0
    for (b,) in conn.execute("SELECT body FROM records ORDER BY seq"):
        sha(b).digest()
        n += 1
    conn.close()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
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
        ours, base = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            rep = verify_store(d / "big.db", full=True, public_key=key.public_key())
            ours.append(time.perf_counter() - t0)
            assert rep.ok and rep.records == args.records, rep.detail
            base.append(baseline(d / "big.db"))
            print(f"full verify {ours[-1]:.2f} s   read+sha256 floor {base[-1]:.2f} s")
        t0 = time.perf_counter()
        assert verify_store(d / "big.db").ok
        print(f"quick verify {time.perf_counter() - t0:.2f} s")
    o, b = statistics.median(ours), statistics.median(base)
    print(
        f"store_verify: {o:.2f} s full verification of {args.records} records (baseline {b:.2f} s read+sha256 only, target <= 3 s)"
    )


if __name__ == "__main__":
    main()
