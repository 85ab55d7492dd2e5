"""Store append rate vs plain SQLite inserts of the same bytes under the same pragmas.

Like for like: both sides commit one transaction per record (BEGIN IMMEDIATE, INSERT, COMMIT)
on the same filesystem, WAL with synchronous=FULL and trusted_schema=OFF, into the same STRICT
table shape. Ours also canonicalizes the body (RFC 8785), hashes the leaf, reads the head inside
the transaction and hashes the chain link; the baseline inserts the finished bytes. The two
sides alternate in small chunks so both see the same machine load. A first pass on tmpfs (where
fsync costs nothing) shows our CPU cost alone; the headline is the real filesystem.

    python benchmarks/store_append.py [--records N] [--chunk C]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

from runner.canonical import digest
from runner.store import Store, generate_key


def body(i: int) -> dict[str, object]:
    row = {"row": i, "cell_id": f"cell-{i:05d}", "task_id": f"t{i % 24}", "seed": i % 3}
    result = {"outcome": {"stop_reason": "goal_met", "turns": i % 9, "tool_calls": i % 7}}
    return {
        "row": i,
        "cell_id": row["cell_id"],
        "schedule_row": row,
        "schedule_row_digest": digest("ect/schedule-row/v1", row),
        "result": result,
        "result_digest": digest("ect/value/v1", result),
        "audit": {"attempts": [i]},
        "audit_digest": digest("ect/value/v1", {"attempts": [i]}),
        "artifacts": {"trajectory": digest("ect/value/v1", i)},
        "code_version": "bench",
    }


def _plain_conn(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA trusted_schema = OFF")
    assert conn.execute("PRAGMA journal_mode = wal").fetchone()[0] == "wal"
    conn.execute("PRAGMA synchronous = FULL")
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    conn.execute(
        "CREATE TABLE records (seq INTEGER PRIMARY KEY, body BLOB NOT NULL, "
        "leaf BLOB NOT NULL, chain BLOB NOT NULL) STRICT"
    )
    return conn


def run(
    directory: Path, key: object, bodies: list[dict[str, object]], chunk: int
) -> tuple[float, float]:
    """Append ``bodies`` to a store and insert the same rows into a plain table, alternating
    in chunks so both sides see the same machine load. Returns (ours/s, plain/s)."""
    header = {"lock_digest": digest("ect/lock/v1", 0), "preflight_digest": digest("ect/lock/v1", 0)}
    store = Store.create(directory / "ours.db", header=header, signing_key=key)  # type: ignore[arg-type]
    plain = _plain_conn(directory / "plain.db")
    t_ours = t_plain = 0.0
    for lo in range(0, len(bodies), chunk):
        part = bodies[lo : lo + chunk]
        t0 = time.perf_counter()
        for b in part:
            store.append(b)
        t_ours += time.perf_counter() - t0
        rows = store._conn.execute(
            "SELECT seq, body, leaf, chain FROM records WHERE seq > ? ORDER BY seq", (lo,)
        ).fetchall()
        t0 = time.perf_counter()
        for row in rows:
            plain.execute("BEGIN IMMEDIATE")
            plain.execute("INSERT INTO records (seq, body, leaf, chain) VALUES (?, ?, ?, ?)", row)
            plain.execute("COMMIT")
        t_plain += time.perf_counter() - t0
    store.close()
    plain.close()
    return len(bodies) / t_ours, len(bodies) / t_plain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=800)
    ap.add_argument("--chunk", type=int, default=20)
    ap.add_argument("--smoke", action="store_true",
                    help="40 records: checks that the benchmark runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.records = 40
    bodies = [body(i) for i in range(args.records)]
    here = Path(__file__).resolve().parent.parent / "stores"
    with tempfile.TemporaryDirectory(dir=here if here.is_dir() else None) as tmp:
        key = generate_key(Path(tmp) / "bench.key")
        shm = Path("/dev/shm")
        if shm.is_dir():  # fsync is free on tmpfs: this isolates our CPU cost per append
            with tempfile.TemporaryDirectory(dir=shm) as mem:
                o, p = run(Path(mem), key, bodies, args.chunk)
                print(
                    f"tmpfs (no fsync cost): ours {o:.0f} appends/s, plain {p:.0f} inserts/s, ratio {o / p:.2f}"
                )
        o, p = run(Path(tmp), key, bodies, args.chunk)
    print(
        f"disk: ours {o:.0f} appends/s, plain {p:.0f} inserts/s ({args.records} records each, one COMMIT per record, alternating chunks of {args.chunk})"
    )
    print(
        f"store_append: {o / p:.2f} x plain SQLite rate (baseline {p:.0f} inserts/s, ours {o:.0f} appends/s, target >= 0.8 x)"
    )


if __name__ == "__main__":
    main()
