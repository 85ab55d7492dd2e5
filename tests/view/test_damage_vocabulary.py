"""One damage vocabulary (issue 39, findings 3, 5, 6 and the `--json` untruth of 9): a
damaged, truncated or foreign store is named the same way, with the same exit code, by every
command that reads a store.

* damage: ``DAMAGED (kind) at seq N`` (or ``at no single record``); ``store verify`` answers
  1 (damage is its negative answer), every other command is refused by it (3);
* a file that never was a store: ``PATH: not an ect run store (...)``, a usage error (2).

Before: ``store show S --cell ID --pretty`` on a store whose record was altered said "no
committed cell" (2) while ``--seq`` named the damage (3); a truncated store was "not a run
store" (2) in ``view`` and ``store show --pretty``, "DAMAGED (corrupt)" in ``store verify``;
``store verify INTACT --checkpoint notes.txt`` said "DAMAGED (signature)" (1); ``store verify
garbage.db --json`` printed nothing on stdout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from runner.cli._app import cli
from tests.view.test_damage import _bodies, _edit_body


def _ect(*args: str) -> Result:
    res = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in res.output, res.output
    return res


def _line(res: Result) -> str:
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("ect: ")]
    return line


def _readers(store: Path, tmp_path: Path) -> dict[str, list[str]]:
    """Every command that reads a store, each with its own fresh output path."""
    s = str(store)
    return {
        "show": ["store", "show", s],
        "show --seq": ["store", "show", s, "--seq", "2"],
        "show --seq --pretty": ["store", "show", s, "--seq", "2", "--pretty"],
        "show --cell --pretty": ["store", "show", s, "--cell", "w10-lookup-0:clean:s0:ect",
                                 "--pretty"],
        "view --bundle": ["view", "--store", s, "--bundle", str(tmp_path / "bundle"), "-q"],
        "replay": ["replay", "--store", s, "-q"],
        "export": ["export", "--store", s, "--out", str(tmp_path / "m.json")],
        "report": ["report", "--store", s, "--out", str(tmp_path / "report")],
        "resume": ["resume", "--store", s, "-q"],
    }


def test_a_damaged_cell_is_named_by_every_selector(store: Path) -> None:
    seq = 6
    cell_id = json.loads(_bodies(store)[seq])["cell_id"]
    _edit_body(store, seq)
    label = f"DAMAGED (tamper) at seq {seq}"
    for args in (["--cell", cell_id, "--pretty"], ["--cell", cell_id], ["--seq", str(seq),
                 "--pretty"], ["--seq", str(seq)], []):
        res = _ect("store", "show", str(store), *args)
        assert res.exit_code == 3, (args, res.output)
        assert label in _line(res), (args, res.output)
    full = _ect("store", "verify", "--full", str(store))
    assert full.exit_code == 1 and full.stdout.startswith(f"{store}: {label}: ")


def test_a_truncated_store_is_damage_to_every_command(store: Path, tmp_path: Path) -> None:
    data = store.read_bytes()
    store.write_bytes(data[: len(data) // 2])
    verify = _ect("store", "verify", str(store))
    assert verify.exit_code == 1
    assert verify.stdout.startswith(f"{store}: DAMAGED (corrupt) at no single record: ")
    for name, args in _readers(store, tmp_path).items():
        res = _ect(*args)
        assert res.exit_code == 3, (name, res.output)
        assert "DAMAGED (corrupt) at no single record" in _line(res), (name, res.output)
        assert "not a run store" not in res.output, name


@pytest.mark.parametrize("content", [b"hello\n", b""])
def test_a_foreign_file_is_a_usage_error_to_every_command(tmp_path: Path, content: bytes) -> None:
    other = tmp_path / "garbage.db"
    other.write_bytes(content)
    for name, args in {"verify": ["store", "verify", str(other)],
                       **_readers(other, tmp_path)}.items():
        res = _ect(*args)
        assert res.exit_code == 2, (name, res.output)
        assert f"{other}: not an ect run store (" in _line(res), (name, res.output)
        assert "DAMAGED" not in res.output, name
    assert other.read_bytes() == content


def test_verify_json_answers_on_stdout_for_a_foreign_file(tmp_path: Path) -> None:
    other = tmp_path / "garbage.db"
    other.write_bytes(b"hello\n")
    res = _ect("store", "verify", str(other), "--json")
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["damage"] == "not_a_store"


def test_a_bad_checkpoint_file_is_a_usage_error(store: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n", "utf-8")
    res = _ect("store", "verify", str(store), "--checkpoint", str(notes))
    assert res.exit_code == 2 and "DAMAGED" not in res.output
    assert _line(res).startswith(f"ect: --checkpoint {notes}: not a store checkpoint document")
    res = _ect("store", "verify", str(store), "--checkpoint", str(tmp_path / "nope"))
    assert res.exit_code == 2 and "no such file" in _line(res)
    # the store's own checkpoint, and an explicit copy of it, still verify
    assert _ect("store", "verify", str(store)).exit_code == 0
    own = _ect("store", "verify", str(store), "--checkpoint", f"{store}.checkpoint")
    assert own.exit_code == 0, own.output
