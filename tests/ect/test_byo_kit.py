"""Issue 19 item 7 on the verifier side: `ect digest`, whole codes in --explain, precise details."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli._digest import digest_command
from runner.ect import verify_bytes

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
AGG = EXAMPLES / "aggregation"


def _digest(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(digest_command, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_digest_gives_the_digests_a_certificate_carries() -> None:
    cert = json.loads((AGG / "certificate.json").read_text())
    assert _digest("descriptor", str(AGG / "contract.json")) == (0, cert["descriptor_digest"] + "\n", "")
    contract = json.loads((AGG / "contract.json").read_text())
    code, out, _ = _digest("descriptor", "-", stdin=json.dumps(contract["descriptor"]))  # noqa: TID251
    assert (code, out.strip()) == (0, cert["descriptor_digest"])
    assert _digest("ledger", str(AGG / "ledger.json"))[1].strip() == cert["ledger_digest"]
    receipt = json.loads((AGG / "ledger.json").read_text())["receipts"][0]
    value = json.dumps(receipt["value"])  # noqa: TID251 - CLI input
    assert _digest("value", "-", stdin=value)[1].strip() == receipt["value_sha256"]
    code, out, _ = _digest("receipt", "-", stdin=json.dumps(receipt))  # noqa: TID251
    assert code == 0 and out.startswith("sha256:")


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["ledger", str(AGG / "contract.json")], None, "unknown field 'descriptor'"),
        (["args", "-"], '{"a": 1, "a": 2}', "duplicate key 'a'"),
        (["value", "-"], '{"an": "object"}', "expected a number, string or null"),
        (["value", "/no/such/file"], None, "cannot read /no/such/file"),
    ],
)
def test_digest_refuses_bad_input_in_one_line(args: list[str], stdin: str | None, message: str) -> None:
    code, out, err = _digest(*args, stdin=stdin)
    assert code == 2 and out == ""
    assert err.startswith("ect: ") and message in err and err.count("\n") == 1


def test_explain_never_cuts_reason_codes_when_piped() -> None:
    # Piped stderr makes rich assume 80 columns; the longest codes used to end in an ellipsis.
    args = ["--contract", str(AGG / "contract.json"),
            "--ledger", str(EXAMPLES / "top-k" / "ledger.json"),
            "--certificate", str(AGG / "certificate.json"), "--explain"]  # fmt: skip
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run([sys.executable, "-m", "runner", "verify", *args], capture_output=True,
                          text=True, timeout=120, env=env, check=False)  # fmt: skip
    assert proc.returncode == 1
    codes = {r["code"] for r in json.loads(proc.stdout)["reasons"]}
    assert "binding.ledger_digest_mismatch" in codes  # 30 characters
    table = proc.stderr.split("\n- ", 1)[0]
    assert "…" not in proc.stderr
    for code in codes:
        assert code in table, code


def test_wrong_parameter_is_named_in_the_detail() -> None:
    texts = [(EXAMPLES / "top-k" / f"{n}.json").read_bytes()
             for n in ("contract", "ledger", "certificate-wrong-k")]  # fmt: skip
    [reason] = verify_bytes(*texts)[0].reasons
    assert reason.code == "transform.not_permitted"
    assert reason.detail == "op 'top_k' is permitted, but not with these params: k=3 (permitted: 2)"
    cert = json.loads(texts[2])
    cert["claims"][0]["transform"] = {"op": "sort", "params": {"order": "desc"}}
    [reason] = verify_bytes(texts[0], texts[1], json.dumps(cert))[0].reasons  # noqa: TID251
    assert reason.detail == "op 'sort' is not permitted for this slot (allowed ops: top_k)"
