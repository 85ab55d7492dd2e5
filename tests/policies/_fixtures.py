"""Hand-built contracts, ledgers, traces and snapshots for the policy tests.

A two-slot lookup task ("units" and "revenue" of store S01 on one day), each slot answered by
``identity`` over one ``get_metric`` receipt. Builders return real runner.ect / runner.worlds
objects; fault variants are built by editing the clean certificate, trace or ledger exactly as
the fault operators of docs/protocol.md ("Faults") describe.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from runner.ect import (
    Certificate,
    Claim,
    Contract,
    Ledger,
    Receipt,
    ReceiptScope,
    Transform,
    args_digest,
    descriptor_digest,
    ledger_digest,
    response_digest,
    value_digest,
)
from runner.worlds import TraceCall

TASK = "t-demo"
DAY = "2026-03-02"
VALUES = {"units": 5, "revenue": 700}

CONTRACT = Contract.from_json(
    {
        "format": "ect.contract/1",
        "task_id": TASK,
        "descriptor": {
            "task_id": TASK,
            "family": "lookup",
            "world_id": "w99",
            "parameters": {"entity": "S01", "date": DAY, "attributes": ["units", "revenue"]},
            "required_slots": ["units", "revenue"],
        },
        "slots": {
            attr: {
                "transforms": [{"op": "identity", "params": {}}],
                "scope": {"entity": ["S01"], "attribute": [attr], "dates": [DAY]},
                "cardinality": {"min": 1, "max": 1},
                "nullable": False,
                "tolerance": {"abs": 0},
            }
            for attr in ("units", "revenue")
        },
    }
)


def call(call_id: str, attr: str, *, entity: str = "S01", day: str = DAY, value: Any = None,
         error: bool = False) -> TraceCall:
    args = {"entity": entity, "attribute": attr, "date": day}
    if error:
        response: dict[str, Any] = {
            "ok": True,
            "result": {"error": {"code": "unavailable", "message": "try again"}},
        }
    else:
        response = {
            "ok": True,
            "result": {"entity": entity, "attribute": attr, "level": "store", "date": day,
                       "value": value, "revision": 1},
        }
    return TraceCall(call_id=call_id, tool_id="get_metric", args=args, response=response)


def receipt_for(c: TraceCall, receipt_id: str) -> Receipt:
    nested = "error" in c.response["result"]
    value = None if nested else c.response["result"]["value"]
    return Receipt(
        receipt_id=receipt_id,
        task_id=TASK,
        call_id=c.call_id,
        tool_id=c.tool_id,
        args_sha256=args_digest(c.args),
        response_sha256=response_digest(c.response),
        source_path="result.value",
        value=value,
        value_sha256=value_digest(value),
        exec_status="error" if nested else "ok",
        validation="valid",
        scope=ReceiptScope(
            entity=c.args["entity"], attribute=c.args["attribute"], level="store", date=c.args["date"]
        ),
    )


def clean_trace() -> tuple[TraceCall, ...]:
    return (call("c-1", "units", value=VALUES["units"]), call("c-2", "revenue", value=VALUES["revenue"]))


def ledger_of(trace: tuple[TraceCall, ...]) -> Ledger:
    # A refused call (``"ok": false``) yields no receipt, as in the trusted adapter.
    return Ledger(
        TASK,
        tuple(receipt_for(c, f"r-{i + 1}") for i, c in enumerate(trace) if c.response.get("ok")),
    )


def certificate(ledger: Ledger, claims: dict[str, tuple[Any, tuple[str, ...]]]) -> Certificate:
    return Certificate(
        task_id=TASK,
        descriptor_digest=descriptor_digest(CONTRACT.descriptor),
        ledger_digest=ledger_digest(ledger),
        claims=tuple(
            Claim(slot=s, value=v, evidence=ev, transform=Transform("identity", {}))
            for s, (v, ev) in claims.items()
        ),
    )


def clean_certificate(ledger: Ledger) -> Certificate:
    return certificate(ledger, {"units": (5, ("r-1",)), "revenue": (700, ("r-2",))})


@dataclasses.dataclass(frozen=True)
class FakeTask:
    """The fields of runner.worlds.Task the policies read (plus split, to prove it is unread)."""

    task_id: str
    family: str
    world_id: str
    split: str
    descriptor: Any
    contract: Contract
    gold: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class FakeSnapshot:
    snapshot_id: str
    task: FakeTask
    condition: str
    trace: tuple[TraceCall, ...]
    ledger: Ledger
    certificate: Certificate
    completion_signal: bool
    recovery_available: bool
    repeated_call: bool
    gold_decision: str


TASK_OBJ = FakeTask(TASK, "lookup", "w99", "heldout", CONTRACT.descriptor, CONTRACT, dict(VALUES))


def snapshot(condition: str) -> FakeSnapshot:
    """The clean snapshot (C0) or one fault (F1..F8), built from the clean one."""
    trace = clean_trace()
    ledger = ledger_of(trace)
    cert = clean_certificate(ledger)
    signal, recovery, repeated = True, False, False
    if condition == "F1":  # completion signal without required claims
        cert = dataclasses.replace(cert, claims=())
    elif condition == "F2":  # relevant receipt replaced by another entity's
        trace = (trace[0], call("c-2", "revenue", entity="S02", value=900))
        ledger = ledger_of(trace)
        cert = certificate(ledger, {"units": (5, ("r-1",)), "revenue": (900, ("r-2",))})
    elif condition == "F3":  # nested error beneath transport success
        trace = (trace[0], call("c-2", "revenue", error=True))
        ledger = ledger_of(trace)
        cert = clean_certificate(ledger)
    elif condition == "F4":  # date scope changed
        trace = (trace[0], call("c-2", "revenue", day="2026-03-03", value=700))
        ledger = ledger_of(trace)
        cert = clean_certificate(ledger)
    elif condition == "F5":  # one required slot omitted
        cert = dataclasses.replace(cert, claims=cert.claims[:1])
    elif condition == "F6":  # value altered after retrieval
        cert = certificate(ledger, {"units": (6, ("r-1",)), "revenue": (700, ("r-2",))})
    elif condition == "F7":  # cites a receipt absent from the trace
        cert = certificate(ledger, {"units": (5, ("r-1",)), "revenue": (700, ("r-9",))})
    elif condition == "F8":  # repeated call despite available recovery
        trace = (trace[0], call("c-2", "units", value=5))
        ledger = ledger_of(trace)
        cert = certificate(ledger, {"units": (5, ("r-1",))})
        signal, recovery, repeated = False, True, True
    elif condition != "C0":
        raise ValueError(condition)
    return FakeSnapshot(
        snapshot_id=f"w99-lookup-{condition}",
        task=TASK_OBJ,
        condition=condition,
        trace=trace,
        ledger=ledger,
        certificate=cert,
        completion_signal=signal,
        recovery_available=recovery,
        repeated_call=repeated,
        gold_decision="complete" if condition == "C0" else "continue",
    )


CONDITIONS = ("C0", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8")
