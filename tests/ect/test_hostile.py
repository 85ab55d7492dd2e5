"""Hostile input: every one is `continue` with a named reason, never a traceback, never complete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.ect import verify_bytes

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "aggregation"
CONTRACT = (EXAMPLES / "contract.json").read_bytes()
LEDGER = (EXAMPLES / "ledger.json").read_bytes()
CERT = (EXAMPLES / "certificate.json").read_bytes()


def _cert_with(fragment: str) -> bytes:
    """The valid certificate with ``fragment`` spliced in as the first claim's value."""
    obj = json.loads(CERT)
    text = json.dumps(obj)  # noqa: TID251 - builds test input, not a digest
    old = f'"value": {obj["claims"][0]["value"]}'
    assert old in text
    return text.replace(old, f'"value": {fragment}', 1).encode()


HOSTILE: dict[str, tuple[bytes, str]] = {
    "empty file": (b"", "adapter.malformed_json"),
    "truncated": (CERT[: len(CERT) // 3], "adapter.malformed_json"),
    "duplicate key": (
        CERT.replace(b'"task_id"', b'"task_id": "x", "task_id"', 1),
        "adapter.malformed_json",
    ),
    "NaN": (_cert_with("NaN"), "adapter.malformed_json"),
    "Infinity": (_cert_with("-Infinity"), "adapter.malformed_json"),
    "1e400": (_cert_with("1e400"), "adapter.malformed_json"),
    "huge int": (_cert_with("1" + "0" * 400), "adapter.malformed_certificate"),
    "int beyond 2**53": (_cert_with(str(2**53)), "adapter.malformed_certificate"),
    "too many digits": (_cert_with("9" * 5000), "adapter.malformed_json"),
    "deep nesting": (_cert_with("[" * 1000 + "]" * 1000), "adapter.malformed_json"),
    "nested 40": (_cert_with("[" * 40 + "]" * 40), "adapter.malformed_certificate"),
    "lone surrogate": (_cert_with('"\\ud800"'), "adapter.malformed_certificate"),
    "lone surrogate key": (
        CERT.replace(b"{", b'{"\\udfff": 1, ', 1),
        "adapter.malformed_certificate",
    ),
    "invalid utf-8": (CERT.replace(b"sha256", b"sha\xff256", 1), "adapter.malformed_json"),
    "byte order mark": (b"\xef\xbb\xbf" + CERT, "adapter.malformed_json"),
    "extra field": (CERT.replace(b"{", b'{"trust": true, ', 1), "adapter.malformed_certificate"),
    "array at top": (b"[" + CERT + b"]", "adapter.malformed_certificate"),
    "bool as number": (_cert_with("true"), "adapter.malformed_certificate"),
    "object as value": (_cert_with('{"$eval": "1+1"}'), "adapter.malformed_certificate"),
    "big string": (_cert_with('"' + "x" * 200_000 + '"'), "replay.mismatch"),
    "unicode value": (_cert_with('"\\u202e\\u0000 S03"'), "replay.mismatch"),
    "trailing garbage": (CERT + b"{}", "adapter.malformed_json"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_certificate(name: str) -> None:
    data, code = HOSTILE[name]
    decision, rows = verify_bytes(CONTRACT, LEDGER, data, explain=True)
    assert decision.decision == "continue"
    assert code in decision.codes, decision.to_json()
    assert all(len(r.detail) <= 300 and "\n" not in r.detail for r in decision.reasons)
    assert rows  # the explanation never comes back empty


@pytest.mark.parametrize(
    "name", ["truncated", "duplicate key", "deep nesting", "lone surrogate key"]
)
def test_hostile_contract_and_ledger(name: str) -> None:
    data, _ = HOSTILE[name]
    for texts in ((data, LEDGER, CERT), (CONTRACT, data, CERT)):
        decision, _ = verify_bytes(*texts)
        assert decision.decision == "continue"
        assert decision.families == {"adapter"}


def test_malformed_everything_reports_each_input() -> None:
    decision, _ = verify_bytes(b"{", b"[", b"nul")
    assert decision.codes == ("adapter.malformed_json",) * 3
    assert [r.detail.split(":")[0] for r in decision.reasons] == [
        "contract",
        "ledger",
        "certificate",
    ]
    assert decision.missing_slots == ()


def test_surrogate_detail_stays_encodable() -> None:
    decision, _ = verify_bytes(CONTRACT, LEDGER, HOSTILE["lone surrogate key"][0])
    for r in decision.reasons:
        r.detail.encode("utf-8")  # never raises
