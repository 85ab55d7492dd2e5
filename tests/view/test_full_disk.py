"""Output writers clean up after themselves on a full disk (issue 39, finding 2): the ENOSPC
line says "nothing half-written was kept", yet ``ect view --bundle`` onto a full disk left
``<dir>.tmp-bundle`` (46 files) and ``ect static --out`` left report.html, results.json and
tables.md without decisions.jsonl. Each output is now written to temp siblings and renamed into
place only when whole; a failure removes them.

The disks are small tmpfs mounts (root only; skipped with that reason elsewhere) with room for
part of the output, so the failure comes in the middle of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import ect, small_tmpfs


def _left(disk: Path) -> list[str]:
    return sorted(str(p.relative_to(disk)) for p in disk.rglob("*") if p.name != ".filler")


def test_a_bundle_onto_a_disk_too_small_leaves_nothing(store: Path) -> None:
    with small_tmpfs(384) as disk:
        res = ect("view", "--store", str(store), "--bundle", str(disk / "bundle"), "-q")
        assert res.code == 5, res.err
        assert "No space left on device" in res.one_line_error()
        assert _left(disk) == []


def test_static_onto_a_disk_too_small_leaves_no_partial_output() -> None:
    # room for report.html, results.json and tables.md (~150 KB), not decisions.jsonl (~3 MB)
    with small_tmpfs(1024) as disk:
        res = ect("static", "--out", str(disk / "out"), "-q", timeout=300)
        assert res.code == 5, res.err
        assert "No space left on device" in res.one_line_error()
        assert _left(disk) in ([], ["out"]), _left(disk)


def test_several_files_are_written_all_or_none() -> None:
    """The writer of `ect report`, `ect static` and `ect sweep` outputs: on a disk that holds
    the first file but not the second, neither replaces what was there."""
    from runner.canonical import atomic_write_all

    with small_tmpfs(256) as disk:
        old = disk / "a.txt"
        old.write_bytes(b"old\n")
        with pytest.raises(OSError) as info:
            atomic_write_all({old: b"new\n", disk / "b.bin": b"\0" * (1 << 20)})
        assert info.value.filename == str(disk / "b.bin")
        assert _left(disk) == ["a.txt"] and old.read_bytes() == b"old\n"
        atomic_write_all({old: b"new\n", disk / "c.txt": b"c\n"})
        assert _left(disk) == ["a.txt", "c.txt"] and old.read_bytes() == b"new\n"
