"""`ect verify` on the worked examples of docs/formats.md: stdout, exit codes, --explain."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from runner.cli._verify import COMMANDS, verify_command

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
CASES: list[dict[str, Any]] = json.loads((EXAMPLES / "index.json").read_text())["cases"]


def _args(case: dict[str, Any], *extra: str) -> list[str]:
    return [
        "--contract", str(EXAMPLES / case["contract"]),
        "--ledger", str(EXAMPLES / case["ledger"]),
        "--certificate", str(EXAMPLES / case["certificate"]),
        *extra,
    ]  # fmt: skip


def test_verify_is_registered() -> None:
    assert verify_command in COMMANDS and verify_command.name == "verify"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_examples_through_click(case: dict[str, Any]) -> None:
    result = CliRunner().invoke(verify_command, _args(case))
    assert result.exit_code == case["exit"], result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1  # exactly one JSON object on stdout
    decision = json.loads(lines[0])
    assert decision["decision"] == case["decision"]
    assert [r["code"] for r in decision["reasons"]] == case["codes"]
    assert decision["missing_slots"] == case["missing_slots"]
    assert result.stderr == ""


@pytest.mark.parametrize("as_json", [False, True])
def test_explain_keeps_stdout_one_object(as_json: bool) -> None:
    case = next(c for c in CASES if c["codes"] and c["codes"][0].startswith("evidence"))
    extra = ["--explain", "--json"] if as_json else ["--explain"]
    result = CliRunner().invoke(verify_command, _args(case, *extra))
    assert result.exit_code == 1
    assert json.loads(result.stdout)["decision"] == "continue"
    if as_json:
        explained = json.loads(result.stderr)
        steps = [c["step"] for c in explained["checks"]]
        assert steps[:6] == ["1", "2a", "2b", "2c", "2e", "3"]
        assert any(c["outcome"] == "fail" for c in explained["checks"])
    else:
        assert "ECT verification: continue" in result.stderr
        for family in (
            "adapter",
            "binding",
            "coverage",
            "evidence",
            "scope",
            "transform",
            "replay",
        ):
            assert family in result.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    case = CASES[0]
    args = _args(case)
    args[1] = str(tmp_path / "absent.json")
    result = CliRunner().invoke(verify_command, args)
    assert result.exit_code == 2
    assert "cannot read contract file" in result.stderr and result.stdout == ""
    args[1] = str(tmp_path)  # a directory
    assert CliRunner().invoke(verify_command, args).exit_code == 2
    assert CliRunner().invoke(verify_command, _args(case)[:4]).exit_code == 2  # no --certificate


def test_hostile_file_is_continue_not_usage(tmp_path: Path) -> None:
    bad = tmp_path / "cert.json"
    bad.write_bytes(b'{"a": NaN}')
    args = _args(CASES[0])
    args[5] = str(bad)
    result = CliRunner().invoke(verify_command, args)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["reasons"][0]["code"] == "adapter.malformed_json"


def test_help_documents_exit_codes() -> None:
    result = CliRunner().invoke(verify_command, ["--help"])
    assert result.exit_code == 0
    for text in (
        "--contract",
        "--ledger",
        "--certificate",
        "--explain",
        "0 complete",
        "2 usage error",
    ):
        assert text in result.output


def test_subprocess_end_to_end() -> None:
    # Once, through the real `ect` entry point (the app that collects every COMMANDS list).
    case = next(c for c in CASES if c["decision"] == "complete")
    cmd = [sys.executable, "-c", "from runner.cli import main; main()", "verify"]
    proc = subprocess.run(cmd + _args(case), capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"decision": "complete", "missing_slots": [], "reasons": []}
    assert proc.stdout.count(b"\n") == 1
