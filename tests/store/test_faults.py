"""The store under faults a user can cause: a full disk, a read-only directory, a directory where
a file is expected, FIFOs and devices as inputs, a crash between creating a store and storing
the blobs its header names."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.canonical import canonical_bytes
from runner.store import (
    BlobCorrupt,
    KeyFileError,
    Store,
    generate_key,
    load_signing_key,
    verify_store,
)
from runner.store._keys import Ed25519PrivateKey
from tests.faults import ect, fill, listing, readonly_view, small_tmpfs

from .conftest import make_header

EXIT_NEGATIVE, EXIT_USAGE, EXIT_REFUSED, EXIT_RUNTIME = 1, 2, 3, 5


def files(directory: Path) -> dict[str, bytes]:
    """The directory's files without SQLite's -shm/-wal (a reader may create them; they hold no
    record the database file does not)."""
    return {k: v for k, v in listing(directory).items() if not k.endswith(("-shm", "-wal"))}


# --- keygen --------------------------------------------------------------------------------


def test_keygen_on_a_full_disk_leaves_no_empty_key() -> None:
    with small_tmpfs(64) as disk:
        fill(disk)
        res = ect("store", "keygen", str(disk / "k.key"))
        assert res.code == EXIT_RUNTIME, res.err
        assert "No space left on device" in res.one_line_error()
        assert listing(disk) == {}
        with pytest.raises(OSError):
            generate_key(disk / "k2.key")
        assert listing(disk) == {}


def test_keygen_into_a_read_only_directory_or_onto_a_directory(tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    with readonly_view(d) as ro:
        res = ect("store", "keygen", str(ro / "k.key"))
        assert res.code == EXIT_USAGE, res.err
        assert "Read-only file system" in res.one_line_error()
    (tmp_path / "adir").mkdir()
    res = ect("store", "keygen", str(tmp_path / "adir"))
    assert res.code == EXIT_USAGE, res.err
    res.one_line_error()
    res = ect("store", "keygen", str(tmp_path / ("x" * 300)))
    assert res.code == EXIT_USAGE, res.err
    assert "File name too long" in res.one_line_error()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "ro"]


def test_an_empty_key_file_is_named_as_such(tmp_path: Path) -> None:
    empty = tmp_path / "empty.key"
    empty.touch(mode=0o600)
    with pytest.raises(KeyFileError, match="is empty"):
        load_signing_key(empty)


# --- salvage -------------------------------------------------------------------------------


@pytest.fixture
def sealed(new_store: Callable[..., Store]) -> Path:
    s = new_store("run.db", n=12)
    s.put_blob(b"x" * 20_000)
    s.checkpoint()
    s.close()
    return s.path


def test_salvage_onto_a_full_disk_is_a_runtime_failure_leaving_nothing(sealed: Path) -> None:
    before = files(sealed.parent)
    with small_tmpfs(64) as disk:
        fill(disk)
        res = ect("store", "salvage", str(sealed), str(disk / "new.db"))
        assert res.code == EXIT_RUNTIME, (res.out, res.err)
        res.one_line_error()
        assert listing(disk) == {}
    assert files(sealed.parent) == before


def test_salvage_into_a_read_only_directory_and_onto_a_directory(sealed: Path,
                                                                  tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    with readonly_view(d) as ro:
        res = ect("store", "salvage", str(sealed), str(ro / "new.db"))
        assert res.code == EXIT_USAGE, (res.out, res.err)
        res.one_line_error()
    res = ect("store", "salvage", str(sealed), str(d))  # NEW is an existing directory
    assert res.code == EXIT_USAGE, (res.out, res.err)
    res.one_line_error()
    assert listing(d) == {}


# --- verify inputs that are not regular files ----------------------------------------------


def test_checkpoint_and_key_inputs_that_are_devices_or_fifos_are_refused(sealed: Path,
                                                                        tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for opt in ("--checkpoint", "--public-key"):
        for src in ("/dev/zero", str(fifo)):
            res = ect("store", "verify", str(sealed), opt, src, timeout=30)
            assert res.code == EXIT_USAGE, (opt, src, res.out, res.err)
            assert "regular file" in res.one_line_error()
    # A FIFO with a writer that never stops writing is still never read.
    stop = threading.Event()

    def writer() -> None:
        with open(fifo, "wb") as f:
            while not stop.is_set():
                try:
                    f.write(b"{" * 65536)
                except BrokenPipeError:
                    return

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    res = ect("store", "verify", str(sealed), "--checkpoint", str(fifo), timeout=30)
    stop.set()
    assert res.code == EXIT_USAGE, res.err


def test_an_oversized_checkpoint_file_is_damage_not_a_crash(sealed: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.checkpoint"
    big.write_bytes(b" " * (1 << 20))
    report = verify_store(sealed, checkpoint=big)
    assert not report.ok and report.damage == "signature"


# --- the header's blobs --------------------------------------------------------------------


def test_header_blobs_are_committed_with_the_header(tmp_path: Path,
                                                    key: Ed25519PrivateKey) -> None:
    lock, pre = canonical_bytes({"lock": 1}), canonical_bytes({"preflight": 1})
    import hashlib

    header = make_header(lock_blob="sha256:" + hashlib.sha256(lock).hexdigest(),
                         preflight_blob="sha256:" + hashlib.sha256(pre).hexdigest())
    seen: list[int] = []

    def hook(point: str) -> None:
        # The first durability boundary after the header exists: the blobs are already there.
        if point == "checkpoint.mid_file" and not seen:
            conn = sqlite3.connect(f"file:{tmp_path / 'h.db'}?mode=ro", uri=True)
            seen.append(conn.execute("SELECT count(*) FROM blobs").fetchone()[0])
            conn.close()

    with Store.create(tmp_path / "h.db", header=header, signing_key=key, hook=hook,
                      blobs=(lock, pre)) as s:
        assert s.get_blob(header["lock_blob"]) == lock
        assert s.get_blob(header["preflight_blob"]) == pre
    assert seen == [2]
    assert verify_store(tmp_path / "h.db", full=True).ok


def test_full_verification_finds_a_header_blob_that_is_missing(tmp_path: Path,
                                                                key: Ed25519PrivateKey) -> None:
    # What a SIGKILL between creating the store and storing its blobs used to leave behind.
    header = make_header(lock_blob="sha256:" + "ab" * 32)
    Store.create(tmp_path / "w.db", header=header, signing_key=key).close()
    assert verify_store(tmp_path / "w.db").ok  # quick verification does not read blobs
    report = verify_store(tmp_path / "w.db", full=True)
    assert not report.ok and report.damage == "blob" and report.first_bad_seq == 0
    assert "lock_blob" in report.detail
    assert isinstance(report.error, BlobCorrupt)
    res = ect("store", "verify", "--full", str(tmp_path / "w.db"))
    assert res.code == EXIT_NEGATIVE and "DAMAGED (blob)" in res.out
