"""Refusal advice that works (issue 39, finding 8): with a leftover STOP file, `ect resume`
preflighted for 15 s, halted, and said "continue with `ect resume ...`" without naming the STOP
file; `ect run --store S` while another run wrote S said "continue it with `ect resume`", which
the run lock then refused. Now both are refused before any preflight: the STOP file is named
with how to remove it, and a held store names the run holding it (pid, host, since)."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import runner.study
from runner.cli._app import cli
from runner.study._execute import _run_lock
from tests.study.conftest import Reference


def _ect(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def no_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the preflight ran before the refusal")

    monkeypatch.setattr(runner.study, "run_preflight", refuse)


@pytest.fixture
def partial(reference: Reference, tmp_path: Path) -> Path:
    """A copy of the reference store (with its key) in a directory of its own."""
    store = tmp_path / "run" / "v2.db"
    store.parent.mkdir()
    for suffix in ("", ".checkpoint", ".key", ".key.pub"):
        shutil.copy2(str(reference.store) + suffix, str(store) + suffix)
    return store


@pytest.mark.parametrize("command", ["resume", "run"])
def test_a_stop_file_is_named_before_any_preflight(
        reference: Reference, partial: Path, no_preflight: None, command: str) -> None:
    stop = partial.parent / "STOP"
    stop.write_text("", "utf-8")
    store = partial if command == "resume" else partial.parent / "new.db"
    res = _ect(command, "--store", str(store), "--study", str(reference.spec), "-q")
    assert res.exit_code == 4, res.output
    (line,) = res.stderr.splitlines()
    assert line == (f"ect: {stop} exists: it halts every run writing in {stop.parent} before its "
                    f"first cell, so nothing was run; remove it (rm {stop}) and run the command "
                    "again")
    assert stop.exists() and not (partial.parent / "new.db").exists()


def test_a_store_another_run_holds_names_that_run(
        reference: Reference, partial: Path, no_preflight: None) -> None:
    with _run_lock(partial):  # another writer (a separate lock file description)
        for args in (["run", "--store", str(partial)], ["resume", "--store", str(partial)]):
            res = _ect(*args, "--study", str(reference.spec), "-q")
            assert res.exit_code == 3, res.output
            (line,) = res.stderr.splitlines()
            assert line.startswith(f"ect: another run is writing to {partial} (pid {os.getpid()} "
                                   f"on {socket.gethostname()} since 20"), line
            assert "continue it with" not in line
            assert "wait for it to finish, or halt it" in line
    # released: the advice is the ordinary one again (the store holds cells: use resume)
    res = _ect("run", "--store", str(partial), "--study", str(reference.spec), "-q")
    assert res.exit_code == 3 and "continue it with `ect resume" in res.stderr
