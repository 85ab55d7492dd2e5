"""Two writers on one store are serialised (BEGIN IMMEDIATE + busy timeout) or refused with
StoreBusy; their records never interleave inside a transaction or break the chain."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from runner.store import Store, StoreBusy, verify_store

from .conftest import WRITER, cell_body, raw

N = 60


def test_two_writer_processes_are_serialised(new_store: Callable[..., Store]) -> None:
    s = new_store(n=0)
    s.close()
    procs = [
        subprocess.Popen(
            [sys.executable, str(WRITER), "burst", str(s.path), tag, str(N)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("A", "B")
    ]
    for p in procs:  # both import first, then start together
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = {}
    for tag, p in zip(("A", "B"), procs, strict=True):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs[tag] = [tuple(map(int, line.split())) for line in out.splitlines()]
    seqs_a = [seq for seq, _ in outs["A"]]
    seqs_b = [seq for seq, _ in outs["B"]]
    assert len(seqs_a) == len(seqs_b) == N
    assert not set(seqs_a) & set(seqs_b)
    assert sorted(seqs_a + seqs_b) == list(range(1, 2 * N + 1))
    rep = verify_store(s.path, full=True)
    assert rep.ok and rep.records == 2 * N + 1
    with Store.open(s.path) as st:
        by_seq = {r.seq: r.body for r in st.records()}
    for tag in ("A", "B"):
        for seq, i in outs[tag]:
            assert by_seq[seq]["tag"] == tag and by_seq[seq]["i"] == i
        # each writer's own records appear in its own order
        assert [by_seq[seq]["i"] for seq, _ in outs[tag]] == list(range(N))


def test_writer_refused_when_lock_held_past_busy_timeout(new_store: Callable[..., Store]) -> None:
    s = new_store(n=2)
    s.close()
    holder = raw(s.path)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Store.open(s.path, busy_timeout_s=0.05) as st:
            with pytest.raises(StoreBusy):
                st.append(cell_body(9))
            with pytest.raises(StoreBusy):
                st.attempt_begin({"cell_id": "x"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store.open(s.path) as st:
        assert st.count == 3  # the refused append left nothing
        assert st.append(cell_body(9)) == 3
