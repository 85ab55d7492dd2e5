"""Builders for valid ECT objects used across the tests (not a test module)."""

from __future__ import annotations

from typing import Any

from runner.ect import (
    Contract,
    Ledger,
    Receipt,
    args_digest,
    descriptor_digest,
    ledger_digest,
    response_digest,
    value_digest,
)

TASK = "w10-aggregation-0"
DAYS = [f"2026-03-0{d}" for d in range(1, 8)]


def receipt_json(
    rid: str,
    value: Any,
    *,
    entity: str | None = "S03",
    attribute: str | None = "revenue",
    level: str | None = "store",
    date: str | None = "2026-03-01",
    task_id: str = TASK,
    exec_status: str = "ok",
    validation: str = "valid",
) -> dict[str, Any]:
    args = {"entity": entity, "attribute": attribute, "date": date}
    response = {"ok": True, "result": {"value": value}}
    return {
        "receipt_id": rid,
        "task_id": task_id,
        "call_id": "c-" + rid.split("-", 1)[-1],
        "tool_id": "get_metric",
        "args_sha256": args_digest(args),
        "response_sha256": response_digest(response),
        "source_path": "/result/value",
        "value": value,
        "value_sha256": value_digest(value),
        "exec_status": exec_status,
        "validation": validation,
        "scope": {"entity": entity, "attribute": attribute, "level": level, "date": date},
    }


def receipt(rid: str, value: Any, **kw: Any) -> Receipt:
    return Receipt.from_json(receipt_json(rid, value, **kw))


def aggregation_contract_json(n_days: int = 7) -> dict[str, Any]:
    days = DAYS[:n_days]
    scope = {
        "entity": ["S03"],
        "attribute": ["revenue"],
        "level": ["store"],
        "dates": {"start": days[0], "end": days[-1]},
    }
    return {
        "format": "ect.contract/1",
        "task_id": TASK,
        "descriptor": {
            "task_id": TASK,
            "family": "aggregation",
            "world_id": "w10",
            "parameters": {
                "entity": "S03",
                "attribute": "revenue",
                "start": days[0],
                "end": days[-1],
            },
            "required_slots": ["total", "days"],
        },
        "slots": {
            "total": {
                "transforms": [{"op": "sum", "params": {}}],
                "scope": scope,
                "cardinality": {"min": n_days, "max": n_days},
                "nullable": False,
                "tolerance": {"abs": 0},
            },
            "days": {
                "transforms": [{"op": "count", "params": {}}],
                "scope": scope,
                "cardinality": {"min": n_days, "max": n_days},
                "nullable": False,
                "tolerance": {"abs": 0},
            },
        },
    }


VALUES = [41250, 39800, 45010, 38000, 50125, 47300, 27265]


def aggregation_ledger_json(extra: int = 0) -> dict[str, Any]:
    rs = [receipt_json(f"r-{i + 1:04d}", v, date=DAYS[i]) for i, v in enumerate(VALUES)]
    # Extra receipts: another store, same days (in the ledger, not citable for S03).
    for j in range(extra):
        rs.append(
            receipt_json(f"r-{len(VALUES) + j + 1:04d}", 1000 + j, entity="S04", date=DAYS[j])
        )
    return {"format": "ect.ledger/1", "task_id": TASK, "receipts": rs}


def certificate_json(contract: dict[str, Any], ledger: dict[str, Any]) -> dict[str, Any]:
    c = Contract.from_json(contract)
    led = Ledger.from_json(ledger)
    ids = [f"r-{i + 1:04d}" for i in range(len(VALUES))]
    return {
        "format": "ect.certificate/1",
        "task_id": TASK,
        "descriptor_digest": descriptor_digest(c.descriptor),
        "ledger_digest": ledger_digest(led),
        "claims": [
            {
                "slot": "total",
                "value": sum(VALUES),
                "evidence": list(ids),
                "transform": {"op": "sum", "params": {}},
            },
            {
                "slot": "days",
                "value": len(VALUES),
                "evidence": list(ids),
                "transform": {"op": "count", "params": {}},
            },
        ],
    }


def valid_triple(extra: int = 0) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    contract = aggregation_contract_json()
    ledger = aggregation_ledger_json(extra)
    return contract, ledger, certificate_json(contract, ledger)


# --- generic small cases ---------------------------------------------------------------------


def spec(
    *transforms: dict[str, Any],
    scope: dict[str, Any] | None = None,
    card: tuple[int, int] | None = None,
    nullable: bool = False,
    tol: int | float = 0,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "transforms": list(transforms),
        "scope": scope or {},
        "nullable": nullable,
        "tolerance": {"abs": tol},
    }
    if card is not None:
        out["cardinality"] = {"min": card[0], "max": card[1]}
    return out


def op(name: str, **params: Any) -> dict[str, Any]:
    return {"op": name, "params": params}


def triple(
    slots: dict[str, dict[str, Any]],
    receipts: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    *,
    task: str = TASK,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A contract/ledger/certificate whose digests are consistent (claims as given)."""
    contract = {
        "format": "ect.contract/1",
        "task_id": task,
        "descriptor": {
            "task_id": task,
            "family": "test",
            "world_id": "w10",
            "parameters": {},
            "required_slots": list(slots),
        },
        "slots": slots,
    }
    ledger = {"format": "ect.ledger/1", "task_id": task, "receipts": receipts}
    cert = {
        "format": "ect.certificate/1",
        "task_id": task,
        "descriptor_digest": "sha256:" + "0" * 64,
        "ledger_digest": "sha256:" + "0" * 64,
        "claims": claims,
    }
    rebind(contract, ledger, cert)
    return contract, ledger, cert


def rebind(contract: dict[str, Any], ledger: dict[str, Any], cert: dict[str, Any]) -> None:
    """Recompute the certificate's digests after the contract or ledger was edited."""
    cert["descriptor_digest"] = descriptor_digest(contract["descriptor"])
    cert["ledger_digest"] = ledger_digest(Ledger.from_json(ledger))


def claim(slot: str, value: Any, evidence: list[str], transform: dict[str, Any]) -> dict[str, Any]:
    return {"slot": slot, "value": value, "evidence": evidence, "transform": transform}
