"""`ect static --json` prints the run's results.json on stdout and nothing else there (issue 29).

The study itself is the real one (`runner.analysis.static_study`, the simulated provider, the
real policies) on a small slice of the grid, so the test stays cheap; only the slice is chosen
here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import runner.analysis
from runner.cli import cli
from runner.worlds import static_grid

SPEC = Path(__file__).resolve().parents[2] / "schedules" / "static.toml"


@pytest.fixture
def small_static(monkeypatch: pytest.MonkeyPatch) -> None:
    real = runner.analysis.static_study
    grid = static_grid()
    # One world of each split: every condition of the grid (C0, F1-F8) is present in each
    # world, and the analysis reads the held-out split beside the dev one.
    worlds = {s.task.split: s.task.world_id for s in reversed(grid)}
    subset = [s for s in grid if s.task.world_id in worlds.values()]

    def sliced(*args: Any, **kwargs: Any) -> Any:
        return real(*args, snapshots=subset, **kwargs)

    monkeypatch.setattr(runner.analysis, "static_study", sliced)


def test_static_json_prints_results_json_only(small_static: None, tmp_path: Path) -> None:
    out = tmp_path / "static"
    res = CliRunner().invoke(cli, ["static", "--spec", str(SPEC), "--out", str(out), "--json",
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    printed = json.loads(res.stdout)
    assert printed == json.loads((out / "results.json").read_text("utf-8"))
    assert set(printed) >= {"table2", "table3", "h1", "simulator", "choices"}
    # The human summary is not mixed into the JSON document.
    assert "wrote " not in res.stdout and "H1 " not in res.stdout.splitlines()[0]


def test_static_without_json_prints_the_summary(small_static: None, tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["static", "--spec", str(SPEC), "--out", str(tmp_path / "s"),
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    assert "wrote " in res.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(res.stdout)
