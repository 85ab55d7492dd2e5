"""Labels a newcomer meets (issue 29), each checked by its exact line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.canonical import atomic_write
from runner.cli._app import cli
from tests.faults import readonly_view

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "aggregation"


@pytest.mark.parametrize("which", ["--contract", "--ledger", "--certificate"])
def test_verify_reads_any_one_input_from_stdin_as_digest_does(which: str) -> None:
    files = {"--contract": EXAMPLE / "contract.json", "--ledger": EXAMPLE / "ledger.json",
             "--certificate": EXAMPLE / "certificate.json"}
    args = [x for k, p in files.items() for x in (k, "-" if k == which else str(p))]
    r = CliRunner().invoke(cli, ["verify", *args], input=files[which].read_bytes())
    assert r.exit_code == 0, r.output
    assert r.stdout == '{"decision":"complete","missing_slots":[],"reasons":[]}\n'


def test_verify_refuses_two_inputs_from_stdin() -> None:
    r = CliRunner().invoke(cli, ["verify", "--contract", "-", "--ledger", "-", "--certificate",
                                 str(EXAMPLE / "certificate.json")], input=b"{}")
    assert r.exit_code == 2
    assert r.output == "ect: at most one of --contract, --ledger and --certificate can be - (stdin)\n"


def test_a_failed_atomic_write_names_the_file_asked_for_not_its_temp_file(tmp_path: Path) -> None:
    # `ect export --out` (and every other atomic write) said ".m.json.tmp-1a2b3c: ..."
    target = tmp_path / "manifest.json"
    target.mkdir()  # the rename onto it fails
    with pytest.raises(IsADirectoryError) as e:
        atomic_write(target, b"{}")
    assert e.value.filename == str(target) and e.value.filename2 is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]  # temp file removed
    (tmp_path / "ro").mkdir()
    with readonly_view(tmp_path / "ro") as ro, pytest.raises(OSError) as e2:
        atomic_write(ro / "manifest.json", b"{}")
    assert str(e2.value) == f"[Errno 30] Read-only file system: '{ro}/manifest.json'"
