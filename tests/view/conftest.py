"""A small real store for the viewer tests: the project's own study on 16 cells (one world, one
seed, the first four task/checkpoint pairs x four pipelines), every tool call sandboxed."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.study.support import REPO, make_study, run, subprocess_env

FIXTURE_CELLS = 16


@pytest.fixture(scope="session")
def study_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_study(tmp_path_factory.mktemp("view-study"))


@pytest.fixture(scope="session")
def pristine_store(study_spec: Path) -> Path:
    store = study_spec.parent / "v2.db"
    summary = run(study_spec, store, limit=FIXTURE_CELLS, concurrency=2)
    assert summary.committed == FIXTURE_CELLS
    return store


@pytest.fixture
def store(pristine_store: Path, tmp_path: Path) -> Path:
    """A private copy of the fixture store (the store, its checkpoint and public key)."""
    out = tmp_path / "run" / "v2.db"
    out.parent.mkdir()
    for suffix in ("", ".checkpoint", ".key.pub"):
        shutil.copyfile(str(pristine_store) + suffix, str(out) + suffix)
    return out


def file_digests(store: Path) -> dict[str, str | None]:
    """sha256 of the store file, its -wal and -shm (None when absent), and the directory listing."""
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal", "-shm", ".checkpoint"):
        p = Path(str(store) + suffix)
        out[suffix or "db"] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
    out["listing"] = ",".join(sorted(p.name for p in store.parent.iterdir()))
    return out


@pytest.fixture(scope="session")
def static_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ect static` output over 18 snapshots (9 training, 9 held-out) on the simulated provider."""
    from runner.analysis import static_study
    from runner.worlds import static_grid

    grid = static_grid()
    subset = ([s for s in grid if s.task.split != "heldout"][:9]
              + [s for s in grid if s.task.split == "heldout"][:9])
    out = tmp_path_factory.mktemp("view-static") / "static"
    static_study(Path(__file__).resolve().parents[2] / "schedules" / "static.toml", out,
                 snapshots=subset)
    return out


@pytest.fixture
def served(store: Path) -> Iterator[str]:
    """`ect view --store STORE --port 0` in a child process; yields its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "runner", "view", "--store", str(store),
                             "--port", "0"], cwd=REPO, env=subprocess_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "read-only at http://127.0.0.1:" in line, line + (proc.stderr.read() if proc.stderr else "")
        yield line.split(" at ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
