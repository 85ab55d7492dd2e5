"""What the fault operators build on: the clean state of a task, its incomplete base, the
calls a fault stages and the certificate a premature finisher proposes.

The *incomplete base* of a task is its clean plan with the last metric evidence missing: the
last planned call is dropped, or, when it is a ``get_series`` over several days, shortened by
its last day. The *recovery call* is the ``get_metric`` that fetches exactly what is missing.
The operators themselves are in ``runner/worlds/_faults.py``; the grids in ``_grid.py``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
from runner.worlds._adapter import TraceCall, ledger_from_trace
from runner.worlds._solver import _usable, in_scope, plan_calls, propose_certificate
from runner.worlds._tasks import Task, execute_calls, get_task
from runner.worlds._world import build_world

Call = tuple[str, dict[str, Any]]

NESTED_ERROR = {
    "code": "upstream_unavailable",
    "message": "the metric backend timed out; the request may be retried",
}


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


@functools.cache
def _clean_state(task_id: str) -> tuple[tuple[TraceCall, ...], Ledger, Certificate]:
    """The clean trace, ledger and honest certificate of a task (shared by C0 and the faults)."""
    task = get_task(task_id)
    trace = tuple(execute_calls(task.world_id, plan_calls(task.contract)))
    ledger = ledger_from_trace(task_id, trace)
    return trace, ledger, propose_certificate(task.contract, ledger)


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
