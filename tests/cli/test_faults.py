"""`ect tasks export` under faults: a full disk, a read-only directory, a file where the
directory should be. One line, the documented exit code, nothing half-written."""

from __future__ import annotations

from pathlib import Path

from tests.faults import ect, fill, listing, readonly_view, small_tmpfs


def test_tasks_export_on_a_full_disk_leaves_nothing_and_can_be_retried() -> None:
    with small_tmpfs(256) as disk:
        filler = fill(disk)
        res = ect("tasks", "export", str(disk / "out"))
        assert res.code == 5, res.err
        assert "No space left on device" in res.one_line_error()
        assert sorted(p.name for p in disk.iterdir()) == [".filler"]
        filler.unlink()
    # (a retry on a disk with room is the ordinary export, covered by tests/worlds)


def test_tasks_export_into_a_read_only_directory(tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    with readonly_view(d) as ro:
        res = ect("tasks", "export", str(ro / "out"))
        assert res.code == 2, res.err
        assert "Read-only file system" in res.one_line_error()
    assert listing(d) == {}


def test_tasks_export_onto_a_file(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    res = ect("tasks", "export", str(f))
    assert res.code == 2, res.err
    res.one_line_error()
    assert f.read_text() == "x"
