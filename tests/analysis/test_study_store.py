"""`ect report` on a store written by the real runner.study (a short limited run): the record
format is read as the study writes it, and an incomplete inventory is refused with exit 3."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.analysis import load_outcomes_from_store
from runner.cli import cli
from tests.sizes import STUDY_CELLS

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
    assert (f"inventory incomplete: {STUDY_CELLS} schedule rows expected, {STUDY_CELLS - 8} missing "
            "(rows 9, 10") in res.output
    assert not (tmp_path / "results.json").exists()


def test_reason_codes_per_stratum_from_the_records(limited_store: tuple[Path, Path]) -> None:
    from dataclasses import asdict

    from runner.study import reason_codes_by_stratum

    cells = load_outcomes_from_store(limited_store[0]).cells
    table = [asdict(e) for e in reason_codes_by_stratum(cells)]
    assert sum(e["cells"] for e in table) == len(cells) == 8
    strata = {"clean", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "U1", "U2", "U3", "T1"}
    assert {e["stratum"] for e in table} <= strata
    # Each count is the number of the stratum's cells in which the pipeline gave the code.
    for e in table:
        mine = [c for c in cells if c.result.outcome.policy == e["pipeline"]
                and (c.result.outcome.fault if c.result.outcome.checkpoint != "clean"
                     else "clean") == e["stratum"]]
        for code, n in e["codes"].items():
            assert n == sum(
                1 for c in mine
                if any(code in {r.code for r in (d.pipeline.reasons if d.pipeline else ())}
                       for d in c.result.decisions)
            )
    assert any(e["codes"] for e in table)  # the pipelines say why they decided


def test_the_verifier_audit_recomputes_each_completion_against_gold(
        limited_store: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The non-circular audit: the verifier's verdict on the final certificate and ledger, then
    the values against gold (which the verifier never sees)."""
    import dataclasses

    from runner.analysis import _audit
    cells = load_outcomes_from_store(limited_store[0]).cells
    audit = _audit.verified_completions(cells)
    assert audit is not None and len(audit) == len(cells)
    for cell, v in zip(cells, audit, strict=True):
        o = cell.result.outcome
        assert v.completed == (o.stop_reason == "goal_met")
        if o.supported_completion:
            assert v.verifier_accepts and not v.off_gold
        assert not v.off_gold  # the simulator's tools answer from the gold's own world
    accepted = [c for c, v in zip(cells, audit, strict=True) if v.verifier_accepts]
    assert accepted
    # Move the gold answer of an accepted completion's task: the same verdict, now off gold.
    target = accepted[0].schedule_row.checkpoint_id
    real = _audit._checkpoints()
    cp = real[target]
    moved = dataclasses.replace(cp, task=dataclasses.replace(
        cp.task, gold={s: "not-this" for s in cp.task.gold}))
    monkeypatch.setattr(_audit, "_checkpoints", lambda: {**real, target: moved})
    again = _audit.verified_completions(cells)
    assert again is not None
    flagged = {v.row for v in again if v.off_gold}
    assert accepted[0].row in flagged
    assert flagged <= {c.row for c in cells if c.schedule_row.checkpoint_id == target}
