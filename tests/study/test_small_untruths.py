"""Small untruths (issue 39, finding 9) that have a test of their own: `ect sweep --list
--json` printed text; `ect resume` on a complete store rewrote `v2.db.checkpoint` although it
had nothing to do. (`demo --limit`'s progress count is pinned in test_progress_cli.py, `store
verify garbage.db --json` in tests/view/test_damage_vocabulary.py, the README's probe count in
tests/test_readme.py.)"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli._app import cli
from runner.study import simulator_parameters
from tests.study.conftest import Reference
from tests.study.test_progress_cli import _mandatory_probes


def test_sweep_list_json_prints_json() -> None:
    res = CliRunner().invoke(cli, ["sweep", "--list", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == simulator_parameters(
        __import__("runner.study", fromlist=["load_spec"]).load_spec(
            Path(__file__).resolve().parents[2] / "schedules" / "v2.toml"))


def _digests(directory: Path) -> dict[str, tuple[str, int, int]]:
    """Each file's sha256, inode and mtime: a rewrite with the same bytes is still a write."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_ino,
                     p.stat().st_mtime_ns)
            for p in sorted(directory.iterdir()) if p.is_file()}


def test_resume_with_nothing_to_do_writes_nothing(
        reference: Reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _mandatory_probes(monkeypatch)
    store = tmp_path / "run" / "v2.db"
    store.parent.mkdir()
    for suffix in ("", ".checkpoint", ".key", ".key.pub"):
        shutil.copy2(str(reference.store) + suffix, str(store) + suffix)
    before = _digests(store.parent)
    res = CliRunner().invoke(cli, ["resume", "--store", str(store), "--study",
                                   str(reference.spec), "-q"])
    assert res.exit_code == 0, res.output
    after = _digests(store.parent)
    after.pop("v2.db.run-lock", None)  # the run lock (who holds the store) is not the store
    assert after == before
