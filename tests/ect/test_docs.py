"""docs/formats.md matches the code; the worked examples regenerate byte for byte."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import runner.ect
from runner.ect import CHECK_FAMILIES, OPS, REASON_CODES

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "formats.md").read_text()
FAMILIES = "|".join(CHECK_FAMILIES)
CODE_RE = re.compile(rf"`((?:{FAMILIES})\.[a-z_]+)`")


def test_every_reason_code_is_documented_and_vice_versa() -> None:
    documented = set(CODE_RE.findall(DOC))
    assert documented == set(REASON_CODES)


def test_reason_table_rows_match_meanings() -> None:
    rows = dict(re.findall(r"^\| `([a-z]+\.[a-z_]+)` \| (.+) \|$", DOC, flags=re.M))
    assert set(rows) == set(REASON_CODES)
    for code, meaning in REASON_CODES.items():
        assert rows[code].replace("`", "").startswith(meaning.split(" (")[0][:40]), code


def test_every_op_is_documented_and_vice_versa() -> None:
    table = re.findall(r"^\| `([a-z_]+)` \| `\{", DOC, flags=re.M)
    assert set(table) == set(OPS)
    assert len(table) == len(OPS)


def test_example_files_are_referenced() -> None:
    files = {
        p.relative_to(ROOT / "docs" / "examples").as_posix()
        for p in (ROOT / "docs" / "examples").rglob("*.json")
        if p.name != "index.json"
    }
    for name in files:
        assert f"`{name}`" in DOC, name


def test_examples_regenerate_identically() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_public_surface() -> None:
    assert set(runner.ect.__all__) == {
        "CERTIFICATE_FORMAT", "CHECK_FAMILIES", "CONTRACT_FORMAT", "LEDGER_FORMAT", "OPS",
        "REASON_CODES", "Cardinality", "Certificate", "Check", "Claim", "Contract",
        "ContractScope", "DateRange", "Decision", "Descriptor", "IncompleteCertificate", "Ledger", "Reason", "Receipt",
        "ReceiptScope", "ReplayError", "SlotSpec", "Transform", "Value", "WireFormatError",
        "args_digest", "check_transform", "check_value", "descriptor_digest", "is_iso_date",
        "json_schemas", "load_schema",
        "ledger_digest", "receipt_digest", "replay", "replay_exact", "require_complete", "response_digest",
        "value_digest", "values_match", "verify", "verify_bytes", "verify_json",
        "verify_json_explained", "verify_unsafe_ablated",
    }  # fmt: skip
    for name in runner.ect.__all__:
        assert hasattr(runner.ect, name)
