"""The ECT verifier: Algorithm 1 of the ECT paper as specified in docs/formats.md §8, fail closed.

Steps (numbered as in the comments below; the paper's order):

    1   adapter    the certificate's descriptor digest is the contract descriptor's digest
    2   binding    task ids agree; ledger digest; no duplicate / conflicting receipt ids
    2e  evidence   (beyond the paper) no two valid receipts share a scope key with different values
    3   coverage   every required slot claimed exactly once, no extra slot
    4   per claim, in certificate order:
    4a  evidence   cited receipts exist, belong to the task, succeeded, are valid, value digest
    4b  scope      entity, attribute, level, dates; cardinality; distinct scope keys
    4c  transform  op and exact params are among those the contract permits for the slot
    4d  replay     exact recomputation matches the claim within tolerance; null only if nullable

Unlike the paper's early returns, every step runs and every failing reason is reported, so the
feedback to the agent is complete; ``complete`` iff no reason at all. Any exception inside is a
``continue`` with ``internal.exception``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runner.canonical import JsonRecord, canonical_bytes, loads_strict
from runner.ect._digests import descriptor_digest, ledger_digest, value_digest
from runner.ect._errors import IncompleteCertificate, ReplayError
from runner.ect._reasons import CHECK_FAMILIES, Decision, Reason
from runner.ect._transforms import check_transform, replay_exact
from runner.ect._values import values_match
from runner.ect._wire import (
    Certificate,
    Claim,
    Contract,
    DateRange,
    Ledger,
    Receipt,
    SlotSpec,
)
from runner.errors import FormatError

__all__ = [
    "Check",
    "require_complete",
    "verify",
    "verify_bytes",
    "verify_json",
    "verify_json_explained",
    "verify_unsafe_ablated",
]

_MAX_DETAIL = 300
_ABLATABLE = frozenset(CHECK_FAMILIES) - {"internal"}


def _clip(text: str) -> str:
    # One line, bounded, and always encodable (a hostile lone surrogate becomes "\\ud800").
    text = " ".join(str(text).split()).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


@dataclass(frozen=True, slots=True)
class Check(JsonRecord):
    """One row of the ``--explain`` table: a verifier step for one slot (or globally)."""

    step: str
    family: str
    name: str
    slot: str | None
    outcome: str  # "pass" | "fail" | "skipped" | "ablated"
    codes: tuple[str, ...]
    note: str


MAX_REASONS_PER_CODE = 16
"""Reasons listed per (code, slot); the rest of a hostile input's repeats are counted in one
summary reason, so output and memory stay bounded (docs/formats.md, "Bounds")."""


class _Run:
    """Collects reasons (and, when explaining, one :class:`Check` per step).

    After :data:`MAX_REASONS_PER_CODE` reasons with one (code, slot), further ones are recorded
    as a shared placeholder (so every step still sees its failure) and folded into a single
    ``... and N more`` reason by :meth:`final`.
    """

    __slots__ = ("_counts", "_more", "checks", "reasons", "skip")

    def __init__(self, skip: frozenset[str], explain: bool) -> None:
        self.reasons: list[Reason] = []
        self.skip = skip
        self.checks: list[Check] | None = [] if explain else None
        self._counts: dict[tuple[str, str | None], int] = {}
        self._more: dict[tuple[str, str | None], Reason] = {}

    def fail(self, code: str, slot: str | None, detail: str) -> None:
        key = (code, slot)
        n = self._counts.get(key, 0) + 1
        self._counts[key] = n
        if n <= MAX_REASONS_PER_CODE:
            self.reasons.append(Reason(code, slot, _clip(detail)))
            return
        more = self._more.get(key)
        if more is None:
            more = self._more[key] = Reason(code, slot, "")
        self.reasons.append(more)

    def final(self, skip: frozenset[str]) -> list[Reason]:
        """The reasons to report: repeats past the cap folded into one reason per (code, slot),
        which takes the place of the first repeat."""
        if not self._more:
            return [r for r in self.reasons if r.family not in skip] if skip else self.reasons
        placeholders = {id(r): key for key, r in self._more.items()}
        out: list[Reason] = []
        emitted: set[tuple[str, str | None]] = set()
        for r in self.reasons:
            if skip and r.family in skip:
                continue
            key = placeholders.get(id(r))
            if key is None:
                out.append(r)
            elif key not in emitted:
                emitted.add(key)
                extra = self._counts[key] - MAX_REASONS_PER_CODE
                out.append(Reason(r.code, r.slot,
                                  f"... and {extra} more {r.code} reasons like the ones above"))
        return out

    def done(self, step: str, family: str, name: str, slot: str | None, mark: int) -> None:
        if self.checks is None:
            return
        if family in self.skip:
            self.checks.append(Check(step, family, name, slot, "ablated", (), "check disabled"))
            return
        codes = tuple(r.code for r in self.reasons[mark:] if r.family == family)
        outcome = "fail" if codes else "pass"
        self.checks.append(Check(step, family, name, slot, outcome, codes, ""))

    def skipped(self, step: str, family: str, name: str, slot: str | None, why: str) -> None:
        if self.checks is not None:
            outcome = "ablated" if family in self.skip else "skipped"
            self.checks.append(Check(step, family, name, slot, outcome, (), why))


# --- step 4b helpers -------------------------------------------------------------------------


def _scope(run: _Run, slot: str, spec: SlotSpec, receipts: Sequence[Receipt]) -> None:
    sc = spec.scope
    for r in receipts:
        rs = r.scope
        if sc.entity is not None and rs.entity not in sc.entity:
            run.fail(
                "scope.entity_mismatch",
                slot,
                f"receipt {r.receipt_id} entity {rs.entity!r} not in {list(sc.entity)}",
            )
        if sc.attribute is not None and rs.attribute not in sc.attribute:
            run.fail(
                "scope.attribute_mismatch",
                slot,
                f"receipt {r.receipt_id} attribute {rs.attribute!r} not in {list(sc.attribute)}",
            )
        if sc.level is not None and rs.level not in sc.level:
            run.fail(
                "scope.level_mismatch",
                slot,
                f"receipt {r.receipt_id} level {rs.level!r} not in {list(sc.level)}",
            )
        # Membership receipts (attribute "parent") are timeless: dates do not constrain them.
        if sc.dates is not None and rs.attribute != "parent":
            inside = rs.date in sc.dates
            if not inside:
                want = (
                    f"{sc.dates.start}..{sc.dates.end}"
                    if isinstance(sc.dates, DateRange)
                    else str(list(sc.dates))
                )
                run.fail(
                    "scope.date_mismatch",
                    slot,
                    f"receipt {r.receipt_id} date {rs.date!r} outside {want}",
                )
    if spec.cardinality is not None:
        n = len(receipts)
        lo, hi = spec.cardinality.min, spec.cardinality.max
        if not lo <= n <= hi:
            run.fail(
                "scope.cardinality",
                slot,
                f"{n} distinct cited receipt(s), the contract requires {lo}..{hi}",
            )
    seen: dict[tuple[Any, ...], str] = {}
    for r in receipts:
        key = r.scope.key
        if key in seen:
            run.fail(
                "scope.duplicate_key",
                slot,
                f"receipts {seen[key]} and {r.receipt_id} share scope key {list(key)}",
            )
        else:
            seen[key] = r.receipt_id


# --- the algorithm ---------------------------------------------------------------------------


def _check(run: _Run, contract: Contract, ledger: Ledger, certificate: Certificate) -> None:
    task = contract.task_id

    # Step 1 (adapter): the certificate names the frozen descriptor of this task.
    mark = len(run.reasons)
    if certificate.descriptor_digest != descriptor_digest(contract.descriptor):
        run.fail(
            "adapter.descriptor_digest_mismatch",
            None,
            f"certificate descriptor_digest {certificate.descriptor_digest} is not the digest "
            "of the contract's task descriptor",
        )
    run.done("1", "adapter", "descriptor digest", None, mark)

    # Step 2a (binding): task ids.
    mark = len(run.reasons)
    if certificate.task_id != task:
        run.fail(
            "binding.task_mismatch",
            None,
            f"certificate task_id {certificate.task_id!r} differs from the contract's {task!r}",
        )
    if ledger.task_id != task:
        run.fail(
            "binding.task_mismatch",
            None,
            f"ledger task_id {ledger.task_id!r} differs from the contract's {task!r}",
        )
    run.done("2a", "binding", "task ids", None, mark)

    # Step 2b (binding): the certificate is bound to exactly this ledger.
    mark = len(run.reasons)
    if certificate.ledger_digest != ledger_digest(ledger):
        run.fail(
            "binding.ledger_digest_mismatch",
            None,
            f"certificate ledger_digest {certificate.ledger_digest} is not the digest of the ledger",
        )
    run.done("2b", "binding", "ledger digest", None, mark)

    # Step 2c (binding): receipt ids are unique; the first occurrence is the one looked up.
    mark = len(run.reasons)
    by_id: dict[str, Receipt] = {}
    reported: set[str] = set()
    for r in ledger.receipts:
        first = by_id.get(r.receipt_id)
        if first is None:
            by_id[r.receipt_id] = r
        elif r.receipt_id not in reported:
            reported.add(r.receipt_id)
            if first == r:
                run.fail(
                    "binding.duplicate_receipt_id",
                    None,
                    f"receipt {r.receipt_id} appears more than once in the ledger",
                )
            else:
                run.fail(
                    "binding.conflicting_receipt_id",
                    None,
                    f"two different receipts carry the id {r.receipt_id}",
                )
    run.done("2c", "binding", "receipt ids", None, mark)

    # Step 2e (evidence, beyond the paper): the ledger does not contradict itself. Two valid,
    # successful receipts of this task with one scope key and different values are a trust-
    # boundary case; the loop routes it to needs_human. All-null keys claim nothing.
    mark = len(run.reasons)
    by_key: dict[tuple[Any, ...], list[Receipt]] = {}
    for r in by_id.values():
        if r.exec_status != "ok" or r.validation != "valid" or r.task_id != task:
            continue
        key = r.scope.key
        if key == (None, None, None, None):
            continue
        by_key.setdefault(key, []).append(r)
    for key, group in by_key.items():
        if len(group) < 2:
            continue
        values = {canonical_bytes(r.value) for r in group}
        if len(values) < 2:
            continue
        ids = {r.receipt_id for r in group}
        slot = next((c.slot for c in certificate.claims if ids.intersection(c.evidence)), None)
        run.fail(
            "evidence.conflicting_receipts",
            slot,
            f"receipts {', '.join(sorted(ids))} share scope key {list(key)} with different values",
        )
    run.done("2e", "evidence", "ledger consistency", None, mark)

    # Step 3 (coverage): each required slot exactly once, no slot the contract does not name.
    mark = len(run.reasons)
    counts: dict[str, int] = {}
    for c in certificate.claims:
        counts[c.slot] = counts.get(c.slot, 0) + 1
    for slot in contract.descriptor.required_slots:
        n = counts.get(slot, 0)
        if n == 0:
            run.fail("coverage.missing_slot", slot, f"required slot {slot!r} has no claim")
        elif n > 1:
            run.fail("coverage.duplicate_slot", slot, f"slot {slot!r} is claimed {n} times")
    for slot in counts:
        if slot not in contract.slots:
            run.fail(
                "coverage.extra_slot", slot, f"slot {slot!r} is not a required slot of the contract"
            )
    run.done("3", "coverage", "slots", None, mark)

    # Step 4: every claim for a required slot.
    digests: dict[str, bool] = {}  # receipt_id -> value digest ok, shared by the claims
    for claim in certificate.claims:
        spec = contract.slots.get(claim.slot)
        if spec is not None:
            _check_claim(run, task, claim, spec, by_id, digests)


def _value_digest_ok(r: Receipt, memo: dict[str, bool]) -> bool:
    ok = memo.get(r.receipt_id)
    if ok is None:
        ok = memo[r.receipt_id] = r.value_sha256 == value_digest(r.value)
    return ok


def _check_claim(
    run: _Run,
    task: str,
    claim: Claim,
    spec: SlotSpec,
    by_id: dict[str, Receipt],
    digests: dict[str, bool],
) -> None:
    slot = claim.slot

    # Step 4a (evidence): each cited receipt exists, belongs to the task, succeeded, is valid
    # and carries the right value digest.
    mark = len(run.reasons)
    if not claim.evidence:
        run.fail("evidence.none_cited", slot, "the claim cites no receipt")
    cited: list[Receipt] = []
    seen: set[str] = set()
    unresolved = False
    for rid in claim.evidence:
        if rid in seen:
            run.fail("evidence.duplicate_citation", slot, f"receipt {rid} is cited more than once")
            continue
        seen.add(rid)
        r = by_id.get(rid)
        if r is None:
            unresolved = True
            run.fail("evidence.unknown_receipt", slot, f"receipt {rid} is not in the ledger")
            continue
        cited.append(r)
        if r.task_id != task:
            run.fail("evidence.wrong_task", slot, f"receipt {rid} belongs to task {r.task_id!r}")
        if r.exec_status != "ok":
            run.fail(
                "evidence.exec_error", slot, f"receipt {rid} has exec_status {r.exec_status!r}"
            )
        if r.validation != "valid":
            run.fail("evidence.invalid", slot, f"receipt {rid} has validation {r.validation!r}")
        if not _value_digest_ok(r, digests):
            run.fail(
                "evidence.value_digest_mismatch",
                slot,
                f"receipt {rid} value_sha256 does not match its value",
            )
    run.done("4a", "evidence", "receipts", slot, mark)

    # Step 4b (scope): entity, attribute, level, dates; cardinality over distinct receipts;
    # no two cited receipts with one scope key (the same evidence counted twice).
    mark = len(run.reasons)
    _scope(run, slot, spec, cited)
    run.done("4b", "scope", "scope and cardinality", slot, mark)

    # Step 4c (transform): a closed-language op with exact params the contract permits.
    mark = len(run.reasons)
    well_formed = True
    try:
        check_transform(claim.transform)
    except ReplayError as e:
        well_formed = False
        run.fail(e.code, slot, e.detail)
    permitted = False
    if well_formed:
        # Both sides are well-formed closed-language params (ints are never bools there), so
        # Python equality coincides with canonical-JSON equality.
        op, params = claim.transform.op, claim.transform.params
        permitted = any(t.op == op and t.params == params for t in spec.transforms)
        if not permitted:
            run.fail("transform.not_permitted", slot, _not_permitted(claim, spec))
    run.done("4c", "transform", "op and params", slot, mark)

    # Step 4d (replay): recompute exactly and compare within tolerance; null only if nullable.
    mark = len(run.reasons)
    if claim.value is None and not spec.nullable:
        run.fail(
            "replay.null_not_allowed", slot, "the claimed value is null; the slot is not nullable"
        )
    if unresolved and "evidence" not in run.skip:
        run.skipped("4d", "replay", "recompute", slot, "a cited receipt is missing")
    elif not (permitted or (well_formed and "transform" in run.skip)):
        if well_formed or "transform" not in run.skip:
            run.skipped("4d", "replay", "recompute", slot, "the transform is not permitted")
        else:
            run.fail("replay.mismatch", slot, "a malformed transform cannot be replayed")
            run.done("4d", "replay", "recompute", slot, mark)
    else:
        try:
            value, exact = replay_exact(claim.transform, cited)
        except ReplayError as e:
            run.fail(e.code, slot, e.detail)
        else:
            if value is None and not spec.nullable and claim.value is not None:
                run.fail(
                    "replay.null_not_allowed", slot, "replay yields null; the slot is not nullable"
                )
            elif not values_match(claim.value, value, exact, spec.tolerance_abs):
                run.fail(
                    "replay.mismatch",
                    slot,
                    f"claimed {_show(claim.value)}, replay of {claim.transform.op} gives "
                    f"{_show(value)} (tolerance {spec.tolerance_abs})",
                )
        run.done("4d", "replay", "recompute", slot, mark)


def _not_permitted(claim: Claim, spec: SlotSpec) -> str:
    """Name what is wrong: the op, or for a permitted op the params whose values differ."""
    op, params = claim.transform.op, claim.transform.params
    same_op = [t for t in spec.transforms if t.op == op]
    if not same_op:
        allowed = ", ".join(dict.fromkeys(t.op for t in spec.transforms))
        return f"op {op!r} is not permitted for this slot (allowed ops: {allowed})"
    wrong = []
    for t in same_op:
        diffs = [
            f"{name}={_show(params.get(name))} (permitted: {_show(t.params.get(name))})"
            for name in sorted(t.params)
            if params.get(name) != t.params.get(name)
        ]
        wrong.append(", ".join(diffs))
    return f"op {op!r} is permitted, but not with these params: " + "; or ".join(wrong)


def _show(value: Any) -> str:
    text = canonical_bytes(value).decode("utf-8")
    return text if len(text) <= 80 else text[:77] + "..."


# --- entry points ----------------------------------------------------------------------------


def _decide(reasons: Sequence[Reason], required: Sequence[str], all_missing: bool) -> Decision:
    if not reasons:
        return Decision("complete", (), ())
    if all_missing:
        missing = tuple(required)
    else:
        marked = {r.slot for r in reasons if r.slot is not None}
        missing = tuple(s for s in required if s in marked)
    return Decision("continue", tuple(reasons), missing)


def _required(contract: object) -> tuple[str, ...]:
    try:
        return tuple(contract.descriptor.required_slots)  # type: ignore[attr-defined]
    except Exception:
        return ()


def _run(
    contract: Contract,
    ledger: Ledger,
    certificate: Certificate,
    skip: frozenset[str],
    explain: bool = False,
) -> tuple[Decision, list[Check]]:
    run = _Run(skip, explain)
    try:
        if not isinstance(contract, Contract):
            raise TypeError(f"contract must be a Contract, not {type(contract).__name__}")
        if not isinstance(ledger, Ledger):
            raise TypeError(f"ledger must be a Ledger, not {type(ledger).__name__}")
        if not isinstance(certificate, Certificate):
            raise TypeError(f"certificate must be a Certificate, not {type(certificate).__name__}")
        _check(run, contract, ledger, certificate)
        reasons = run.final(skip)
    except Exception as e:  # fail closed: an internal error is never a completion
        reasons = run.final(skip)
        reasons.append(Reason("internal.exception", None, _clip(f"{type(e).__name__}: {e}")))
        if run.checks is not None:
            run.checks.append(
                Check("-", "internal", "exception", None, "fail", ("internal.exception",), "")
            )
    try:
        decision = _decide(reasons, _required(contract), all_missing=False)
    except Exception as e:
        decision = Decision(
            "continue", (Reason("internal.exception", None, _clip(f"{type(e).__name__}: {e}")),), ()
        )
    return decision, run.checks or []


def verify(contract: Contract, ledger: Ledger, certificate: Certificate) -> Decision:
    """Decide ``complete`` or ``continue`` for typed inputs (docs/formats.md §8). Never raises."""
    return _run(contract, ledger, certificate, frozenset())[0]


def require_complete(contract: Contract, ledger: Ledger, certificate: Certificate) -> Decision:
    """The raising form of :func:`verify` (STYLE #8): return the ``complete`` decision.

    Raises:
        IncompleteCertificate: the decision is ``continue`` (``err.decision`` has the reasons).
    """
    decision = verify(contract, ledger, certificate)
    if not decision:
        raise IncompleteCertificate(decision)
    return decision


def verify_unsafe_ablated(
    contract: Contract, ledger: Ledger, certificate: Certificate, *, without: frozenset[str]
) -> Decision:
    """UNSAFE, for ablation studies only: verify with whole check families switched off.

    ``without`` names families from :data:`CHECK_FAMILIES` (``internal`` cannot be switched
    off: an exception still fails closed). Reasons of those families are dropped, and with
    ``transform`` off, replay runs the claimed op even if the contract does not permit it.

    Raises:
        ValueError: ``without`` names an unknown family or ``internal`` (API misuse).
    """
    without = frozenset(without)
    bad = without - _ABLATABLE
    if bad:
        raise ValueError(f"cannot ablate {sorted(bad)}; choose from {sorted(_ABLATABLE)}")
    return _run(contract, ledger, certificate, without)[0]


_PARSERS: tuple[tuple[str, Any, str], ...] = (
    ("contract", Contract, "adapter.malformed_contract"),
    ("ledger", Ledger, "adapter.malformed_ledger"),
    ("certificate", Certificate, "adapter.malformed_certificate"),
)


def _parse_all(objs: Sequence[Any]) -> tuple[list[Any], list[Reason]]:
    parsed: list[Any] = []
    reasons: list[Reason] = []
    for (name, cls, code), obj in zip(_PARSERS, objs, strict=True):
        try:
            parsed.append(cls.from_json(obj, name))
        except FormatError as e:
            parsed.append(None)
            reasons.append(Reason(code, None, _clip(str(e))))
        except Exception as e:  # a parser bug must still fail closed
            parsed.append(None)
            reasons.append(
                Reason("internal.exception", None, _clip(f"{name}: {type(e).__name__}: {e}"))
            )
    return parsed, reasons


def verify_json_explained(
    contract_obj: Any, ledger_obj: Any, certificate_obj: Any
) -> tuple[Decision, list[Check]]:
    """:func:`verify_json` plus the rows of the ``--explain`` table. Never raises."""
    try:
        parsed, reasons = _parse_all((contract_obj, ledger_obj, certificate_obj))
        if reasons:
            rows = [
                Check("0", r.family, "parse", None, "fail", (r.code,), r.detail) for r in reasons
            ]
            return _decide(reasons, _required(parsed[0]), all_missing=True), rows
        return _run(parsed[0], parsed[1], parsed[2], frozenset(), explain=True)
    except Exception as e:
        reason = Reason("internal.exception", None, _clip(f"{type(e).__name__}: {e}"))
        return Decision("continue", (reason,), ()), []


def verify_json(contract_obj: Any, ledger_obj: Any, certificate_obj: Any) -> Decision:
    """Verify raw parsed JSON. Malformed input is ``continue`` with ``adapter.*``; never raises.

    When an input does not parse, no further check runs and every required slot (if the
    contract parsed) is listed as missing.
    """
    try:
        parsed, reasons = _parse_all((contract_obj, ledger_obj, certificate_obj))
        if reasons:
            return _decide(reasons, _required(parsed[0]), all_missing=True)
        return _run(parsed[0], parsed[1], parsed[2], frozenset())[0]
    except Exception as e:
        reason = Reason("internal.exception", None, _clip(f"{type(e).__name__}: {e}"))
        return Decision("continue", (reason,), ())


def _loads_all(texts: Sequence[bytes | str]) -> tuple[list[Any], list[Reason]]:
    objs: list[Any] = []
    reasons: list[Reason] = []
    for (name, _, _), text in zip(_PARSERS, texts, strict=True):
        try:
            objs.append(loads_strict(text))
        except FormatError as e:
            objs.append(None)
            reasons.append(Reason("adapter.malformed_json", None, _clip(f"{name}: {e}")))
        except Exception as e:
            objs.append(None)
            reasons.append(
                Reason("internal.exception", None, _clip(f"{name}: {type(e).__name__}: {e}"))
            )
    return objs, reasons


def verify_bytes(
    contract: bytes | str,
    ledger: bytes | str,
    certificate: bytes | str,
    *,
    explain: bool = False,
    compiled: bool = True,
) -> tuple[Decision, list[Check]]:
    """Verify three JSON documents as read from files (what ``ect verify`` does). Never raises.

    Text that is not strict JSON (truncated, duplicate keys, NaN, 1e400, bad UTF-8, nesting
    deeper than 64) is ``continue`` with ``adapter.malformed_json``. Returns the decision and,
    when ``explain``, the check rows.

    ``compiled=False`` parses with the pure-Python reference parser only: the same decision and
    rows (the compiled parser only ever accepts what the reference accepts, producing the same
    objects), without loading msgspec -- what a one-shot process on small files wants, since
    loading it costs more than it saves there.
    """
    if not compiled:
        return _verify_bytes_reference(contract, ledger, certificate, explain=explain)
    try:
        # The compiled fast path accepts only what the reference parser accepts, producing the
        # same typed objects; on any doubt it declines and the reference path below decides
        # (and words the reasons exactly as before). Imported here: msgspec loads on first use.
        from runner.ect._structs import fast_parse

        c = fast_parse("contract", contract)
        lg = fast_parse("ledger", ledger) if c is not None else None
        x = fast_parse("certificate", certificate) if lg is not None else None
        if c is not None and lg is not None and x is not None:
            decision, checks = _run(c, lg, x, frozenset(), explain=explain)
            return decision, checks if explain else []
    except Exception:  # pragma: no cover - fast_parse never raises; the reference decides
        pass
    return _verify_bytes_reference(contract, ledger, certificate, explain=explain)


def _verify_bytes_reference(
    contract: bytes | str, ledger: bytes | str, certificate: bytes | str, *, explain: bool = False
) -> tuple[Decision, list[Check]]:
    """:func:`verify_bytes` through the pure-Python strict parser only (the reference path)."""
    try:
        objs, reasons = _loads_all((contract, ledger, certificate))
        if reasons:
            required: tuple[str, ...] = ()
            if objs[0] is not None:
                parsed, _ = _parse_all((objs[0], None, None))
                required = _required(parsed[0])
            rows = [
                Check("0", r.family, "parse", None, "fail", (r.code,), r.detail) for r in reasons
            ]
            return _decide(reasons, required, all_missing=True), rows if explain else []
        if explain:
            return verify_json_explained(*objs)
        return verify_json(*objs), []
    except Exception as e:
        reason = Reason("internal.exception", None, _clip(f"{type(e).__name__}: {e}"))
        return Decision("continue", (reason,), ()), []
