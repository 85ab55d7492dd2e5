"""``run``, ``resume`` and ``demo`` are one library call each (issue 31, item 5): the workflow the
CLI held (cheap refusals, preflight, execute; the demo's verify/export/report/static steps) is
``runner.study.run_study`` and ``runner.analysis.run_demo``, and the CLI only prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import runner.study
from runner.analysis import DemoHooks, run_demo
from runner.cli._common import EXIT_USAGE, exit_code
from runner.study import (
    ClusterUnreachable,
    ProviderChoice,
    RunHooks,
    RunSettings,
    RunSummary,
    StoreNotEmpty,
    StoreNotWritable,
    run_study,
)
from tests.faults import readonly_view
from tests.study.conftest import Reference
from tests.study.support import SMALL_ROWS


def _fast_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    real = runner.study.run_preflight
    monkeypatch.setattr(runner.study, "run_preflight",
                        lambda *a, **k: real(*a, **{**k, "probes": "mandatory"}))


def _recording(events: list[str]) -> RunHooks:
    return RunHooks(
        on_preflight=lambda s: events.append(f"preflight {s.store_path.name}"),
        on_check=lambda c: events.append("check"),
        on_preflight_passed=lambda r: events.append("passed"),
        on_nothing_to_do=lambda s: events.append(f"nothing to do {s.committed}/{s.total}"),
        on_start=lambda s: events.append(f"start {s.goal}"),
        on_cell=lambda rec, s: events.append("cell"),
        on_finished=lambda s: events.append(f"finished {s.committed}"))


def test_resume_of_a_complete_store_runs_nothing_and_says_so(
        reference: Reference, monkeypatch: pytest.MonkeyPatch) -> None:
    _fast_preflight(monkeypatch)
    events: list[str] = []
    summary = run_study(RunSettings(reference.spec, reference.store, ProviderChoice("simulated")),
                        resume=True, hooks=_recording(events))
    assert isinstance(summary, RunSummary)
    assert (summary.committed, summary.total, summary.committed_now) == (SMALL_ROWS, SMALL_ROWS, 0)
    checks = events.count("check")
    assert checks >= 5
    assert events == [f"preflight {reference.store.name}", *["check"] * checks, "passed",
                      f"nothing to do {SMALL_ROWS}/{SMALL_ROWS}", f"finished {SMALL_ROWS}"]


def test_a_run_tells_its_hooks_each_cell_in_order(small_study: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _fast_preflight(monkeypatch)
    events: list[str] = []
    summary = run_study(RunSettings(small_study, tmp_path / "v2.db", ProviderChoice("simulated"),
                                    limit=3), hooks=_recording(events))
    assert summary.committed == summary.committed_now == 3
    tail = events[events.index("passed"):]
    assert tail == ["passed", "start 3", "cell", "cell", "cell", "finished 3"]


def _no_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the preflight ran before a cheap refusal")

    monkeypatch.setattr(runner.study, "run_preflight", refuse)


def test_the_cheap_refusals_come_before_the_preflight(
        small_study: Path, reference: Reference, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _no_preflight(monkeypatch)
    with pytest.raises(StoreNotEmpty, match="already holds 48 cells"):
        run_study(RunSettings(small_study, reference.store, ProviderChoice("simulated")))
    (tmp_path / "ro").mkdir()
    with readonly_view(tmp_path / "ro") as ro, \
            pytest.raises(StoreNotWritable, match="cannot write in") as e:
        run_study(RunSettings(small_study, ro / "v2.db", ProviderChoice("simulated")))
    assert exit_code(e.value) == EXIT_USAGE
    assert not (tmp_path / "ro" / "v2.db").exists()
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(ClusterUnreachable, match=r"pip install '\.\[ray\]'"):
        run_study(RunSettings(small_study, tmp_path / "v2.db", ProviderChoice("simulated"),
                              executor="ray"))


def test_a_smoke_demo_is_one_call_that_writes_no_report(
        small_study: Path, repo_root: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _fast_preflight(monkeypatch)
    steps: list[str] = []
    done: list[str] = []
    out = tmp_path / "demo"
    result = run_demo(out, small_study, repo_root / "schedules" / "static.toml", limit=2,
                      hooks=DemoHooks(on_step=steps.append, on_done=done.append))
    assert (result.committed, result.total, result.complete) == (2, SMALL_ROWS, False)
    assert [name for name, _ in result.outputs][:2] == ["store", "public key"]
    assert result.store == out / "v2.db" and result.store.is_file()
    assert steps[0].startswith("verifying the store in full")
    assert done == ["store verified: 3 records, intact (full verification)",
                    f"smoke run (2/{SMALL_ROWS} cells): no manifest or report (they need every cell)"]
    assert result.gates == {}


def test_a_refused_demo_leaves_no_directory_behind(
        small_study: Path, repo_root: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = runner.study.run_preflight
    monkeypatch.setattr(runner.study, "run_preflight",
                        lambda *a, **k: real(*a, **{**k, "probes": "mandatory",
                                                    "sandbox_backend": "sandbox-exec"}))
    out = tmp_path / "demo"
    with pytest.raises(runner.study.PreflightFailed):
        run_demo(out, small_study, repo_root / "schedules" / "static.toml", limit=1)
    assert not out.exists()
