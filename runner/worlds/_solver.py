"""The honest solver: which calls cover a contract, and the certificate its ledger supports.

:func:`plan_calls` reads only the contract (never the world or the gold answer).
:func:`propose_certificate` reads only the contract and the ledger: it cites valid, successful,
in-scope receipts (one per scope key) and computes every value by ``runner.ect.replay``. Used to
build the clean snapshots and checkpoints, and by the simulated planner.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from runner.ect import (
    Certificate,
    Claim,
    Contract,
    ContractScope,
    DateRange,
    Ledger,
    Receipt,
    ReplayError,
    SlotSpec,
    descriptor_digest,
    ledger_digest,
    replay,
)

__all__ = ["in_scope", "plan_calls", "propose_certificate", "scope_dates"]


def scope_dates(dates: DateRange | tuple[str, ...] | None) -> list[str] | None:
    """The explicit list of dates a contract scope names (``None``: unconstrained)."""
    if dates is None:
        return None
    if isinstance(dates, DateRange):
        d0, d1 = dt.date.fromisoformat(dates.start), dt.date.fromisoformat(dates.end)
        return [(d0 + dt.timedelta(days=i)).isoformat() for i in range((d1 - d0).days + 1)]
    return sorted(set(dates))


def in_scope(receipt: Receipt, scope: ContractScope) -> bool:
    """Whether a receipt's scope lies inside a slot's scope (membership receipts are timeless)."""
    rs = receipt.scope
    if scope.entity is not None and rs.entity not in scope.entity:
        return False
    if scope.attribute is not None and rs.attribute not in scope.attribute:
        return False
    if scope.level is not None and rs.level not in scope.level:
        return False
    if scope.dates is not None and rs.attribute != "parent":
        if isinstance(scope.dates, DateRange):
            return rs.date in scope.dates
        return rs.date in scope.dates
    return True


def plan_calls(contract: Contract) -> list[tuple[str, dict[str, Any]]]:
    """The minimal calls whose receipts cover every slot's scope, in a canonical order.

    Membership first (``get_parent`` for one entity, ``list_entities`` for several), then one
    call per (entity, attribute): ``get_metric`` for a single date, else ``get_series`` over the
    smallest range holding every needed date. Sorted by entity, then attribute.
    """
    members: set[str] = set()
    member_levels: set[str] = set()
    needs: dict[tuple[str, str], set[str]] = {}
    for spec in contract.slots.values():
        sc = spec.scope
        entities = sc.entity or ()
        attributes = sc.attribute or ()
        for attr in attributes:
            if attr == "parent":
                members.update(entities)
                member_levels.update(sc.level or ("store",))
                continue
            days = scope_dates(sc.dates) or []
            for ent in entities:
                needs.setdefault((ent, attr), set()).update(days)
    calls: list[tuple[str, dict[str, Any]]] = []
    if len(members) == 1:
        calls.append(("get_parent", {"entity": next(iter(members))}))
    elif members:
        for level in sorted(member_levels):
            calls.append(("list_entities", {"level": level}))
    for (ent, attr), wanted in sorted(needs.items()):
        if not wanted:
            continue
        ordered = sorted(wanted)
        if len(ordered) == 1:
            calls.append(("get_metric", {"entity": ent, "attribute": attr, "date": ordered[0]}))
        else:
            calls.append(
                (
                    "get_series",
                    {"entity": ent, "attribute": attr, "start": ordered[0], "end": ordered[-1]},
                )
            )
    return calls


def _usable(receipts: Iterable[Receipt], task_id: str, spec: SlotSpec) -> list[Receipt]:
    """Valid, successful, in-scope receipts of this task, the first per scope key."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for r in sorted(receipts, key=lambda r: r.receipt_id):
        if r.task_id != task_id or r.exec_status != "ok" or r.validation != "valid":
            continue
        if not in_scope(r, spec.scope) or r.scope.key in seen:
            continue
        seen.add(r.scope.key)
        out.append(r)
    return out


def _fit(receipts: Sequence[Receipt], spec: SlotSpec) -> list[Receipt]:
    """Trim to the slot's cardinality maximum (keeps the earliest receipt ids)."""
    if spec.cardinality is not None and len(receipts) > spec.cardinality.max:
        return list(receipts[: spec.cardinality.max])
    return list(receipts)


def propose_certificate(contract: Contract, ledger: Ledger) -> Certificate:
    """The certificate an honest agent proposes from ``ledger``.

    For each required slot: cite the usable receipts (valid, ``ok``, in scope, one per scope
    key) and claim the first permitted transform's replay over them. A slot with no usable
    receipt, or whose replay fails, is left out: the certificate is then incomplete and the
    verifier says ``continue`` (coverage), which is what a truthful agent should hear.
    """
    claims: list[Claim] = []
    for slot, spec in contract.slots.items():
        cited = _fit(_usable(ledger.receipts, contract.task_id, spec), spec)
        if not cited:
            continue
        transform = spec.transforms[0]
        try:
            value = replay(transform, cited)
        except ReplayError:
            continue
        claims.append(
            Claim(
                slot=slot,
                value=value,
                evidence=tuple(r.receipt_id for r in cited),
                transform=transform,
            )
        )
    return Certificate(
        task_id=contract.task_id,
        descriptor_digest=descriptor_digest(contract.descriptor),
        ledger_digest=ledger_digest(ledger),
        claims=tuple(claims),
    )
