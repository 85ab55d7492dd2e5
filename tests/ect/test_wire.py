"""Strict parsing of the wire objects: round trips, and path-naming rejections."""

from __future__ import annotations

import copy

import pytest

from runner.ect import (
    Certificate,
    Contract,
    Decision,
    Ledger,
    Reason,
    Receipt,
    WireFormatError,
)
from runner.errors import FormatError
from tests.ect.builders import receipt_json, valid_triple


def test_round_trip_is_identity() -> None:
    contract, ledger, cert = valid_triple(extra=3)
    assert Contract.from_json(contract).to_json() == contract
    assert Ledger.from_json(ledger).to_json() == ledger
    assert Certificate.from_json(cert).to_json() == cert


def test_wire_error_is_a_format_error() -> None:
    assert issubclass(WireFormatError, FormatError)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c["claims"][1]["transform"]["params"].__setitem__("x", 1), None),
        (
            lambda c: c["claims"][1]["transform"].__setitem__("x", 1),
            "certificate.claims[1].transform: unknown field 'x'",
        ),
        (lambda c: c.__setitem__("extra", 1), "certificate: unknown field 'extra'"),
        (lambda c: c.pop("ledger_digest"), "certificate: missing field 'ledger_digest'"),
        (
            lambda c: c.__setitem__("format", "ect.certificate/2"),
            "certificate.format: unsupported format",
        ),
        (
            lambda c: c["claims"][0].__setitem__("value", True),
            "certificate.claims[0].value: expected a number, string or null, got boolean",
        ),
        (lambda c: c["claims"][0].__setitem__("value", [[1]]), "certificate.claims[0].value[0]"),
        (lambda c: c["claims"][0].__setitem__("value", {"a": 1}), "certificate.claims[0].value"),
        (
            lambda c: c["claims"][0].__setitem__("value", 2**53),
            "integer outside the IEEE-754 safe range",
        ),
        (lambda c: c["claims"][0].__setitem__("value", float("nan")), "not finite"),
        (lambda c: c["claims"][0].__setitem__("value", "\ud800"), "lone surrogate"),
        (
            lambda c: c["claims"][0].__setitem__("evidence", "r-0001"),
            "certificate.claims[0].evidence: expected an array",
        ),
        (
            lambda c: c["claims"][0]["evidence"].__setitem__(0, 7),
            "certificate.claims[0].evidence[0]: expected a string",
        ),
        (
            lambda c: c.__setitem__("descriptor_digest", "sha256:XYZ"),
            "certificate.descriptor_digest",
        ),
        (
            lambda c: c.__setitem__("claims", {}),
            "certificate.claims: expected an array, got object",
        ),
        (
            lambda c: c["claims"][0].__setitem__("slot", ""),
            "certificate.claims[0].slot: invalid identifier",
        ),
    ],
)
def test_certificate_rejections_name_the_path(mutate, message) -> None:
    _, _, cert = valid_triple()
    bad = copy.deepcopy(cert)
    mutate(bad)
    if message is None:
        # Unknown params are a *verifier* reason (transform.bad_params), not a parse error.
        Certificate.from_json(bad)
        return
    with pytest.raises(WireFormatError) as info:
        Certificate.from_json(bad)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda c: c["slots"]["total"]["transforms"][0]["params"].__setitem__("x", 1),
            "contract.slots.total.transforms[0]: op 'sum': unknown param(s) ['x']",
        ),
        (
            lambda c: c["slots"]["total"]["transforms"][0].__setitem__("op", "eval"),
            "contract.slots.total.transforms[0]",
        ),
        (
            lambda c: c["slots"]["total"]["tolerance"].__setitem__("abs", True),
            "contract.slots.total.tolerance.abs: expected an integer, got boolean",
        ),
        (lambda c: c["slots"]["total"]["tolerance"].__setitem__("abs", -1), "must be >= 0"),
        (
            lambda c: c["slots"]["total"].__setitem__("nullable", 0),
            "contract.slots.total.nullable: expected a boolean",
        ),
        (
            lambda c: c["slots"]["total"]["scope"].__setitem__("planet", ["x"]),
            "contract.slots.total.scope: unknown field 'planet'",
        ),
        (
            lambda c: c["slots"]["total"]["scope"].__setitem__(
                "dates", {"start": "2026-03-09", "end": "2026-03-01"}
            ),
            "start is after end",
        ),
        (
            lambda c: c["slots"]["total"]["scope"].__setitem__("dates", ["2026-02-30"]),
            "contract.slots.total.scope.dates[0]: expected an ISO date",
        ),
        (lambda c: c["slots"]["total"]["scope"].__setitem__("entity", []), "must not be empty"),
        (
            lambda c: c["slots"]["total"]["cardinality"].__setitem__("min", 9),
            "min is greater than max",
        ),
        (lambda c: c["slots"].pop("days"), "missing spec for required slot 'days'"),
        (
            lambda c: c["slots"].__setitem__("other", c["slots"]["days"]),
            "slot 'other' is not required",
        ),
        (
            lambda c: c["descriptor"].__setitem__("task_id", "w11-x"),
            "differs from the contract task_id",
        ),
        (lambda c: c["descriptor"]["required_slots"].append("total"), "duplicate slot name"),
        (
            lambda c: c["descriptor"].__setitem__("parameters", {"k": float("inf")}),
            "contract.descriptor.parameters.k: number is not finite",
        ),
    ],
)
def test_contract_rejections_name_the_path(mutate, message) -> None:
    contract, _, _ = valid_triple()
    bad = copy.deepcopy(contract)
    mutate(bad)
    with pytest.raises(WireFormatError) as info:
        Contract.from_json(bad)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("exec_status", "fine", "receipt.exec_status: expected one of ['ok', 'error']"),
        ("validation", None, "receipt.validation: expected a string, got null"),
        ("scope", {"entity": "S03"}, "receipt.scope: missing field 'attribute'"),
        ("value_sha256", "sha256:" + "A" * 64, "receipt.value_sha256"),
        ("receipt_id", "r 1", "receipt.receipt_id: invalid identifier"),
    ],
)
def test_receipt_rejections(field, value, message) -> None:
    obj = receipt_json("r-0001", 5)
    obj[field] = value
    with pytest.raises(WireFormatError) as info:
        Receipt.from_json(obj)
    assert message in str(info.value)


def test_contract_optional_cardinality_and_list_dates() -> None:
    contract, _, _ = valid_triple()
    spec = contract["slots"]["days"]
    del spec["cardinality"]
    spec["scope"]["dates"] = ["2026-03-01", "2026-03-02"]
    parsed = Contract.from_json(contract)
    assert parsed.slots["days"].cardinality is None
    assert parsed.slots["days"].scope.dates == ("2026-03-01", "2026-03-02")
    assert parsed.to_json() == contract


def test_decision_round_trip_and_bool() -> None:
    d = Decision("continue", (Reason("coverage.missing_slot", "days", "no claim"),), ("days",))
    assert not d and not d.complete and d.families == {"coverage"}
    assert Decision.from_json(d.to_json()) == d
    ok = Decision("complete", (), ())
    assert ok and ok.complete
    with pytest.raises(ValueError):
        Decision("complete", d.reasons, ())
    with pytest.raises(ValueError):
        Decision("continue", (), ())
    with pytest.raises(WireFormatError):
        Decision.from_json(
            {
                "decision": "complete",
                "reasons": [{"code": "x.y", "slot": None, "detail": ""}],
                "missing_slots": [],
            }
        )
