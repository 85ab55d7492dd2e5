"""The fault registry: one operator per fault, each building everything the study needs of it.

An operator is one class: its code, its kind (a static fault, a closed-loop fault no static
snapshot shows, or the trust-boundary fault), the words of its legend line in the reports, the
closed-loop tasks it is applied to, how it turns a clean static snapshot into a faulty one
(static faults only) and how it stages an incomplete closed-loop checkpoint. :data:`FAULTS`
lists them in canonical order; the code tuples (``STATIC_FAULTS`` ...), the static grid, the
fault assignment, the closed-loop checkpoints and the reports' legend are all read from it.

Adding a fault is one class here and its entry in :data:`FAULTS` (docs/architecture.md has
the walk-through). docs/protocol.md describes what each fault does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal

from runner.ect import Certificate, Claim, Ledger
from runner.errors import WorldError
from runner.worlds._adapter import TraceCall, ledger_from_trace, receipt_id
from runner.worlds._solver import plan_calls, propose_certificate
from runner.worlds._staging import (
    NESTED_ERROR,
    Call,
    Step,
    _altered,
    _cells,
    _conflicting,
    _incomplete_base,
    _note,
    _other_entity,
    _rebind,
    _retrace,
    _shifted_args,
    _Staging,
    _stale,
    _wrong_params,
    naive_certificate,
    observed_value,
)
from runner.worlds._tasks import Task, execute_calls
from runner.worlds._world import build_world

__all__ = [
    "CLOSED_LOOP_FAULTS",
    "FAULTS",
    "STATIC_CONDITIONS",
    "STATIC_FAULTS",
    "TRUST_BOUNDARY_FAULT",
    "UNSEEN_FAULTS",
    "Fault",
    "FaultKind",
    "StaticParts",
    "fault",
]

FaultKind = Literal["static", "unseen", "trust_boundary"]
"""``static``: in the static grid and the closed loop; ``unseen``: closed loop only (no static
snapshot shows it, the analysis reports it apart); ``trust_boundary``: closed loop only, its
tasks need a human (left out of the primary scope)."""

_LEGEND_PREFIX: dict[FaultKind, str] = {
    "static": "",
    "unseen": "closed loop, unseen: ",
    "trust_boundary": "closed loop, trust boundary: ",
}


@dataclass(frozen=True, slots=True)
class StaticParts:
    """What a static snapshot's condition decides: its trace, ledger, proposed certificate, and
    whether the agent signalled completion and repeated a call."""

    trace: tuple[TraceCall, ...]
    ledger: Ledger
    certificate: Certificate
    completion_signal: bool = True
    repeated_call: bool = False


class Fault:
    """One fault operator. Subclasses set the class attributes and override the hooks they need.

    ``closed_loop`` names the closed-loop tasks the fault is applied to, as (world, family)
    pairs: together the operators cover every closed-loop task exactly once.

    The closed-loop hooks are called in order while an incomplete checkpoint is staged
    (:meth:`stage`, then :meth:`injected`, then :meth:`claims`); each defaults to 'nothing'.
    A ``static`` fault also overrides :meth:`snapshot`.
    """

    code: ClassVar[str] = ""
    kind: ClassVar[FaultKind] = "static"
    description: ClassVar[str] = ""
    """The fault in a few words (the legend line, after the kind's prefix)."""
    closed_loop: ClassVar[tuple[tuple[str, str], ...]] = ()
    injects_new_receipts: ClassVar[bool] = False
    """The receipts of the calls the fault added are injected into the naive certificate."""
    stands_in_for_recovery: ClassVar[bool] = False
    """The naive certificate cites the injected receipts as the recovery cell."""

    def legend(self) -> str:
        """The reports' legend line for this fault."""
        return _LEGEND_PREFIX[self.kind] + self.description

    # --- the static grid

    def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
        """The faulty static snapshot of ``task``, from its clean one."""
        raise WorldError(f"{self.code} is a {self.kind} fault: it has no static snapshot")

    # --- the closed loop

    def stage(self, s: _Staging) -> None:
        """Add to (or edit) the staged calls."""

    def injected(self, ledger: Ledger) -> list[str]:
        """Receipts the naive certificate must cite besides the fresh ones."""
        return []

    def claims(self, task: Task, ledger: Ledger, claims: tuple[Claim, ...]) -> tuple[Claim, ...]:
        """The naive certificate's claims, as this fault leaves them."""
        return claims


def _last_call_replaced(task: Task, clean: StaticParts, step: Step) -> StaticParts:
    """The clean snapshot with its last planned call (which fetches metric evidence) replaced by
    ``step``: retraced, its ledger rebuilt, and the clean certificate's claims kept (the same
    slots, receipt ids and transforms) with each value recomputed from what its cited receipts
    now give (:func:`observed_value`, the rule of the closed-loop drafts): the snapshot a real
    agent could have written from this trace, never a gold value its evidence does not give."""
    steps: list[Step] = [(t, a, None) for t, a in plan_calls(task.contract)]
    steps[-1] = step
    trace = _retrace(task.world_id, steps)
    ledger = ledger_from_trace(task.task_id, trace)
    by_id = {r.receipt_id: r for r in ledger.receipts}
    claims = tuple(
        dataclasses.replace(c, value=observed_value(
            c.transform, [by_id[e] for e in c.evidence if e in by_id]))
        for c in clean.certificate.claims
    )
    certificate = dataclasses.replace(_rebind(clean.certificate, ledger), claims=claims)
    return dataclasses.replace(clean, trace=trace, ledger=ledger, certificate=certificate)


def _last_call(task: Task) -> Call:
    return plan_calls(task.contract)[-1]


def _with_claims(clean: StaticParts, claims: tuple[Claim, ...]) -> StaticParts:
    return dataclasses.replace(
        clean, certificate=dataclasses.replace(clean.certificate, claims=claims)
    )


class _F1(Fault):
    code = "F1"
    description = "completion signal without the required claims"
    closed_loop = (("w10", "aggregation"), ("w13", "missing_data"))

    def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
        return _with_claims(clean, ())

    def stage(self, s: _Staging) -> None:
        s.steps.append(_note("status", "done", s.task))

    def claims(self, task: Task, ledger: Ledger, claims: tuple[Claim, ...]) -> tuple[Claim, ...]:
        return ()


class _F2(Fault):
    code = "F2"
    description = "a relevant receipt replaced by another entity's"
    closed_loop = (("w10", "temporal_comparison"), ("w12", "lookup"))
    injects_new_receipts = stands_in_for_recovery = True

    def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
        tool, args = _last_call(task)
        moved = dict(args, entity=_other_entity(task, args["entity"]))
        return _last_call_replaced(task, clean, (tool, moved, None))

    def stage(self, s: _Staging) -> None:
        r_tool, r_args = s.recovery
        s.steps.append((r_tool, dict(r_args, entity=_other_entity(s.task, r_args["entity"])), None))


class _F3(Fault):
    code = "F3"
    description = "a nested tool error under transport success"
    closed_loop = (("w10", "hierarchy_join"), ("w12", "aggregation"))
    injects_new_receipts = True

    def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
        tool, args = _last_call(task)
        nested = {"ok": True, "result": {"error": dict(NESTED_ERROR)}}
        return _last_call_replaced(task, clean, (tool, args, nested))

    def stage(self, s: _Staging) -> None:
        r_tool, r_args = s.recovery
        s.steps.append((r_tool, r_args, {"ok": True, "result": {"error": dict(NESTED_ERROR)}}))


class _F4(Fault):
    code = "F4"
    description = "the entity or date scope changed"
    closed_loop = (("w10", "missing_data"), ("w12", "top_k"))
    injects_new_receipts = stands_in_for_recovery = True

    def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
        tool, args = _last_call(task)
        return _last_call_replaced(task, clean, (tool, _shifted_args(task, tool, args), None))

    def stage(self, s: _Staging) -> None:
        r_tool, r_args = s.recovery
        s.steps.append((r_tool, _shifted_args(s.task, r_tool, r_args), None))


class _F5(Fault):
    code = "F5"
    description = "one required slot omitted"
    closed_loop = (("w11", "lookup"), ("w12", "temporal_comparison"))

    def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
        return _with_claims(clean, clean.certificate.claims[:-1])

    def claims(self, task: Task, ledger: Ledger, claims: tuple[Claim, ...]) -> tuple[Claim, ...]:
        # Claim what there is evidence for; omit a slot without any (else the last one).
        kept = tuple(c for c in claims if c.evidence)
        return kept if len(kept) < len(claims) else claims[:-1]


class _F6(Fault):
    code = "F6"
    description = "a supported value altered after retrieval"
    closed_loop = (("w11", "top_k"), ("w13", "lookup"))

    def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
        first, *rest = clean.certificate.claims
        bad = dataclasses.replace(first, value=_altered(first.value, task.world_id))
        return _with_claims(clean, (bad, *rest))

    def stage(self, s: _Staging) -> None:
        # The note records the altered draft value (computed from what the agent saw: the
        # note adds no receipt, so the draft over this ledger is the final one).
        ledger = ledger_from_trace(s.task.task_id, _retrace(s.task.world_id, s.steps))
        claims = naive_certificate(s.task, ledger).claims
        bad = next(a for a, c in zip(self.claims(s.task, ledger, claims), claims, strict=True)
                   if a != c)
        s.steps.append(_note("draft_answer", str(bad.value), s.task))

    def claims(self, task: Task, ledger: Ledger, claims: tuple[Claim, ...]) -> tuple[Claim, ...]:
        i = next((i for i, c in enumerate(claims) if c.evidence), 0)
        bad = dataclasses.replace(claims[i], value=_altered(claims[i].value, task.world_id))
        return (*claims[:i], bad, *claims[i + 1 :])


class _F7(Fault):
    code = "F7"
    description = "a claim cites a receipt absent from the trace"
    closed_loop = (("w11", "temporal_comparison"), ("w13", "aggregation"))

    def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
        first, *rest = clean.certificate.claims
        forged = receipt_id(len(clean.ledger.receipts) + 1)
        bad = dataclasses.replace(first, evidence=(forged, *first.evidence[1:]))
        return _with_claims(clean, (bad, *rest))

    def stage(self, s: _Staging) -> None:
        s.steps.append(_note("evidence", "see the receipt after the last one", s.task))

    def claims(self, task: Task, ledger: Ledger, claims: tuple[Claim, ...]) -> tuple[Claim, ...]:
        forged = receipt_id(len(ledger.receipts) + 1)
        head = claims[0]
        return (dataclasses.replace(head, evidence=(*head.evidence, forged)), *claims[1:])


class _F8(Fault):
    code = "F8"
    description = "a repeated call despite an available recovery"
    closed_loop = (("w11", "hierarchy_join"), ("w13", "top_k"))

    def snapshot(self, task: Task, clean: StaticParts) -> StaticParts:
        base, _recovery = _incomplete_base(task)
        trace = tuple(execute_calls(task.world_id, [*base, base[-1]]))
        ledger = ledger_from_trace(task.task_id, trace)
        return StaticParts(
            trace=trace,
            ledger=ledger,
            certificate=propose_certificate(task.contract, ledger),
            completion_signal=False,
            repeated_call=True,
        )

    def stage(self, s: _Staging) -> None:
        s.steps.append(s.steps[-1])


class _U1(Fault):
    code = "U1"
    kind = "unseen"
    description = "a stale receipt superseded by a later correction"
    closed_loop = (("w10", "lookup"), ("w12", "missing_data"))

    def stage(self, s: _Staging) -> None:
        task, recovery = s.task, s.recovery
        r_tool, r_args = recovery
        world = build_world(task.world_id)
        target = (r_args["entity"], r_args["attribute"], r_args["date"])
        if target in world.corrections:
            real = execute_calls(task.world_id, [recovery])[0].response
            s.steps.append((r_tool, r_args, _stale(real, target[2], world.corrections[target])))
            return
        for i, (tool, args, _none) in enumerate(s.steps):
            hit = next((c for c in _cells(tool, args) if c in world.corrections), None)
            if hit is None:
                continue
            real = execute_calls(task.world_id, [(tool, args)])[0].response
            s.steps[i] = (tool, args, _stale(real, hit[2], world.corrections[hit]))
            stale_fix = ("get_metric", {"entity": hit[0], "attribute": hit[1], "date": hit[2]})
            s.recovery_calls = [stale_fix, recovery]
            return
        raise WorldError(f"{task.task_id}: no corrected cell to stage U1 on")

    def injected(self, ledger: Ledger) -> list[str]:
        return [r.receipt_id for r in ledger.receipts if r.validation == "invalid"]


class _U2(Fault):
    code = "U2"
    kind = "unseen"
    description = "duplicate evidence counted twice toward cardinality"
    closed_loop = (("w11", "aggregation"), ("w13", "temporal_comparison"))
    injects_new_receipts = True

    def stage(self, s: _Staging) -> None:
        cell = next((c for t, a, _ in s.steps for c in _cells(t, a)), None)
        if cell is None:
            s.steps.append(s.steps[0])
        else:
            s.steps.append(
                ("get_metric", {"entity": cell[0], "attribute": cell[1], "date": cell[2]}, None)
            )


class _U3(Fault):
    code = "U3"
    kind = "unseen"
    description = "wrong transform parameters (e.g. k)"
    # The families whose transforms have a parameter to get wrong.
    closed_loop = (("w10", "top_k"), ("w12", "hierarchy_join"))

    def stage(self, s: _Staging) -> None:
        slot, wrong = _wrong_params(s.task)
        s.overrides[slot] = wrong
        s.steps.append(_note("analyst_note", f"use {wrong.op} with {wrong.params}", s.task))


class _T1(Fault):
    code = "T1"
    kind = "trust_boundary"
    description = ("two internally consistent but conflicting receipts (the right stop is "
                   "needs_human; outside the primary scope)")
    closed_loop = (("w11", "missing_data"), ("w13", "hierarchy_join"))
    injects_new_receipts = True

    def stage(self, s: _Staging) -> None:
        r_tool, r_args = s.recovery
        real = execute_calls(s.task.world_id, [s.recovery])[0].response
        s.steps.append((r_tool, r_args, None))
        s.steps.append((r_tool, r_args, _conflicting(real)))
        s.recovery_calls = []
        s.needs_human = True


FAULTS: tuple[Fault, ...] = (
    _F1(), _F2(), _F3(), _F4(), _F5(), _F6(), _F7(), _F8(), _U1(), _U2(), _U3(), _T1(),
)
"""Every fault operator, in canonical order (static faults, then unseen, then trust boundary).
This is the fault registry: everything else that lists faults reads it."""


def _check(faults: tuple[Fault, ...]) -> dict[str, Fault]:
    """The registry by code, after checking it is well formed (raises :class:`WorldError`)."""
    by_code: dict[str, Fault] = {}
    order = list(_LEGEND_PREFIX)
    for f in faults:
        if not f.code or not f.description or f.code in by_code or f.code == "C0":
            raise WorldError(f"fault registry: {type(f).__name__} needs a new code and words")
        if f.kind == "static" and type(f).snapshot is Fault.snapshot:
            raise WorldError(f"fault registry: static fault {f.code} builds no static snapshot")
        if by_code and order.index(f.kind) < order.index(list(by_code.values())[-1].kind):
            raise WorldError(f"fault registry: {f.code} is out of order (static, unseen, "
                             "trust boundary)")
        by_code[f.code] = f
    if sum(f.kind == "trust_boundary" for f in faults) != 1:
        raise WorldError("fault registry: exactly one trust-boundary fault")
    return by_code


_BY_CODE = _check(FAULTS)

STATIC_FAULTS: tuple[str, ...] = tuple(f.code for f in FAULTS if f.kind == "static")
STATIC_CONDITIONS: tuple[str, ...] = ("C0", *STATIC_FAULTS)
UNSEEN_FAULTS: tuple[str, ...] = tuple(f.code for f in FAULTS if f.kind == "unseen")
"""Closed-loop faults no static snapshot shows (the analysis reports them apart)."""
TRUST_BOUNDARY_FAULT: str = next(f.code for f in FAULTS if f.kind == "trust_boundary")
"""The closed-loop fault whose tasks need a human (left out of the primary scope)."""
CLOSED_LOOP_FAULTS: tuple[str, ...] = tuple(f.code for f in FAULTS if f.closed_loop)


def fault(code: str) -> Fault:
    """The operator of a fault code (raises :class:`WorldError` for an unknown one)."""
    op = _BY_CODE.get(code)
    if op is None:
        raise WorldError(f"unknown fault {code!r}")
    return op
