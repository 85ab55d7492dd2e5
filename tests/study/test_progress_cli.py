"""Long commands show progress; `resume` on a finished store says there is nothing to do; the
study's defaults resolve outside the repository root; output paths print without `//`."""

from __future__ import annotations

import functools
import io
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import runner.study
from runner.cli._app import cli
from runner.cli._progress import CellProgress, CountProgress
from runner.study import RunSummary, run_preflight, study_paths
from tests.sizes import STUDY_CELLS
from tests.study.conftest import Reference
from tests.study.support import REPO, SMALL_ROWS


def _mandatory_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runner.study.run_preflight",
                        functools.partial(run_preflight, probes="mandatory"))


def _copy_store(reference: Reference, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(reference.store.parent, copy)
    return copy / reference.store.name


def _records(store: Path) -> int:
    from runner.store import Store

    with Store.open(store) as s:
        return int(s.count)


def test_resume_on_a_complete_store_says_there_is_nothing_to_do(
        reference: Reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _mandatory_probes(monkeypatch)
    store = _copy_store(reference, tmp_path)
    before = _records(store)
    result = CliRunner().invoke(cli, ["resume", "--store", str(store), "--study",
                                      str(reference.spec)])
    assert result.exit_code == 0, result.output
    assert f"nothing to do: all {SMALL_ROWS} cells are already committed" in result.stderr
    assert not re.search(r"\d+ cells run|^cells ", result.stderr, re.M)  # no "run" reported
    assert _records(store) == before


def test_run_prints_periodic_progress_lines_when_not_a_tty(
        small_study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _mandatory_probes(monkeypatch)
    store = tmp_path / "v2.db"
    result = CliRunner().invoke(cli, ["run", "--study", str(small_study), "--store", str(store),
                                      "--limit", "3"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    # the first cell is always reported (then at most one line every 5 s, and the last)
    first = next(line for line in lines if line.startswith("cells "))
    # the count is the one the ETA runs to (issue 39: it read "1/576 ... ETA 7s" under --limit 24)
    assert re.fullmatch(r"cells 1/3 \(--limit 3 of 48 rows\)  \d+\.\d cells/s  ETA \S+  "
                        r"cost \$\d+\.\d{4} \(simulated\)  \d+ calls  stops: [a-z_]+ 1", first), first
    assert any(line.startswith("preflight: ") and "check" in line for line in lines)
    assert lines[-1].startswith("3 cells run, 3/48 committed to ")
    assert result.stdout == ""  # progress goes to stderr only


def test_quiet_run_prints_nothing(small_study: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _mandatory_probes(monkeypatch)
    result = CliRunner().invoke(cli, ["run", "--study", str(small_study), "--store",
                                      str(tmp_path / "v2.db"), "--limit", "1", "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.output == ""


def test_cell_progress_on_a_terminal_is_a_rich_line_with_every_figure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich fits the line to the terminal's width
    out = io.StringIO()
    progress = CellProgress(True, stream=out, tty=True)
    summary = RunSummary(store="s.db", total=10, provider="simulated")
    progress.start(summary)
    summary.committed, summary.cost_usd, summary.provider_attempts = 4, 0.25, 9
    summary.stop_reasons = Counter({"goal_met": 3, "no_progress": 1})
    progress.update({}, summary)
    progress.stop()
    text = out.getvalue()
    assert "\x1b[" in text  # drawn by rich for a terminal, in place
    for needle in ("cells", "4/10", "cells/s", "ETA", "cost $0.2500 (simulated)", "9 calls",
                   "stops: goal_met 3, no_progress 1"):
        assert needle in text, needle


def test_count_progress_without_a_tty_writes_first_and_last_lines_only() -> None:
    out = io.StringIO()
    progress = CountProgress("replay", "cells", stream=out, tty=False, interval=3600,
                             after="done; writing")
    for i in range(1, 101):
        progress(i, 100)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert lines[0] == "replay: 1/100 cells"
    assert re.fullmatch(r"replay: 100/100 cells  \d+\.\d/s", lines[1]), lines[1]
    assert lines[2] == "replay: done; writing"


def test_replay_shows_progress(reference: Reference) -> None:
    result = CliRunner().invoke(cli, ["replay", "--store", str(reference.store), "--study",
                                      str(reference.spec)])
    assert result.exit_code == 0, result.output
    assert "replay: verifying" in result.stderr
    assert re.search(rf"^replay: {SMALL_ROWS}/{SMALL_ROWS} cells", result.stderr, re.M)
    quiet = CliRunner().invoke(cli, ["replay", "--store", str(reference.store), "--study",
                                     str(reference.spec), "--quiet"])
    assert quiet.stderr == ""


def test_static_study_reports_each_decision() -> None:
    import anyio

    from runner.providers import SimulatedProvider
    from runner.study import StaticSpec, run_static
    from runner.worlds import static_grid

    seen: list[tuple[int, int]] = []
    spec = StaticSpec.load(REPO / "schedules" / "static.toml")
    run = anyio.run(functools.partial(run_static, spec, SimulatedProvider(),
                                      snapshots=static_grid()[:2], on_progress=
                                      lambda d, t: seen.append((d, t))))
    assert len(seen) == len(run.rows) > 0
    assert [d for d, _ in seen] == list(range(1, len(run.rows) + 1))
    assert {t for _, t in seen} == {len(run.rows)}


def test_preflight_reports_each_probe_as_it_finishes(
        small_study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.sandbox

    events: list[str] = []
    real = runner.sandbox.iter_probes

    def recording(backend: object, **kwargs: object) -> Iterator[object]:
        for r in real(backend, **kwargs):  # type: ignore[arg-type]
            events.append(f"result {r.name}")
            yield r

    monkeypatch.setattr(runner.sandbox, "iter_probes", recording)
    report = run_preflight(small_study, tmp_path / "s.db", probes="mandatory",
                           on_check=lambda c: events.append(f"check {c.name}"))
    assert report.passed
    probe_events = [e for e in events if e.startswith("result ") or e.startswith("check probe.")]
    # The probes run several at a time (docs/sandbox.md) and start while the lock is checked,
    # in a thread of their own; each is reported, in the probe file's order, once it is out and
    # the checks before it are reported: never before its result, never out of order.
    results = [e.removeprefix("result ") for e in probe_events if e.startswith("result ")]
    checks = [e.removeprefix("check probe.") for e in probe_events if e.startswith("check ")]
    assert len(results) >= 4 and checks == results, probe_events
    for name in checks:
        assert probe_events.index(f"result {name}") < probe_events.index(f"check probe.{name}")
    order = [p.name for p in runner.sandbox.load_probes()]
    assert results == [n for n in order if n in set(results)]


def test_study_defaults_resolve_outside_the_repository_root(
        reference: Reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # `ect report` used to stop at option parsing ("File 'schedules/v2.schedule.jsonl' does
    # not exist"), then checked the store against the checkout's schedule (576 rows, exit 3);
    # now it reads the schedule of the spec the store's header records (issue 39), which the
    # small store covers.
    result = CliRunner().invoke(cli, ["report", "--store", str(reference.store), "--out", "r",
                                      "--replicates", "20"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "results.json").is_file()


def test_demo_runs_outside_the_repository_root(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _mandatory_probes(monkeypatch)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["demo", "--limit", "1", "--out", "o/"])
    assert result.exit_code == 0, result.output
    assert f"preflight: {REPO / 'schedules' / 'v2.toml'} -> " in result.stderr
    assert f"smoke run (1/{STUDY_CELLS} cells)" in result.stderr
    assert (tmp_path / "o" / "v2.db").is_file()


def test_missing_study_files_name_where_to_run(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import runner._data as data

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(data, "study_root", lambda: tmp_path / "nowhere")
    result = CliRunner().invoke(cli, ["demo", "--limit", "1"])
    assert result.exit_code == 2
    assert result.stderr.startswith("ect: schedules/v2.toml not found here or in ")
    assert "run from the ect-runner repository root or pass --study PATH" in result.stderr
    assert not (tmp_path / "out").exists()


def test_report_paths_print_without_a_double_slash(reference: Reference,
                                                   tmp_path: Path) -> None:
    schedule = study_paths(reference.spec).schedule
    out = f"{tmp_path}/r/"
    result = CliRunner().invoke(cli, ["report", "--store", str(reference.store), "--schedule",
                                      str(schedule), "--out", out, "--replicates", "200"])
    assert result.exit_code == 0, result.output
    assert "//" not in result.output
    assert f"wrote {tmp_path}/r/report.html" in result.output


def test_run_and_demo_default_to_the_same_concurrency() -> None:
    def default(command: list[str]) -> object:
        ctx = cli.make_context("ect", [*command, "--help"], resilient_parsing=True)
        sub = cli.get_command(ctx, command[0])
        assert sub is not None
        return next(p.default for p in sub.params if p.name == "concurrency")

    assert default(["run"]) == default(["demo"]) == default(["resume"]) == 2


def test_credential_env_reads_name_in_every_command() -> None:
    import click

    found = []

    def walk(command: click.Command, path: str) -> None:
        for p in command.params:
            if "--credential-env" in getattr(p, "opts", []):
                found.append((path, p.metavar))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(cli, "ect")
    assert len(found) >= 5, found
    assert {m for _, m in found} == {"NAME"}, found
    assert runner.study is not None
