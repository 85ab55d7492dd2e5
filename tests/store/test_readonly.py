"""Verifying and reading a store on read-only media (an archive, a mounted dataset, a CI cache).

Each test puts a real store behind a read-only bind mount (root gets EROFS there too), then runs
the shipped CLI against it: every read command must work and verification must not raise a
false alarm.
"""

from __future__ import annotations

import shutil
import sqlite3
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.store import Store, StoreUnavailable, verify_store
from tests.faults import ect, listing, readonly_view


@pytest.fixture
def sealed_dir(new_store: Callable[..., Store], tmp_path: Path) -> Path:
    """A directory holding a closed 9-record store, its checkpoint and nothing else."""
    s = new_store("run.db", n=9)
    s.put_blob(b"a blob")
    s.attempt_begin({"cell_id": "c001"})
    s.checkpoint()
    s.close()
    d = tmp_path / "archive"
    d.mkdir()
    for p in (s.path, Path(str(s.path) + ".checkpoint")):
        shutil.copy2(p, d / p.name)
    return d


@pytest.mark.parametrize("full", [False, True])
def test_verify_on_a_read_only_mount(sealed_dir: Path, full: bool) -> None:
    before = listing(sealed_dir)
    with readonly_view(sealed_dir) as ro:
        res = ect("store", "verify", str(ro / "run.db"), *(["--full"] if full else []))
        assert res.code == 0, (res.out, res.err)
        assert "intact: 10 records, 1 attempt-journal entries (" + ("full" if full else "quick") in res.out
        report = verify_store(ro / "run.db", full=full)
        assert report.ok and report.records == 10
    assert listing(sealed_dir) == before  # nothing written, not even -shm


def test_show_and_proof_on_a_read_only_mount(sealed_dir: Path) -> None:
    with readonly_view(sealed_dir) as ro:
        res = ect("store", "show", str(ro / "run.db"), "--json")
        assert res.code == 0, res.err
        assert '"records":10' in res.out
        res = ect("store", "show", str(ro / "run.db"), "--seq", "3")
        assert res.code == 0 and "seq: 3" in res.out, res.err
        res = ect("store", "proof", str(ro / "run.db"), "--seq", "4")
        assert res.code == 0 and "tree_size: 10" in res.out, res.err


def test_read_only_open_refuses_writes(sealed_dir: Path) -> None:
    with readonly_view(sealed_dir) as ro, Store.open(ro / "run.db", readonly=True) as s:
        assert s.count == 10
        with pytest.raises(StoreUnavailable):
            s.append({"x": 1})


def test_verify_an_extracted_read_only_tarball(sealed_dir: Path, tmp_path: Path) -> None:
    tarball = tmp_path / "run.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(sealed_dir, arcname="run")
    out = tmp_path / "extracted"
    out.mkdir()
    with tarfile.open(tarball) as tar:
        # extraction filters arrived in 3.11.4; Debian 12's python3 is 3.11.2 (the archive is
        # the test's own, so the unfiltered extraction is safe there)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(out, filter="data")
        else:
            tar.extractall(out)
    for p in (out / "run").iterdir():
        p.chmod(0o444)
    (out / "run").chmod(0o555)
    with readonly_view(out / "run") as ro:
        res = ect("store", "verify", "--full", str(ro / "run.db"))
        assert res.code == 0, (res.out, res.err)
        assert "DAMAGED" not in res.out


def test_uncheckpointed_wal_on_read_only_media_is_refused_naming_the_fix(
    new_store: Callable[..., Store], tmp_path: Path
) -> None:
    s = new_store("live.db", n=3)
    s.checkpoint()
    # A second connection keeps the WAL from being folded in when the store closes: the copy
    # is what an archive of a running store looks like (records only in live.db-wal).
    hold = sqlite3.connect(s.path)
    hold.execute("SELECT count(*) FROM records").fetchone()
    hold.execute("PRAGMA wal_autocheckpoint = 0")
    s.close()
    d = tmp_path / "copy"
    d.mkdir()
    for suffix in ("", "-wal", ".checkpoint"):
        shutil.copy2(str(s.path) + suffix, d / ("live.db" + suffix))
    hold.close()
    assert (d / "live.db-wal").stat().st_size > 0
    with readonly_view(d) as ro:
        res = ect("store", "verify", str(ro / "live.db"))
        assert res.code == 2, (res.out, res.err)
        line = res.one_line_error()
        assert "-wal" in line and "copy the store and its -wal" in line
        assert "DAMAGED" not in res.out
    # ... and the fix it names works: a writable copy verifies.
    res = ect("store", "verify", str(d / "live.db"))
    assert res.code == 0, (res.out, res.err)
