"""The study commands' help texts and exit codes (2 usage, 3 refused, 4 halted, 1 negative),
and that the committed lock is current."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli._app import cli
from runner.study import LockError, LockMismatch, check_lock, run_preflight, stop_file
from tests.sizes import STUDY_CELLS
from tests.study.conftest import Reference
from tests.study.support import REPO, make_study

HELP = {
    ("schedule",): ["build", "lock"],
    ("schedule", "build"): ["canonical rows", "--replace", "--study"],
    ("schedule", "lock"): ["never rewritten silently", "--replace", "prompts"],
    ("preflight",): ["exit 3", "--store", "--provider", "--credential-file", "--credential-env",
                     "--json", "network and persistent-write"],
    ("run",): ["exit 4", "STOP file", "ect resume", "--concurrency", "--limit",
               "--max-cost-usd", "--max-calls", "--log-json", "--provider"],
    ("resume",): ["verified prefix", "refuses on any drift", "never committed", "--store"],
    ("export",): ["result_digest", "every schedule row", "--out", "signed"],
    ("replay",): ["Re-score", "exit 1"],
    ("demo",): ["offline", "simulated", "--out", "--concurrency"],
}


@pytest.mark.parametrize("command", sorted(HELP), ids=" ".join)
def test_help_texts(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for needle in HELP[command]:
        assert needle in text, (command, needle)


def test_top_level_help_lists_the_commands_and_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in ("schedule", "preflight", "run", "resume", "export", "replay", "demo"):
        assert f"  {name} " in result.output
    text = " ".join(result.output.split())
    assert "2 usage error, 3 refused precondition, 4 halted by a kill switch" in text


@pytest.mark.parametrize("args", [
    ["run"],                                          # --store is required
    ["run", "--store", "x.db", "--concurrency", "0"],
    ["run", "--store", "x.db", "--max-cost-usd", "0"],
    ["run", "--store", "x.db", "--provider", "claude"],
    ["resume", "--store", "does-not-exist.db"],
    ["export", "--store", "does-not-exist.db", "--out", "m.json"],
], ids=lambda a: " ".join(a))
def test_usage_errors_exit_2(args: list[str], tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output


def test_malformed_spec_exits_2_with_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text('format = "ect.study/1"\nname = "x"\nsurprise = 1\n')
    result = CliRunner().invoke(cli, ["schedule", "build", "--study", str(spec)])
    assert result.exit_code == 2
    assert result.stderr.strip() == "ect: spec: unknown top-level field 'surprise'"


def test_lock_never_rewritten_silently_exits_3(tmp_path: Path) -> None:
    spec = make_study(tmp_path)
    spec.write_text(spec.read_text("utf-8").replace("cpu_s = 5", "cpu_s = 4"), "utf-8")
    result = CliRunner().invoke(cli, ["schedule", "lock", "--study", str(spec)])
    assert result.exit_code == 3, result.output
    assert "differs (spec.sha256); pass --replace" in result.stderr
    replaced = CliRunner().invoke(cli, ["schedule", "lock", "--study", str(spec), "--replace"])
    assert replaced.exit_code == 0, replaced.output
    check_lock(spec)


def test_preflight_refusal_exits_3(tmp_path: Path) -> None:
    spec = make_study(tmp_path)
    (tmp_path / "v2.lock.json").unlink()
    result = CliRunner().invoke(cli, ["preflight", "--study", str(spec), "--store",
                                      str(tmp_path / "s.db")])
    assert result.exit_code == 3
    assert result.stderr.strip().splitlines()[-1].startswith(
        "ect: preflight failed: lock: cannot read lock")


def _mandatory_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    def fast(*args: object, **kwargs: object) -> object:
        return run_preflight(*args, **{**kwargs, "probes": "mandatory"})  # type: ignore[arg-type]

    # the CLI imports the library when a command runs, so the library's name is the one to patch
    monkeypatch.setattr("runner.study.run_preflight", fast)


def test_run_on_a_started_store_and_incomplete_export_exit_3(
        reference: Reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _mandatory_probes(monkeypatch)
    store = tmp_path / "v2.db"
    first = CliRunner().invoke(cli, ["run", "--study", str(reference.spec), "--store", str(store),
                                     "--limit", "2", "--quiet"])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(cli, ["run", "--study", str(reference.spec), "--store",
                                     str(store), "--limit", "2", "--quiet"])
    assert again.exit_code == 3 and "ect resume --store" in again.stderr
    exported = CliRunner().invoke(cli, ["export", "--store", str(store), "--out",
                                        str(tmp_path / "m.json")])
    assert exported.exit_code == 3, exported.output
    assert "holds 2 of 48 cells" in exported.stderr
    assert not (tmp_path / "m.json").exists()
    other = CliRunner().invoke(cli, ["resume", "--store", str(store), "--provider", "gemini",
                                     "--credential-env", "X"])
    assert other.exit_code == 3 and "--provider simulated" in other.stderr


def test_stop_file_exits_4(reference: Reference, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    _mandatory_probes(monkeypatch)
    store = tmp_path / "v2.db"
    stop_file(store).touch()
    result = CliRunner().invoke(cli, ["run", "--study", str(reference.spec), "--store",
                                      str(store), "--quiet"])
    assert result.exit_code == 4, result.output
    # named before any preflight, with how to remove it (issue 39)
    assert result.stderr.startswith(f"ect: {stop_file(store)} exists: it halts every run")


def test_replay_difference_exits_1(reference: Reference, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.study._cell as cell_module

    real = vars(cell_module)["score"]
    monkeypatch.setattr(cell_module, "score",
                        lambda t, row: dataclasses.replace(real(t, row), cost_usd=-1.0))
    store = tmp_path / "ref.db"
    shutil.copyfile(reference.store, store)
    shutil.copyfile(reference.store.with_name(reference.store.name + ".checkpoint"),
                    store.with_name(store.name + ".checkpoint"))
    result = CliRunner().invoke(cli, ["replay", "--store", str(store)])
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("replayed 48 cells: 0 reproduced, 48 differ")


def test_committed_lock_is_current() -> None:
    """schedules/v2.lock.json pins the files as committed. Any change under runner/ (the
    source-tree digest), the prompts, the profiles, the spec or the schedule makes it stale."""
    try:
        _, _, lock, rows = check_lock(REPO / "schedules" / "v2.toml")
    except (LockError, LockMismatch) as e:
        pytest.fail(f"schedules/v2.lock.json is not current ({e}); run "
                    "`ect schedule build --replace && ect schedule lock --replace` and commit "
                    "schedules/v2.schedule.jsonl and schedules/v2.lock.json")
    assert len(rows) == lock.schedule.rows == STUDY_CELLS
