"""The one atomic-write helper (runner/canonical/_files.py) and the writers that use it.

Each writer must fsync the new file and its directory (a rename is durable only once the
directory is), and leave no temp file behind when the write fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import runner.canonical._files as files
from runner.analysis import write_outputs
from runner.canonical import atomic_write


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every path os.fsync was called on, through the helper (resolved from /proc)."""
    seen: list[Path] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(files.os, "fsync", fsync)
    return seen


def test_writes_and_syncs_file_and_directory(tmp_path: Path, synced: list[Path]) -> None:
    target = tmp_path / "out.json"
    target.write_bytes(b"old")
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert any(p.name.startswith(".out.json.tmp-") for p in synced)  # the file, before rename
    assert tmp_path in synced  # the directory, after
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_failed_rename_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "dir"
    target.mkdir()
    (target / "keep").write_bytes(b"x")
    with pytest.raises(OSError):
        atomic_write(target, b"new")  # a file cannot replace a non-empty directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]


def test_a_crash_hook_before_rename_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "m.json"

    def crash(point: str) -> None:
        if point == "m.mid_file":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, b"new", hook=crash, point="m")
    assert list(tmp_path.iterdir()) == []


def _closed_results() -> dict[str, object]:
    from runner.analysis import ProviderInfo, analyse_closed_loop
    from tests.analysis import _fixtures as fx

    return analyse_closed_loop(fx.typed(fx.outcomes()), fx.schedule_rows(),
                               provider=ProviderInfo("simulated", "simulated-1", True), seed=1,
                               replicates=50)


def test_report_writer_syncs(tmp_path: Path, synced: list[Path]) -> None:
    """The report writer used to write and rename with no fsync at all."""
    write_outputs(_closed_results(), tmp_path / "report")
    assert tmp_path / "report" in synced
    assert any(p.name.startswith(".results.json.tmp-") for p in synced)
    assert any(p.name.startswith(".tables.md.tmp-") for p in synced)


def test_report_writer_leaves_no_temp_on_failure(tmp_path: Path) -> None:
    """write_outputs used to write `results.json.tmp` and rename it without fsync; a failing
    rename left the temp file behind."""
    res = _closed_results()
    out = tmp_path / "report"
    (out / "results.json").mkdir(parents=True)
    (out / "results.json" / "keep").write_bytes(b"x")
    with pytest.raises(OSError):
        write_outputs(res, out)
    assert not [p for p in out.iterdir() if ".tmp" in p.name]
