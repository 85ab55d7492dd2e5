"""Reason codes, :class:`Reason` and :class:`Decision` (docs/formats.md §6, §8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from runner.canonical import RecordFormatError, read_str, spec
from runner.ect._wire import _Wire

__all__ = ["CHECK_FAMILIES", "REASON_CODES", "Decision", "Reason"]

# Check families in the order the verifier runs them (docs/formats.md §8).
CHECK_FAMILIES: tuple[str, ...] = (
    "adapter",
    "binding",
    "coverage",
    "evidence",
    "scope",
    "transform",
    "replay",
    "internal",
)

# Every reason code the verifier can emit -> one-line meaning. docs/formats.md lists exactly
# these (a test keeps the two in step). Codes are part of the wire format: never reuse one.
REASON_CODES: dict[str, str] = {
    # adapter: the inputs themselves
    "adapter.malformed_json": "an input is not strict JSON (bad UTF-8, duplicate key, NaN, too deep, truncated)",
    "adapter.malformed_contract": "the contract does not match the ect.contract/1 schema",
    "adapter.malformed_ledger": "the ledger does not match the ect.ledger/1 schema",
    "adapter.malformed_certificate": "the certificate does not match the ect.certificate/1 schema",
    "adapter.descriptor_digest_mismatch": "the certificate's descriptor_digest is not the digest of the contract's descriptor",
    # binding: certificate <-> contract <-> ledger
    "binding.task_mismatch": "the certificate's or the ledger's task_id differs from the contract's",
    "binding.ledger_digest_mismatch": "the certificate's ledger_digest is not the digest of the ledger",
    "binding.duplicate_receipt_id": "the ledger holds the same receipt twice",
    "binding.conflicting_receipt_id": "the ledger holds two different receipts with the same receipt_id",
    # coverage: slots
    "coverage.missing_slot": "a required slot has no claim",
    "coverage.duplicate_slot": "a slot is claimed more than once",
    "coverage.extra_slot": "a claim names a slot the contract does not require",
    # evidence: the cited receipts themselves
    "evidence.none_cited": "a claim cites no receipt",
    "evidence.duplicate_citation": "a claim cites the same receipt id more than once",
    "evidence.unknown_receipt": "a cited receipt id is not in the ledger",
    "evidence.wrong_task": "a cited receipt belongs to another task",
    "evidence.exec_error": "a cited receipt's tool call did not succeed (exec_status != ok)",
    "evidence.invalid": "a cited receipt failed validation (validation != valid)",
    "evidence.value_digest_mismatch": "a cited receipt's value_sha256 is not the ect/value/v1 digest of its value",
    "evidence.conflicting_receipts": "the ledger holds two valid receipts with the same scope key and different values",
    # scope: cited receipts against the slot's scope
    "scope.entity_mismatch": "a cited receipt's entity is outside the slot's scope",
    "scope.attribute_mismatch": "a cited receipt's attribute is outside the slot's scope",
    "scope.level_mismatch": "a cited receipt's level is outside the slot's scope",
    "scope.date_mismatch": "a cited receipt's date is outside the slot's dates",
    "scope.cardinality": "the number of distinct cited receipts is outside the slot's cardinality",
    "scope.duplicate_key": "two cited receipts share one scope key (entity, attribute, level, date)",
    # transform: the declared op
    "transform.unknown_op": "the claim's op is not in the closed transform language",
    "transform.bad_params": "the claim's params are not exactly the op's parameters",
    "transform.not_permitted": "the claim's op and params are not among those the contract permits for the slot",
    # replay: recomputation
    "replay.mismatch": "replaying the transform does not reproduce the claimed value within tolerance",
    "replay.null_not_allowed": "the claimed (or replayed) value is null but the slot is not nullable",
    "replay.null_input": "a cited value is null and the op is not all_null",
    "replay.not_null": "all_null was claimed but a cited value is not null",
    "replay.empty_input": "the op needs at least one input value",
    "replay.arity": "the op needs a different number of inputs (identity: one; top_k: at least k)",
    "replay.type_error": "a cited value or scope has the wrong type for the op (e.g. a string summed)",
    "replay.missing_input": "an input the op's params name is absent (a date, a window, a membership)",
    "replay.ambiguous_input": "an input the op needs is given more than once (same date, same entity)",
    "replay.unused_input": "a cited receipt takes no part in the replay",
    "replay.division_by_zero": "ratio with a zero denominator",
    # internal: fail closed
    "internal.exception": "the verifier raised internally; it fails closed to continue",
}


def _read_code(value: object, path: str) -> str:
    code = read_str(value, path)
    if code not in REASON_CODES:
        raise RecordFormatError(path, f"unknown reason code {code[:60]!r}")
    return code


@dataclass(frozen=True, slots=True)
class Reason(_Wire):
    """One failing check: ``family.name`` code, the slot it concerns (or ``None``), a detail."""

    code: str = field(metadata=spec(read=_read_code))
    slot: str | None
    detail: str

    _path = "reason"

    @property
    def family(self) -> str:
        return self.code.split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class Decision(_Wire):
    """The verifier's answer. ``bool(decision)`` is True iff it is ``complete``.

    ``missing_slots`` lists the required slots that are not satisfied: no claim, or a claim
    that failed a check (every reason whose ``slot`` names a required slot marks it).
    """

    decision: Literal["complete", "continue"]
    reasons: tuple[Reason, ...]
    missing_slots: tuple[str, ...]

    _path = "decision"

    def __post_init__(self) -> None:
        if self.decision not in ("complete", "continue"):
            raise ValueError(f"decision must be complete or continue, not {self.decision!r}")
        if self.decision == "complete" and (self.reasons or self.missing_slots):
            raise ValueError("a complete decision carries no reasons and no missing slots")
        if self.decision == "continue" and not self.reasons:
            raise ValueError("a continue decision needs at least one reason")

    @property
    def complete(self) -> bool:
        return self.decision == "complete"

    def __bool__(self) -> bool:
        return self.complete

    @property
    def families(self) -> frozenset[str]:
        return frozenset(r.family for r in self.reasons)

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(r.code for r in self.reasons)

