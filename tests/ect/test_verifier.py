"""The verifier of docs/formats.md §8: one scenario per reason code, order, ablation, fail-closed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from runner.ect import (
    CHECK_FAMILIES,
    REASON_CODES,
    Certificate,
    Contract,
    Decision,
    Ledger,
    _verifier,
    value_digest,
    verify,
    verify_bytes,
    verify_json,
    verify_unsafe_ablated,
)
from tests.ect.builders import (
    claim,
    op,
    rebind,
    receipt_json,
    spec,
    triple,
    valid_triple,
)

Triple = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]


def _edit_receipt(t: Triple, index: int, **changes: Any) -> Triple:
    contract, ledger, cert = t
    r = ledger["receipts"][index]
    for k, v in changes.items():
        if k in ("entity", "attribute", "level", "date"):
            r["scope"][k] = v
        else:
            r[k] = v
    if "value" in changes:
        r["value_sha256"] = value_digest(r["value"])
    rebind(contract, ledger, cert)
    return t


def _base() -> Triple:
    return valid_triple(extra=3)


def _one(
    transform: dict[str, Any], receipts: list[dict[str, Any]], value: Any, **kw: Any
) -> Triple:
    """A two-slot case: slot 'x' with ``transform`` over ``receipts``; slot 'n' counts them."""
    ids = [r["receipt_id"] for r in receipts]
    slots = {"x": spec(transform, **kw), "n": spec(op("count"))}
    claims = [claim("x", value, ids, transform), claim("n", len(ids), ids, op("count"))]
    return triple(slots, receipts, claims)


def r(n: int, value: Any, **kw: Any) -> dict[str, Any]:
    return receipt_json(f"r-{n:04d}", value, **kw)


# code -> a scenario producing it. Each is a *single* defect on an otherwise valid input.
def s_malformed_json() -> Any:
    _, led, x = _base()
    return ("bytes", b"{", led, x)


def s_malformed_contract() -> Triple:
    c, led, x = _base()
    c["slots"]["total"]["extra"] = 1
    return c, led, x


def s_malformed_ledger() -> Triple:
    c, led, x = _base()
    led["receipts"] = {}
    return c, led, x


def s_malformed_certificate() -> Triple:
    c, led, x = _base()
    x["note"] = "trust me"
    return c, led, x


def s_descriptor_digest() -> Triple:
    c, led, x = _base()
    c2 = copy.deepcopy(c)
    c2["descriptor"]["parameters"]["end"] = "2026-03-08"
    rebind(c2, led, x)  # digest of a *different* descriptor
    return c, led, x


def s_task_mismatch() -> Triple:
    c, led, x = _base()
    x["task_id"] = "w10-aggregation-1"
    return c, led, x


def s_ledger_digest() -> Triple:
    c, led, x = _base()
    led2 = copy.deepcopy(led)
    led2["receipts"].pop()
    rebind(c, led2, x)
    return c, led, x


def s_duplicate_receipt_id() -> Triple:
    c, led, x = _base()
    led["receipts"].append(copy.deepcopy(led["receipts"][0]))
    rebind(c, led, x)
    return c, led, x


def s_conflicting_receipt_id() -> Triple:
    c, led, x = _base()
    other = copy.deepcopy(led["receipts"][0])
    other["source_path"] = "/result/other"
    led["receipts"].append(other)
    rebind(c, led, x)
    return c, led, x


def s_missing_slot() -> Triple:
    c, led, x = _base()
    x["claims"].pop()
    return c, led, x


def s_duplicate_slot() -> Triple:
    c, led, x = _base()
    x["claims"].append(copy.deepcopy(x["claims"][1]))
    return c, led, x


def s_extra_slot() -> Triple:
    c, led, x = _base()
    extra = copy.deepcopy(x["claims"][1])
    extra["slot"] = "bonus"
    x["claims"].append(extra)
    return c, led, x


def s_none_cited() -> Triple:
    c, led, x = _base()
    x["claims"][1]["evidence"] = []
    return c, led, x


def s_duplicate_citation() -> Triple:
    c, led, x = _base()
    x["claims"][1]["evidence"].append("r-0001")
    return c, led, x


def s_unknown_receipt() -> Triple:
    c, led, x = _base()
    x["claims"][1]["evidence"][0] = "r-9999"
    return c, led, x


def s_wrong_task() -> Triple:
    return _edit_receipt(_base(), 0, task_id="w10-aggregation-9")


def s_exec_error() -> Triple:
    return _edit_receipt(_base(), 0, exec_status="error")


def s_invalid() -> Triple:
    return _edit_receipt(_base(), 0, validation="invalid")


def s_value_digest() -> Triple:
    return _edit_receipt(_base(), 0, value_sha256=value_digest(1))


def s_conflicting_receipts() -> Triple:
    c, led, x = _base()
    led["receipts"].append(r(11, 41251, date="2026-03-01"))
    rebind(c, led, x)
    return c, led, x


def s_entity() -> Triple:
    return _edit_receipt(_base(), 0, entity="S99")


def s_attribute() -> Triple:
    return _edit_receipt(_base(), 0, attribute="units")


def s_level() -> Triple:
    return _edit_receipt(_base(), 0, level="region")


def s_date() -> Triple:
    return _edit_receipt(_base(), 0, date="2026-02-28")


def s_cardinality() -> Triple:
    c, led, x = _base()
    c["slots"]["days"]["cardinality"] = {"min": 8, "max": 9}
    rebind(c, led, x)
    return c, led, x


def s_duplicate_key() -> Triple:
    rs = [r(1, 5, date="2026-03-01"), r(2, 5, date="2026-03-01")]
    return _one(op("sum"), rs, 10)


def s_unknown_op() -> Triple:
    c, led, x = _base()
    x["claims"][0]["transform"] = op("eval", code="1+1")
    return c, led, x


def s_bad_params() -> Triple:
    c, led, x = _base()
    x["claims"][0]["transform"] = op("sum", weight=2)
    return c, led, x


def s_not_permitted() -> Triple:
    c, led, x = _base()
    x["claims"][0]["transform"] = op("max")
    x["claims"][0]["value"] = 50125
    return c, led, x


def s_mismatch() -> Triple:
    c, led, x = _base()
    x["claims"][0]["value"] += 1
    return c, led, x


def s_null_not_allowed() -> Triple:
    rs = [r(1, None)]
    return _one(op("all_null"), rs, None, nullable=False)


def s_null_input() -> Triple:
    rs = [r(1, 3, date="2026-03-01"), r(2, None, date="2026-03-02")]
    return _one(op("sum"), rs, 3)


def s_not_null() -> Triple:
    rs = [r(1, 3)]
    return _one(op("all_null"), rs, None, nullable=True)


def s_empty_input() -> Triple:
    c, led, x = _one(op("mean"), [r(1, 3)], 3)
    x["claims"][0]["evidence"] = []
    return c, led, x


def s_arity() -> Triple:
    rs = [r(1, 3, date="2026-03-01"), r(2, 4, date="2026-03-02")]
    return _one(op("identity"), rs, 3)


def s_type_error() -> Triple:
    rs = [r(1, "three", date="2026-03-01"), r(2, 4, date="2026-03-02")]
    return _one(op("sum"), rs, 7)


def s_missing_input() -> Triple:
    rs = [r(1, 3, date="2026-03-01"), r(2, 4, date="2026-03-02")]
    return _one(op("diff", a="2026-03-03", b="2026-03-01"), rs, 1)


def s_ambiguous_input() -> Triple:
    rs = [r(1, 3, date="2026-03-01"), r(2, 4, date="2026-03-02")]  # one entity, two values
    return _one(op("argmax"), rs, "S03")


def s_unused_input() -> Triple:
    rs = [r(1, 3, date="2026-03-01"), r(2, 4, date="2026-03-02"), r(3, 5, date="2026-03-03")]
    return _one(op("diff", a="2026-03-02", b="2026-03-01"), rs, 1)


def s_division_by_zero() -> Triple:
    rs = [r(1, 0, date="2026-03-01"), r(2, 4, date="2026-03-02")]
    return _one(op("ratio", a="2026-03-02", b="2026-03-01"), rs, 0)


def s_internal(monkeypatch: pytest.MonkeyPatch) -> Triple:
    def boom(_: Any) -> str:
        raise RuntimeError("simulated digest failure")

    monkeypatch.setattr(_verifier, "ledger_digest", boom)
    return _base()


SCENARIOS: dict[str, Callable[..., Any]] = {
    "adapter.malformed_json": s_malformed_json,
    "adapter.malformed_contract": s_malformed_contract,
    "adapter.malformed_ledger": s_malformed_ledger,
    "adapter.malformed_certificate": s_malformed_certificate,
    "adapter.descriptor_digest_mismatch": s_descriptor_digest,
    "binding.task_mismatch": s_task_mismatch,
    "binding.ledger_digest_mismatch": s_ledger_digest,
    "binding.duplicate_receipt_id": s_duplicate_receipt_id,
    "binding.conflicting_receipt_id": s_conflicting_receipt_id,
    "coverage.missing_slot": s_missing_slot,
    "coverage.duplicate_slot": s_duplicate_slot,
    "coverage.extra_slot": s_extra_slot,
    "evidence.none_cited": s_none_cited,
    "evidence.duplicate_citation": s_duplicate_citation,
    "evidence.unknown_receipt": s_unknown_receipt,
    "evidence.wrong_task": s_wrong_task,
    "evidence.exec_error": s_exec_error,
    "evidence.invalid": s_invalid,
    "evidence.value_digest_mismatch": s_value_digest,
    "evidence.conflicting_receipts": s_conflicting_receipts,
    "scope.entity_mismatch": s_entity,
    "scope.attribute_mismatch": s_attribute,
    "scope.level_mismatch": s_level,
    "scope.date_mismatch": s_date,
    "scope.cardinality": s_cardinality,
    "scope.duplicate_key": s_duplicate_key,
    "transform.unknown_op": s_unknown_op,
    "transform.bad_params": s_bad_params,
    "transform.not_permitted": s_not_permitted,
    "replay.mismatch": s_mismatch,
    "replay.null_not_allowed": s_null_not_allowed,
    "replay.null_input": s_null_input,
    "replay.not_null": s_not_null,
    "replay.empty_input": s_empty_input,
    "replay.arity": s_arity,
    "replay.type_error": s_type_error,
    "replay.missing_input": s_missing_input,
    "replay.ambiguous_input": s_ambiguous_input,
    "replay.unused_input": s_unused_input,
    "replay.division_by_zero": s_division_by_zero,
    "internal.exception": s_internal,
}


def _run(code: str, monkeypatch: pytest.MonkeyPatch) -> Decision:
    fn = SCENARIOS[code]
    made = fn(monkeypatch) if code == "internal.exception" else fn()
    if made[0] == "bytes":
        from runner.canonical import canonical_bytes

        return verify_bytes(made[1], canonical_bytes(made[2]), canonical_bytes(made[3]))[0]
    return verify_json(*made)


def test_every_reason_code_has_a_scenario() -> None:
    assert set(SCENARIOS) == set(REASON_CODES)
    assert {c.split(".")[0] for c in REASON_CODES} == set(CHECK_FAMILIES)


@pytest.mark.parametrize("code", sorted(REASON_CODES))
def test_reason_code_is_reported(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    decision = _run(code, monkeypatch)
    assert decision.decision == "continue" and not decision
    assert code in decision.codes, decision.to_json()
    for reason in decision.reasons:
        assert reason.code in REASON_CODES
        assert reason.detail and "\n" not in reason.detail


def test_valid_inputs_are_complete() -> None:
    decision = verify_json(*valid_triple(extra=3))
    assert decision.complete and bool(decision)
    assert decision.to_json() == {"decision": "complete", "reasons": [], "missing_slots": []}


@pytest.mark.parametrize(
    ("code", "slot"),
    [
        ("coverage.missing_slot", "days"),
        ("evidence.unknown_receipt", "days"),
        ("scope.cardinality", "days"),
        ("transform.bad_params", "total"),
        ("replay.mismatch", "total"),
        ("binding.task_mismatch", None),
        ("adapter.descriptor_digest_mismatch", None),
    ],
)
def test_reasons_carry_their_slot(
    code: str, slot: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    decision = _run(code, monkeypatch)
    assert [r.slot for r in decision.reasons if r.code == code] and all(
        r.slot == slot for r in decision.reasons if r.code == code
    )


def test_missing_slots_lists_unsatisfied_required_slots() -> None:
    c, led, x = _base()
    x["claims"][0]["value"] += 1  # total fails replay
    x["claims"].pop()  # days missing
    d = verify_json(c, led, x)
    assert d.missing_slots == ("total", "days")
    # A global failure alone leaves the slots' own checks intact.
    c, led, x = s_task_mismatch()
    assert verify_json(c, led, x).missing_slots == ()
    # A certificate that does not parse satisfies nothing.
    c, led, x = s_malformed_certificate()
    assert verify_json(c, led, x).missing_slots == ("total", "days")


def test_every_failing_reason_is_reported_in_step_order() -> None:
    c, led, x = _base()
    x["task_id"] = "w10-aggregation-1"  # binding
    x["claims"][1]["evidence"][0] = "r-9999"  # evidence (days)
    x["claims"][0]["transform"] = op("max")  # transform (total)
    x["descriptor_digest"] = "sha256:" + "1" * 64  # adapter
    d = verify_json(c, led, x)
    assert d.codes == (
        "adapter.descriptor_digest_mismatch",
        "binding.task_mismatch",
        "transform.not_permitted",
        "evidence.unknown_receipt",
        "scope.cardinality",  # 6 distinct receipts resolve; 7 are required
    )
    order = [CHECK_FAMILIES.index(r.family) for r in d.reasons[:2]]
    assert order == sorted(order)


def test_conflicting_receipts_uses_only_valid_receipts() -> None:
    c, led, x = _base()
    extra = r(11, 41251, date="2026-03-01", validation="invalid")
    led["receipts"].append(extra)
    rebind(c, led, x)
    assert verify_json(c, led, x).complete  # an invalid receipt is no contradiction
    led["receipts"][-1] = r(11, 41250, date="2026-03-01")  # same value: no contradiction
    rebind(c, led, x)
    assert verify_json(c, led, x).complete


def test_tolerance_applies_to_numbers_only() -> None:
    rs = [r(1, 1, date="2026-03-01"), r(2, 2, date="2026-03-02"), r(3, 2, date="2026-03-03")]
    c, led, x = _one(op("mean"), rs, 1.6667, tol=0.001)
    assert verify_json(c, led, x).complete
    x["claims"][0]["value"] = 1.67
    assert "replay.mismatch" in verify_json(c, led, x).codes
    # exact float division is accepted with zero tolerance
    c, led, x = _one(op("mean"), rs, 5 / 3, tol=0)
    assert verify_json(c, led, x).complete
    c, led, x = _one(op("collect"), rs, [1, 2, 2.0001], tol=1)
    assert "replay.mismatch" in verify_json(c, led, x).codes


def test_membership_receipts_ignore_dates() -> None:
    rs = [
        r(1, "R1", entity="S01", attribute="parent", date=None),
        r(2, 10, entity="S01", attribute="units", date="2026-03-01"),
    ]
    scope = {"attribute": ["parent", "units"], "dates": ["2026-03-01"]}
    c, led, x = _one(op("grouped_sum_top_k", k=1, order="desc"), rs, ["R1"], scope=scope)
    assert verify_json(c, led, x).complete
    rs[0]["scope"]["attribute"] = "owner"  # no longer a membership receipt: dates apply
    c, led, x = _one(op("grouped_sum_top_k", k=1, order="desc"), rs, ["R1"], scope=scope)
    codes = verify_json(c, led, x).codes
    assert "scope.date_mismatch" in codes and "scope.attribute_mismatch" in codes


def test_ablation_drops_only_the_named_family() -> None:
    c, led, x = s_not_permitted()
    C, L, X = Contract.from_json(c), Ledger.from_json(led), Certificate.from_json(x)
    assert verify(C, L, X).codes == ("transform.not_permitted",)
    # Without the transform check, max replays to the claimed value: the unsafe verifier passes.
    assert verify_unsafe_ablated(C, L, X, without=frozenset({"transform"})).complete
    c, led, x = s_mismatch()
    C, L, X = Contract.from_json(c), Ledger.from_json(led), Certificate.from_json(x)
    assert verify_unsafe_ablated(C, L, X, without=frozenset({"replay"})).complete
    assert not verify_unsafe_ablated(C, L, X, without=frozenset({"coverage", "scope"}))
    with pytest.raises(ValueError):
        verify_unsafe_ablated(C, L, X, without=frozenset({"internal"}))
    with pytest.raises(ValueError):
        verify_unsafe_ablated(C, L, X, without=frozenset({"vibes"}))


def test_ablating_transform_still_refuses_an_unknown_op() -> None:
    c, led, x = s_unknown_op()
    C, L, X = Contract.from_json(c), Ledger.from_json(led), Certificate.from_json(x)
    d = verify_unsafe_ablated(C, L, X, without=frozenset({"transform"}))
    assert d.codes == ("replay.mismatch",)


def test_verify_never_raises_on_wrong_types() -> None:
    d = verify("contract", None, 3)  # type: ignore[arg-type]
    assert d.codes == ("internal.exception",)
    assert verify_json(object(), [], None).decision == "continue"


def test_decision_is_deterministic_and_pure() -> None:
    c, led, x = s_conflicting_receipts()
    snapshot = copy.deepcopy((c, led, x))
    first = verify_json(c, led, x)
    assert verify_json(c, led, x) == first
    assert (c, led, x) == snapshot  # inputs are not mutated


def test_require_complete_is_the_raising_form() -> None:
    from runner.ect import IncompleteCertificate, require_complete
    from runner.errors import VerificationError

    c, led, x = _base()
    typed = Contract.from_json(c), Ledger.from_json(led), Certificate.from_json(x)
    assert require_complete(*typed).complete
    c, led, x = s_mismatch()
    typed = Contract.from_json(c), Ledger.from_json(led), Certificate.from_json(x)
    with pytest.raises(IncompleteCertificate) as info:
        require_complete(*typed)
    assert isinstance(info.value, VerificationError)
    assert info.value.decision.codes == ("replay.mismatch",)
    assert "replay.mismatch" in str(info.value)


def test_explained_rows_mark_skipped_replay() -> None:
    from runner.ect import verify_json_explained

    decision, rows = verify_json_explained(*s_not_permitted())
    assert decision.codes == ("transform.not_permitted",)
    by_step = {(r.step, r.slot): r for r in rows}
    assert by_step[("4c", "total")].outcome == "fail"
    assert by_step[("4d", "total")].outcome == "skipped"
    assert by_step[("4d", "days")].outcome == "pass"
    assert [r.step for r in rows if r.slot is None] == ["1", "2a", "2b", "2c", "2e", "3"]
