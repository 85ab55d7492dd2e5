"""Fault operators, the static grid (432 snapshots) and the closed-loop checkpoints (48).

Every operator starts from a clean, dual-oracle-admitted task and changes only what its
definition says (docs/protocol.md has the table). The *incomplete base* of a task is
its clean plan with the last metric evidence missing: the last planned call is dropped, or, when
it is a ``get_series`` over several days, shortened by its last day. The *recovery call* is the
``get_metric`` that fetches exactly what is missing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.ect import (
    Certificate,
    Claim,
    Ledger,
    Receipt,
    ReceiptScope,
    ReplayError,
    Transform,
    descriptor_digest,
    ledger_digest,
    replay,
)
from runner.errors import WorldError
from runner.worlds._adapter import TraceCall, ledger_from_trace, receipt_id
from runner.worlds._solver import _usable, in_scope, plan_calls, propose_certificate
from runner.worlds._tasks import (
    Task,
    closed_loop_tasks,
    execute_calls,
    get_task,
    static_tasks,
)
from runner.worlds._world import build_world

__all__ = [
    "CLOSED_LOOP_FAULTS",
    "STATIC_CONDITIONS",
    "STATIC_FAULTS",
    "TRUST_BOUNDARY_FAULT",
    "UNSEEN_FAULTS",
    "Snapshot",
    "TaskCheckpoint",
    "closed_loop_checkpoints",
    "fault_assignment",
    "naive_certificate",
    "observed_value",
    "static_grid",
]

STATIC_FAULTS: tuple[str, ...] = ("F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8")
STATIC_CONDITIONS: tuple[str, ...] = ("C0", *STATIC_FAULTS)
UNSEEN_FAULTS: tuple[str, ...] = ("U1", "U2", "U3")
"""Closed-loop faults no static snapshot shows (the analysis reports them apart)."""
TRUST_BOUNDARY_FAULT = "T1"
"""The closed-loop fault whose tasks need a human (left out of the primary scope)."""
CLOSED_LOOP_FAULTS: tuple[str, ...] = (*STATIC_FAULTS, *UNSEEN_FAULTS, TRUST_BOUNDARY_FAULT)

Call = tuple[str, dict[str, Any]]

NESTED_ERROR = {
    "code": "upstream_unavailable",
    "message": "the metric backend timed out; the request may be retried",
}


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One static-study snapshot: a trace, its ledger and the certificate proposed at the end."""

    snapshot_id: str
    task: Task
    condition: str  # "C0" | "F1".."F8"
    trace: tuple[TraceCall, ...]
    ledger: Ledger
    certificate: Certificate
    completion_signal: bool
    recovery_available: bool
    repeated_call: bool
    gold_decision: Literal["complete", "continue"]

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshot_id": self.snapshot_id,
            "task_id": self.task.task_id,
            "condition": self.condition,
            "trace": [c.to_json() for c in self.trace],
            "ledger": self.ledger.to_json(),
            "certificate": self.certificate.to_json(),
            "completion_signal": self.completion_signal,
            "recovery_available": self.recovery_available,
            "repeated_call": self.repeated_call,
            "gold_decision": self.gold_decision,
        }


@dataclass(frozen=True, slots=True)
class TaskCheckpoint:
    """A closed-loop starting point: the trace so far and how it can be completed.

    ``recovery_calls`` are the (at most 3) calls after which :func:`propose_certificate`
    verifies ``complete``; empty for a clean checkpoint and for T1, whose conflicting receipts no
    call can resolve (``needs_human``: the loop should escalate). ``naive_certificate`` is what a
    premature finisher would propose from this trace (for a clean checkpoint: the honest one).
    """

    checkpoint_id: str
    task: Task
    kind: Literal["clean", "incomplete"]
    fault: str | None
    trace: tuple[TraceCall, ...]
    ledger: Ledger
    recovery_calls: tuple[Call, ...]
    naive_certificate: Certificate
    needs_human: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "task_id": self.task.task_id,
            "kind": self.kind,
            "fault": self.fault,
            "trace": [c.to_json() for c in self.trace],
            "ledger": self.ledger.to_json(),
            "recovery_calls": [{"tool_id": t, "args": a} for t, a in self.recovery_calls],
            "naive_certificate": self.naive_certificate.to_json(),
            "needs_human": self.needs_human,
        }


# --- helpers ---------------------------------------------------------------------------------


def _shift(day: str, days: int) -> str:
    return (dt.date.fromisoformat(day) + dt.timedelta(days=days)).isoformat()


def _cells(tool: str, args: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The metric cells (entity, attribute, date) a call fetches."""
    if tool == "get_metric":
        return [(args["entity"], args["attribute"], args["date"])]
    if tool == "get_series":
        d0, d1 = dt.date.fromisoformat(args["start"]), dt.date.fromisoformat(args["end"])
        return [
            (args["entity"], args["attribute"], (d0 + dt.timedelta(days=i)).isoformat())
            for i in range((d1 - d0).days + 1)
        ]
    return []


def _incomplete_base(task: Task) -> tuple[list[Call], Call]:
    """The clean plan minus its last metric evidence, and the one call that recovers it."""
    plan = plan_calls(task.contract)
    *head, (tool, args) = plan
    if tool == "get_series" and args["start"] != args["end"]:
        shortened = dict(args, end=_shift(args["end"], -1))
        recovery = (
            "get_metric",
            {"entity": args["entity"], "attribute": args["attribute"], "date": args["end"]},
        )
        return [*head, ("get_series", shortened)], recovery
    if tool != "get_metric":
        raise WorldError(f"{task.task_id}: the plan does not end with a metric call")
    return list(head), (tool, dict(args))


def _retrace(
    world_id: str, calls: Sequence[tuple[str, dict[str, Any], dict[str, Any] | None]]
) -> tuple[TraceCall, ...]:
    """Execute calls in order; a given response (third item) replaces the tool's own answer."""
    out: list[TraceCall] = []
    for i, (tool, args, forced) in enumerate(calls):
        real = execute_calls(world_id, [(tool, args)], first_call=i + 1)[0]
        out.append(real if forced is None else dataclasses.replace(real, response=forced))
    return tuple(out)


def _other_entity(task: Task, entity: str) -> str:
    """A store outside every slot's entity scope; failing that, another store in it."""
    world = build_world(task.world_id)
    scoped: set[str] = set()
    for spec in task.contract.slots.values():
        scoped.update(spec.scope.entity or ())
    outside = [s for s in world.store_ids if s not in scoped]
    if outside:
        return outside[0]
    return next(s for s in sorted(scoped) if s != entity)


def _shifted_args(task: Task, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The same call with its dates moved out of scope, inside the world (known values first)."""
    world = build_world(task.world_id)
    keys = ["date"] if tool == "get_metric" else ["start", "end"]
    fallback: dict[str, Any] | None = None
    for delta in (-7, 7, -14, 14, -3, 3, -1, 1):
        moved = dict(args, **{k: _shift(args[k], delta) for k in keys})
        if not all(world.start <= moved[k] <= world.end for k in keys):
            continue
        if all(world.value(*c) is not None for c in _cells(tool, moved)):
            return moved
        fallback = fallback or moved
    if fallback is None:
        raise WorldError(f"{task.task_id}: no in-world date shift for {tool}")
    return fallback


def _stale(response: dict[str, Any], day: str, old: int) -> dict[str, Any]:
    """A recorded stale read: the superseded value of ``day``, marked as such."""
    result = dict(response["result"])
    if "points" in result:
        points = []
        for p in result["points"]:
            if p["date"] == day:
                p = {"date": day, "value": old, "revision": 1, "superseded": True}
            points.append(p)
        result["points"] = points
    else:
        result.update(value=old, revision=1, superseded=True)
    return {"ok": True, "result": result}


def _conflicting(response: dict[str, Any]) -> dict[str, Any]:
    """The same read reporting a different value, with nothing marking either as wrong (T1)."""
    result = dict(response["result"])
    v = result["value"]
    result["value"] = 7 if v is None else v + max(1, v // 7)
    return {"ok": True, "result": result}


def _altered(value: Any, world_id: str) -> Any:
    """A supported value altered after retrieval (F6): always different, same shape."""
    world = build_world(world_id)
    if value is None:
        return 0
    if isinstance(value, bool):
        raise WorldError("boolean values do not occur")
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        ids = sorted({*world.regions, *world.store_ids})
        pool = [i for i in ids if i != value and i[0] == value[0]] or [i for i in ids if i != value]
        return pool[0]
    if isinstance(value, list):
        if len(value) >= 2 and value[0] != value[1]:
            return [value[1], value[0], *value[2:]]
        return [_altered(value[0], world_id), *value[1:]] if value else [0]
    raise WorldError(f"cannot alter {value!r}")


def _rebind(cert: Certificate, ledger: Ledger) -> Certificate:
    return dataclasses.replace(cert, ledger_digest=ledger_digest(ledger))


def _wrong_params(task: Task) -> tuple[str, Transform]:
    """U3: the first slot whose transform has parameters, with them changed (k+1, swapped a/b)."""
    for slot, spec in task.contract.slots.items():
        t = spec.transforms[0]
        if "k" in t.params:
            return slot, Transform(t.op, dict(t.params, k=t.params["k"] + 1))
        if "a" in t.params:
            return slot, Transform(t.op, dict(t.params, a=t.params["b"], b=t.params["a"]))
        if "order" in t.params:
            flip = "asc" if t.params["order"] == "desc" else "desc"
            return slot, Transform(t.op, dict(t.params, order=flip))
    raise WorldError(f"{task.task_id}: U3 needs a slot with a parameterised transform")


# --- the static grid -------------------------------------------------------------------------


def _snapshot(task: Task, condition: str) -> Snapshot:
    plan = plan_calls(task.contract)
    clean_trace, clean_ledger, clean_cert = _clean_state(task.task_id)
    trace, ledger, cert = clean_trace, clean_ledger, clean_cert
    signal, repeated = True, False
    target = len(plan) - 1  # the last planned call fetches metric evidence
    tool, args = plan[target]
    steps: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [(t, a, None) for t, a in plan]
    if condition == "F1":
        cert = dataclasses.replace(clean_cert, claims=())
    elif condition in ("F2", "F3", "F4"):
        if condition == "F2":
            steps[target] = (tool, dict(args, entity=_other_entity(task, args["entity"])), None)
        elif condition == "F3":
            steps[target] = (tool, args, {"ok": True, "result": {"error": dict(NESTED_ERROR)}})
        else:
            steps[target] = (tool, _shifted_args(task, tool, args), None)
        trace = _retrace(task.world_id, steps)
        ledger = ledger_from_trace(task.task_id, trace)
        cert = _rebind(clean_cert, ledger)
    elif condition == "F5":
        cert = dataclasses.replace(clean_cert, claims=clean_cert.claims[:-1])
    elif condition == "F6":
        first = clean_cert.claims[0]
        bad = dataclasses.replace(first, value=_altered(first.value, task.world_id))
        cert = dataclasses.replace(clean_cert, claims=(bad, *clean_cert.claims[1:]))
    elif condition == "F7":
        first = clean_cert.claims[0]
        forged = receipt_id(len(clean_ledger.receipts) + 1)
        bad = dataclasses.replace(first, evidence=(forged, *first.evidence[1:]))
        cert = dataclasses.replace(clean_cert, claims=(bad, *clean_cert.claims[1:]))
    elif condition == "F8":
        base, _recovery = _incomplete_base(task)
        calls = [*base, base[-1]]
        trace = tuple(execute_calls(task.world_id, calls))
        ledger = ledger_from_trace(task.task_id, trace)
        cert = propose_certificate(task.contract, ledger)
        signal, repeated = False, True
    elif condition != "C0":
        raise WorldError(f"unknown static condition {condition!r}")
    return Snapshot(
        snapshot_id=f"{task.task_id}/{condition}",
        task=task,
        condition=condition,
        trace=trace,
        ledger=ledger,
        certificate=cert,
        completion_signal=signal,
        recovery_available=condition != "C0",
        repeated_call=repeated,
        gold_decision="complete" if condition == "C0" else "continue",
    )


@functools.cache
def _clean_state(task_id: str) -> tuple[tuple[TraceCall, ...], Ledger, Certificate]:
    """The clean trace, ledger and honest certificate of a task (shared by C0 and the faults)."""
    task = get_task(task_id)
    trace = tuple(execute_calls(task.world_id, plan_calls(task.contract)))
    ledger = ledger_from_trace(task_id, trace)
    return trace, ledger, propose_certificate(task.contract, ledger)


@functools.lru_cache(maxsize=1)
def _static_grid() -> tuple[Snapshot, ...]:
    return tuple(_snapshot(t, c) for t in static_tasks() for c in STATIC_CONDITIONS)


def static_grid() -> list[Snapshot]:
    """The 432 static snapshots: tasks in order, each with C0, F1..F8 (canonical order)."""
    return list(_static_grid())


# --- the closed-loop set ---------------------------------------------------------------------

# Which two tasks carry each fault: every fault on two different worlds and families; U3 on the
# families whose transforms have a parameter to get wrong (top_k, hierarchy_join).
_ASSIGNMENT: dict[str, dict[str, str]] = {
    "w10": {
        "lookup": "U1",
        "aggregation": "F1",
        "top_k": "U3",
        "temporal_comparison": "F2",
        "hierarchy_join": "F3",
        "missing_data": "F4",
    },
    "w11": {
        "lookup": "F5",
        "aggregation": "U2",
        "top_k": "F6",
        "temporal_comparison": "F7",
        "hierarchy_join": "F8",
        "missing_data": "T1",
    },
    "w12": {
        "lookup": "F2",
        "aggregation": "F3",
        "top_k": "F4",
        "temporal_comparison": "F5",
        "hierarchy_join": "U3",
        "missing_data": "U1",
    },
    "w13": {
        "lookup": "F6",
        "aggregation": "F7",
        "top_k": "F8",
        "temporal_comparison": "U2",
        "hierarchy_join": "T1",
        "missing_data": "F1",
    },
}


def fault_assignment() -> dict[str, list[str]]:
    """fault -> the two closed-loop task ids it is applied to (deterministic, fixed)."""
    out: dict[str, list[str]] = {f: [] for f in CLOSED_LOOP_FAULTS}
    for task in closed_loop_tasks():
        out[_ASSIGNMENT[task.world_id][task.family]].append(task.task_id)
    return out


def _seen(receipts: Sequence[Receipt], op: str) -> list[Receipt]:
    """The cited receipts that showed a value: successful and valid, and, unless the transform
    is ``all_null`` (whose inputs are nulls), not null. A failed call shows no value."""
    out = [r for r in receipts if r.exec_status == "ok" and r.validation == "valid"]
    return out if op == "all_null" else [r for r in out if r.value is not None]


def _with_metrics_only(receipts: Sequence[Receipt]) -> list[Receipt]:
    """Membership receipts only for entities that also have a metric value among ``receipts``."""
    measured = {r.scope.entity for r in receipts if r.scope.attribute != "parent"}
    return [r for r in receipts if r.scope.attribute != "parent" or r.scope.entity in measured]


def observed_value(transform: Transform, cited: Sequence[Receipt]) -> Any:
    """What a premature agent computes for a claim from the receipts it cites, and nothing else.

    First the replay over everything cited (what the verifier will check). When that fails, the
    agent works with what it actually saw: the cited receipts that showed a value (a failed call,
    an invalid read and a null are skipped), membership receipts only for stores it has a metric
    for, and, when fewer than ``k`` entities or groups are left, the ranking of those there are.
    When even that gives nothing (a window or a dated operand it has no value for) the claim's
    value is ``null``. The result depends only on ``transform`` and the cited receipts' values,
    so a draft never carries a value its evidence does not give.
    """
    try:
        return replay(transform, cited)
    except ReplayError:
        pass
    pool = _with_metrics_only(_seen(cited, transform.op))
    k = transform.params.get("k")
    ks = range(k, 0, -1) if isinstance(k, int) and not isinstance(k, bool) else (None,)
    for n in ks:
        t = transform if n is None else Transform(transform.op, dict(transform.params, k=n))
        try:
            return replay(t, pool)
        except ReplayError as e:
            if n is None or e.code != "replay.arity":
                return None
    return None


def naive_certificate(
    task: Task,
    ledger: Ledger,
    *,
    include: Sequence[str] = (),
    stand_in: tuple[str, str, str] | None = None,
    transform_overrides: dict[str, Transform] | None = None,
) -> Certificate:
    """What a premature finisher proposes: every slot claimed, tempting receipts cited.

    Each slot cites its usable receipts plus those named in ``include`` (stale, failed,
    duplicated, conflicting, wrong-entity or wrong-date evidence) that the slot would need: an
    included receipt goes to every slot whose scope covers its own cell, or, when ``stand_in``
    names the cell it was fetched in place of, that cell. The value is what the premature agent
    computes from what it saw (:func:`observed_value` over what the claim cites): never the gold
    answer, which no agent can see.
    """
    overrides = transform_overrides or {}
    wanted = set(include)
    forced = [r for r in ledger.receipts if r.receipt_id in wanted]
    claims = []
    for slot, spec in task.contract.slots.items():
        cited: list[Receipt] = _usable(ledger.receipts, task.task_id, spec)
        for r in forced:
            probe = r
            if stand_in is not None:
                probe = dataclasses.replace(
                    r, scope=ReceiptScope(stand_in[0], stand_in[1], "store", stand_in[2])
                )
            if in_scope(probe, spec.scope) and r not in cited:
                cited.append(r)
        cited.sort(key=lambda r: r.receipt_id)
        transform = overrides.get(slot, spec.transforms[0])
        value = observed_value(transform, cited)
        claims.append(Claim(slot, value, tuple(r.receipt_id for r in cited), transform))
    return Certificate(
        task_id=task.task_id,
        descriptor_digest=descriptor_digest(task.descriptor),
        ledger_digest=ledger_digest(ledger),
        claims=tuple(claims),
    )


def _note(key: str, value: Any, task: Task) -> tuple[str, dict[str, Any], None]:
    return (
        "record_note",
        {"key": key, "value": value, "idempotency_key": f"{task.task_id}:{key}"},
        None,
    )


Step = tuple[str, dict[str, Any], dict[str, Any] | None]
"""(tool, args, canned response or None to run the tool) of one staged call."""


@dataclass
class _Staging:
    """An incomplete checkpoint being staged: the base calls, then what the fault adds."""

    task: Task
    steps: list[Step]
    recovery: Call
    recovery_calls: list[Call]
    needs_human: bool = False
    overrides: dict[str, Transform] = field(default_factory=dict)


class _Fault:
    """One fault operator: its code and the hooks the staging calls, in order. Every hook
    defaults to 'nothing'; a fault overrides the ones it needs (adding a fault is one class)."""

    code = ""
    injects_new_receipts = False  # the receipts of the calls the fault added are injected
    stands_in_for_recovery = False  # the naive certificate cites them as the recovery cell

    def stage(self, s: _Staging) -> None:
        """Add to (or edit) the staged calls."""

    def injected(self, ledger: Ledger) -> list[str]:
        """Receipts the naive certificate must cite besides the fresh ones."""
        return []

    def claims(self, task: Task, ledger: Ledger, claims: tuple[Claim, ...]) -> tuple[Claim, ...]:
        """The naive certificate's claims, as this fault leaves them."""
        return claims


class _F1(_Fault):
    code = "F1"

    def stage(self, s: _Staging) -> None:
        s.steps.append(_note("status", "done", s.task))

    def claims(self, task: Task, ledger: Ledger, claims: tuple[Claim, ...]) -> tuple[Claim, ...]:
        return ()


class _F2(_Fault):
    code = "F2"
    injects_new_receipts = stands_in_for_recovery = True

    def stage(self, s: _Staging) -> None:
        r_tool, r_args = s.recovery
        s.steps.append((r_tool, dict(r_args, entity=_other_entity(s.task, r_args["entity"])), None))


class _F3(_Fault):
    code = "F3"
    injects_new_receipts = True

    def stage(self, s: _Staging) -> None:
        r_tool, r_args = s.recovery
        s.steps.append((r_tool, r_args, {"ok": True, "result": {"error": dict(NESTED_ERROR)}}))


class _F4(_Fault):
    code = "F4"
    injects_new_receipts = stands_in_for_recovery = True

    def stage(self, s: _Staging) -> None:
        r_tool, r_args = s.recovery
        s.steps.append((r_tool, _shifted_args(s.task, r_tool, r_args), None))


class _F5(_Fault):
    code = "F5"

    def claims(self, task: Task, ledger: Ledger, claims: tuple[Claim, ...]) -> tuple[Claim, ...]:
        # Claim what there is evidence for; omit a slot without any (else the last one).
        kept = tuple(c for c in claims if c.evidence)
        return kept if len(kept) < len(claims) else claims[:-1]


class _F6(_Fault):
    code = "F6"

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


class _F7(_Fault):
    code = "F7"

    def stage(self, s: _Staging) -> None:
        s.steps.append(_note("evidence", "see the receipt after the last one", s.task))

    def claims(self, task: Task, ledger: Ledger, claims: tuple[Claim, ...]) -> tuple[Claim, ...]:
        forged = receipt_id(len(ledger.receipts) + 1)
        head = claims[0]
        return (dataclasses.replace(head, evidence=(*head.evidence, forged)), *claims[1:])


class _F8(_Fault):
    code = "F8"

    def stage(self, s: _Staging) -> None:
        s.steps.append(s.steps[-1])


class _U1(_Fault):
    code = "U1"

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


class _U2(_Fault):
    code = "U2"
    injects_new_receipts = True

    def stage(self, s: _Staging) -> None:
        cell = next((c for t, a, _ in s.steps for c in _cells(t, a)), None)
        if cell is None:
            s.steps.append(s.steps[0])
        else:
            s.steps.append(
                ("get_metric", {"entity": cell[0], "attribute": cell[1], "date": cell[2]}, None)
            )


class _U3(_Fault):
    code = "U3"

    def stage(self, s: _Staging) -> None:
        slot, wrong = _wrong_params(s.task)
        s.overrides[slot] = wrong
        s.steps.append(_note("analyst_note", f"use {wrong.op} with {wrong.params}", s.task))


class _T1(_Fault):
    code = "T1"
    injects_new_receipts = True

    def stage(self, s: _Staging) -> None:
        r_tool, r_args = s.recovery
        real = execute_calls(s.task.world_id, [s.recovery])[0].response
        s.steps.append((r_tool, r_args, None))
        s.steps.append((r_tool, r_args, _conflicting(real)))
        s.recovery_calls = []
        s.needs_human = True


_FAULT_OPERATORS: dict[str, _Fault] = {
    op.code: op
    for op in (_F1(), _F2(), _F3(), _F4(), _F5(), _F6(), _F7(), _F8(), _U1(), _U2(), _U3(), _T1())
}
assert tuple(_FAULT_OPERATORS) == CLOSED_LOOP_FAULTS


def _incomplete(task: Task, fault: str) -> TaskCheckpoint:
    op = _FAULT_OPERATORS.get(fault)
    if op is None:
        raise WorldError(f"unknown closed-loop fault {fault!r}")
    base, recovery = _incomplete_base(task)
    s = _Staging(task, [(t, a, None) for t, a in base], recovery, [recovery])
    n_base = len(s.steps)
    op.stage(s)
    trace = _retrace(task.world_id, s.steps)
    ledger = ledger_from_trace(task.task_id, trace)
    injected = op.injected(ledger)
    if op.injects_new_receipts:
        ids = {c.call_id for c in trace[n_base:]}
        injected = [r.receipt_id for r in ledger.receipts if r.call_id in ids]
    r_args = recovery[1]
    stand_in = ((r_args["entity"], r_args["attribute"], r_args["date"])
                if op.stands_in_for_recovery else None)
    naive = naive_certificate(
        task, ledger, include=injected, stand_in=stand_in, transform_overrides=s.overrides
    )
    naive = dataclasses.replace(naive, claims=op.claims(task, ledger, naive.claims))
    return TaskCheckpoint(
        checkpoint_id=f"{task.task_id}/incomplete",
        task=task,
        kind="incomplete",
        fault=fault,
        trace=trace,
        ledger=ledger,
        recovery_calls=tuple(s.recovery_calls),
        naive_certificate=naive,
        needs_human=s.needs_human,
    )


def _clean(task: Task) -> TaskCheckpoint:
    trace, ledger, certificate = _clean_state(task.task_id)
    return TaskCheckpoint(
        checkpoint_id=f"{task.task_id}/clean",
        task=task,
        kind="clean",
        fault=None,
        trace=trace,
        ledger=ledger,
        recovery_calls=(),
        naive_certificate=certificate,
        needs_human=False,
    )


@functools.lru_cache(maxsize=1)
def _checkpoints() -> tuple[TaskCheckpoint, ...]:
    out: list[TaskCheckpoint] = []
    for task in closed_loop_tasks():
        out.append(_clean(task))
        out.append(_incomplete(task, _ASSIGNMENT[task.world_id][task.family]))
    return tuple(out)


def closed_loop_checkpoints() -> list[TaskCheckpoint]:
    """The 48 closed-loop checkpoints: per task (in order) its clean then its incomplete one."""
    return list(_checkpoints())
