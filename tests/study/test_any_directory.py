"""Every command that takes a store reads the spec its header records, from any directory
(issue 39, finding 1): ``ect replay --store out/demo-*/v2.db`` run outside the checkout said
"cannot read study spec schedules/v2.toml" (exit 2) while ``export`` and ``resume`` found it.

A header records the spec as the user typed it (``schedules/v2.toml`` for ``make demo``): a
relative path is looked for from the working directory, then in the study's own folder (the
checkout or the installed wheel); found nowhere, the command refuses naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner import _data
from runner.cli._app import cli
from tests.faults import ect
from tests.study.support import REPO, make_study, relock, run


def test_replay_and_view_of_a_checkout_run_work_from_another_directory(tmp_path: Path) -> None:
    """The reproduction itself: a run of the checkout's own spec (recorded as the relative
    ``schedules/v2.toml``), replayed and viewed from a directory outside the checkout."""
    store = tmp_path / "run" / "v2.db"
    store.parent.mkdir()
    made = ect("run", "--study", "schedules/v2.toml", "--store", str(store), "--limit", "2", "-q",
               cwd=REPO, driver=True, timeout=300)
    assert made.code == 0, made.err
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    replay = ect("replay", "--store", str(store), "--json", "-q", cwd=elsewhere, timeout=300)
    assert replay.code == 0, replay.err
    assert json.loads(replay.out)["reproduced"] == 2
    bundle = ect("view", "--store", str(store), "--bundle", str(tmp_path / "b"), "-q",
                 cwd=elsewhere)
    assert bundle.code == 0, bundle.err
    assert (tmp_path / "b" / "index.html").is_file()


@pytest.fixture(scope="module")
def relative_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A study folder ``root/schedules/small.toml`` (standing in for the checkout) and a store
    of its first 40 of 48 rows whose header records the spec as ``schedules/small.toml``."""
    root = tmp_path_factory.mktemp("study-root")
    spec = make_study(root / "schedules")
    relock(spec.rename(root / "schedules" / "small.toml"))
    store = tmp_path_factory.mktemp("runs") / "small.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        summary = run(Path("schedules/small.toml"), store, limit=40, concurrency=2)
    assert summary.committed == 40
    return root, store


def _invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in res.stderr, res.stderr
    return res.exit_code, res.stdout, res.stderr


def test_resume_export_replay_report_view_from_outside(
        relative_run: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, original = relative_run
    store = tmp_path / "small.db"
    for suffix in ("", ".checkpoint", ".key", ".key.pub"):
        Path(str(store) + suffix).write_bytes(Path(str(original) + suffix).read_bytes())
    Path(str(store) + ".key").chmod(0o600)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(_data, "study_root", lambda: root)

    # resume continues to the --limit the header records (40): export names what finishes it
    code, _, err = _invoke("resume", "--store", str(store), "-q")
    assert code == 0, err
    code, _, err = _invoke("export", "--store", str(store), "--out", str(tmp_path / "m.json"))
    assert code == 3 and "holds 40 of 48 cells" in err, err
    assert f"`ect resume --store {store} --limit 48`" in err, err
    code, _, err = _invoke("resume", "--store", str(store), "--limit", "48", "-q")
    assert code == 0, err
    code, _, err = _invoke("export", "--store", str(store), "--out", str(tmp_path / "m.json"))
    assert code == 0, err
    code, out, err = _invoke("replay", "--store", str(store), "--json", "-q")
    assert code == 0, err
    assert json.loads(out)["reproduced"] == 48
    # the schedule the store must cover is its own spec's (small.schedule.jsonl), not
    # schedules/v2.schedule.jsonl looked up from here
    code, _, err = _invoke("report", "--store", str(store), "--out", str(tmp_path / "rep"),
                           "--replicates", "20")
    assert code == 0, err
    code, _, err = _invoke("view", "--store", str(store), "--bundle", str(tmp_path / "b"), "-q")
    assert code == 0, err


def test_a_recorded_spec_found_nowhere_is_refused_naming_it(
        relative_run: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, store = relative_run
    monkeypatch.chdir(tmp_path)
    for args in (["replay", "--store", str(store), "-q"],
                 ["report", "--store", str(store), "--out", str(tmp_path / "r")],
                 ["export", "--store", str(store), "--out", str(tmp_path / "m.json")]):
        code, _, err = _invoke(*args)
        assert code == 2, (args, err)
        (line,) = err.splitlines()
        assert line.startswith("ect: ") and "records study spec schedules/small.toml" in line
        assert "found neither here" in line
