"""Crash safety: SIGKILL at every durability boundary, and kill -9 at random moments."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.canonical import loads_strict
from runner.store import (
    Store,
    checkpoint_path,
    export_manifest,
    verify_manifest,
    verify_store,
)
from runner.store._keys import Ed25519PrivateKey

from .conftest import WRITER, cell_body, cell_of, manifest_cell, run_writer


def _ext_size(path: Path) -> int:
    return int(loads_strict(checkpoint_path(path).read_bytes())["checkpoint"]["size"])


def _db_cp_size(path: Path) -> int:
    with Store.open(path) as s:
        latest = s.latest_checkpoint()
    assert latest is not None
    return int(latest["checkpoint"]["size"])


# point -> (operation, records added, external checkpoint advanced, stored checkpoint advanced)
CRASH_POINTS = {
    "append.before_begin": ("append", 0, False, False),
    "append.after_insert": ("append", 0, False, False),
    "append.after_commit": ("append", 1, False, False),
    "checkpoint.mid_file": ("checkpoint", 0, False, False),
    "checkpoint.after_rename": ("checkpoint", 0, True, False),
    "checkpoint.after_commit": ("checkpoint", 0, True, True),
}


@pytest.mark.parametrize(
    ("point", "journal"),
    [(p, "wal") for p in sorted(CRASH_POINTS)]
    + [("append.after_insert", "rollback"), ("append.after_commit", "rollback")],
)
def test_crash_at_boundary(
    point: str,
    journal: str,
    new_store: Callable[..., Store],
    key: Ed25519PrivateKey,
    key_path: Path,
) -> None:
    op, added, ext_moves, db_moves = CRASH_POINTS[point]
    s = new_store(n=5, journal=journal)
    s.checkpoint()
    s.append(cell_body(5))  # one record beyond the checkpoint, so a new one differs
    s.close()
    path = s.path
    before_ext = checkpoint_path(path).read_bytes()
    proc = run_writer("crash", str(path), str(key_path), point, op)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # After the crash the store verifies as it stands; the acknowledged state is intact.
    rep = verify_store(path, full=True)
    assert rep.ok, rep.detail
    assert rep.records == 7 + added
    assert (checkpoint_path(path).read_bytes() != before_ext) == ext_moves
    assert (_db_cp_size(path) == 7) == db_moves
    if ext_moves:
        assert _ext_size(path) == 7
    # ... and it continues: append and checkpoint again, and still verifies.
    with Store.open(path, signing_key=key) as again:
        seq = again.append(cell_body(50))
        assert seq == 7 + added
        again.checkpoint()
    assert verify_store(path, full=True).ok


@pytest.mark.parametrize("point", ["manifest.mid_file", "manifest.after_rename"])
def test_crash_mid_manifest(
    point: str,
    new_store: Callable[..., Store],
    key: Ed25519PrivateKey,
    key_path: Path,
    tmp_path: Path,
) -> None:
    s = new_store(n=4)
    s.close()
    out = tmp_path / "manifest.json"
    proc = run_writer("crash", str(s.path), str(key_path), point, "manifest", str(out))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert verify_store(s.path, full=True).ok
    if point == "manifest.mid_file":
        assert not out.exists()  # never a half-written manifest
    else:
        verify_manifest(out, s.path, tmp_path / "signing.key.pub", cell_of)
    # Exporting again works and verifies.
    with Store.open(s.path, signing_key=key) as again:
        export_manifest(again, [manifest_cell(i) for i in range(4)], out)
    verify_manifest(out, s.path, tmp_path / "signing.key.pub", cell_of)


KILLS = 100


def test_kill_minus_nine_at_random_moments(
    new_store: Callable[..., Store], key: Ed25519PrivateKey, key_path: Path, tmp_path: Path
) -> None:
    """A writer process appends continuously (acknowledging each seq after COMMIT) and is
    SIGKILLed after a random short delay, KILLS times. Writers are forked from one server
    process that imported the store once, so each kill costs milliseconds, not an interpreter
    start. After every kill: every acknowledged record is present with the acknowledged body,
    the store verifies, and the next writer continues the chain."""
    s = new_store(n=0)
    s.close()
    path = s.path
    acks = tmp_path / "acks"
    acks.mkdir()
    server = subprocess.Popen(
        [sys.executable, str(WRITER), "forkserver", str(path), str(key_path), str(acks)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None

    def ask(line: str) -> int:
        server.stdin.write(line + "\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        return int(server.stdout.readline())  # type: ignore[union-attr]

    rng = random.Random(9162)
    acked: dict[int, tuple[str, int]] = {}
    try:
        for k in range(KILLS):
            tag = f"w{k}"
            ack_file = acks / f"{tag}.acks"
            pid = ask(f"fork {tag}")
            if k % 2:  # odd kills land only once the writer is appending; even ones anywhere
                deadline = time.monotonic() + 60
                while not (ack_file.exists() and ack_file.stat().st_size):
                    assert time.monotonic() < deadline, "writer never acknowledged an append"
                    time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.05))
            os.kill(pid, signal.SIGKILL)
            status = ask(f"reap {pid}")
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
            text = ack_file.read_text() if ack_file.exists() else ""
            for line in text.splitlines(keepends=True):
                if line.endswith("\n"):  # a line cut by the kill was never an acknowledgement
                    seq, i = line.split()
                    assert int(seq) not in acked
                    acked[int(seq)] = (tag, int(i))
            rep = verify_store(path)
            assert rep.ok, f"after kill {k}: {rep.detail}"
            assert rep.records - 1 >= len(acked)
    finally:
        server.stdin.write("quit\n")
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
    with Store.open(path, signing_key=key) as store:
        got = {r.seq: (r.body["tag"], r.body["i"]) for r in store.records()}
        for seq, want in acked.items():
            assert got.get(seq) == want, f"acknowledged record {seq} lost or changed"
        final = store.append(cell_body(0))
        assert final == store.count - 1
        store.checkpoint()
    assert len(acked) >= KILLS // 2  # every odd-numbered writer acknowledged at least one
    rep = verify_store(path, full=True)
    assert rep.ok, rep.detail
