"""`ect report` on a store written by the real runner.study (a short limited run): the record
format is read as the study writes it, and an incomplete inventory is refused with exit 3."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.analysis import load_outcomes_from_store
from runner.cli import cli

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def limited_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("study")
    spec = tmp / "v2.toml"
    shutil.copyfile(REPO / "schedules" / "v2.toml", spec)
    runner = CliRunner()
    for args in (
        ["schedule", "build", "--study", str(spec)],
        ["schedule", "lock", "--study", str(spec)],
    ):
        res = runner.invoke(cli, args)
        assert res.exit_code == 0, res.output
    store = tmp / "v2.db"
    res = runner.invoke(
        cli, ["run", "--study", str(spec), "--store", str(store), "--limit", "8", "-q"]
    )
    assert res.exit_code == 0, res.output
    return store, tmp / "v2.schedule.jsonl"


def test_study_store_is_read_as_written(limited_store: tuple[Path, Path]) -> None:
    loaded = load_outcomes_from_store(limited_store[0])
    assert len(loaded.outcomes) == 8
    assert [o.row for o in loaded.outcomes] == list(range(1, 9))
    assert (loaded.provider.name, loaded.provider.model, loaded.provider.simulated) == (
        "simulated",
        "simulated-1",
        True,
    )


def test_report_refuses_the_limited_study(limited_store: tuple[Path, Path], tmp_path: Path) -> None:
    store, schedule = limited_store
    res = CliRunner().invoke(
        cli, ["report", "--store", str(store), "--schedule", str(schedule), "--out", str(tmp_path)]
    )
    assert res.exit_code == 3, res.output
    assert "inventory incomplete: 576 schedule rows expected, 568 missing (rows 9, 10" in res.output
    assert not (tmp_path / "results.json").exists()
