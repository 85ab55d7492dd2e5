"""Refuse before working (issue 29): what can be refused cheaply is refused before the preflight's
probes or any computation, and the preflight itself refuses a store directory it cannot write."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import runner.analysis
import runner.study
from runner.cli._app import cli
from runner.store import Store, generate_key
from tests.faults import readonly_view
from tests.store.conftest import make_header
from tests.study.support import make_study


def _ect(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def no_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any preflight (tens of seconds of probes) is a failure of these tests."""
    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the preflight ran before a cheap refusal")

    monkeypatch.setattr(runner.study, "run_preflight", refuse)


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_study(tmp_path_factory.mktemp("refuse-study"))


def test_preflight_refuses_a_store_directory_it_cannot_write(spec: Path, tmp_path: Path) -> None:
    (tmp_path / "ro").mkdir()
    with readonly_view(tmp_path / "ro") as ro:
        r = _ect("preflight", "--study", str(spec), "--store", str(ro / "v2.db"), "-q")
    assert r.exit_code == 3, r.output
    assert (f"  [FAIL] store: {ro}/v2.db: the store's directory is not writable (cannot create a "
            f"file in {ro}: Read-only file system)") in r.output.splitlines()
    assert "  [FAIL] probes: not judged: an earlier check failed" in r.output.splitlines()
    assert not list((tmp_path / "ro").iterdir())  # the probe file is gone too


def test_preflight_quiet_prints_only_the_verdict(spec: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # the probes are not what -q is about: keep them out (only the network and write denials)
    real = runner.study.run_preflight
    monkeypatch.setattr(runner.study, "run_preflight",
                        lambda *a, **k: real(*a, **{**k, "probes": "mandatory"}))
    r = _ect("preflight", "--study", str(spec), "--store", str(tmp_path / "v2.db"), "-q")
    assert r.exit_code == 0, r.output
    (line,) = r.output.splitlines()
    assert line.startswith("preflight passed (") and "; report sha256:" in line


def test_run_on_a_store_with_cells_is_refused_before_the_preflight(
        spec: Path, tmp_path: Path, no_preflight: None) -> None:
    store = tmp_path / "v2.db"
    with Store.create(store, header=make_header(), signing_key=generate_key(tmp_path / "v2.db.key")) as s:
        s.append_batch([{"cell": 1}, {"cell": 2}])
    r = _ect("run", "--study", str(spec), "--store", str(store), "-q")
    assert r.exit_code == 3, r.output
    assert r.output.splitlines()[-1] == (
        f"ect: {store} already holds 2 cells; continue it with `ect resume --store {store}`")


def test_run_with_ray_missing_is_refused_before_the_preflight(
        spec: Path, tmp_path: Path, no_preflight: None, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real(name, *a))
    r = _ect("run", "--study", str(spec), "--store", str(tmp_path / "v2.db"), "--executor", "ray",
             "-q")
    assert r.exit_code == 3, r.output
    assert r.output.splitlines()[-1] == (
        "ect: the ray executor needs Ray: pip install '.[ray]' in the ect-runner checkout")
    assert not (tmp_path / "v2.db").exists()


@pytest.mark.parametrize("command", ["demo", "sweep"])
def test_a_used_out_folder_is_refused_before_any_work(
        command: str, spec: Path, tmp_path: Path, no_preflight: None) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("someone's file\n", "utf-8")
    extra = (["--limit", "1"] if command == "demo"
             else ["--param", "simulated.planner.p_premature_finish=0.25"])
    r = _ect(command, "--study", str(spec), "--out", str(out), *extra)
    assert r.exit_code == 2, r.output
    assert r.output.splitlines()[-1] == (
        f"ect: --out {out}: exists and is not empty; give a new or empty directory")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_static_refuses_an_unwritable_out_before_computing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def computed(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the static study ran before --out was checked")

    monkeypatch.setattr(runner.analysis, "static_study", computed)
    (tmp_path / "ro").mkdir()
    with readonly_view(tmp_path / "ro") as ro:
        r = _ect("static", "--out", str(ro / "static"), "-q")
    assert r.exit_code == 2, r.output
    assert r.output.splitlines()[-1] == f"ect: --out {ro}/static: cannot write in {ro}"


def test_run_into_a_read_only_directory_is_refused_before_the_preflight(
        spec: Path, tmp_path: Path, no_preflight: None) -> None:
    (tmp_path / "ro").mkdir()
    with readonly_view(tmp_path / "ro") as ro:
        r = _ect("run", "--study", str(spec), "--store", str(ro / "v2.db"), "-q")
    assert r.exit_code == 2, r.output
    assert r.output.splitlines()[-1] == (
        f"ect: --store {ro}/v2.db: cannot write in {ro}: Read-only file system")
