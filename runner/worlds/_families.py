"""The six task families: parameters chosen from a world, the contract, and both gold oracles.

Every family has two required slots (docs/protocol.md, "Task families"). Parameters are drawn
from a :class:`Stream` named by the task id, among candidates that satisfy the family's preconditions:

* no missing value inside a metric scope (except the abstention window, which is all null);
* at least one *corrected* cell inside the metric scope, so that fault U1 (a stale read of a
  corrected value) can be staged on any task.

============== ======================================= =====================================
family         slots (transform)                        parameters
============== ======================================= =====================================
lookup         value (identity), parent (identity)      entity, attribute, date
aggregation    total (sum), days (count)                entity, attribute, start, end (7 d)
top_k          top (top_k k=2 desc), best_value (max)   region, attribute, date, k, order
temporal_...   delta (window_sum_diff a-b),             entity, attribute, a, b (two weeks)
               day_change (diff a.end - b.end)
hierarchy_join top_regions (grouped_sum_top_k k=2),     attribute, date, k, order
               regions (union of parents)
missing_data   window (all_null, nullable),             entity, attribute, start, end (gap)
               previous_day (identity)
============== ======================================= =====================================

Oracles: :func:`oracle_python` computes gold from the in-memory world, :func:`oracle_sql`
from the world loaded into an in-memory SQLite database. They share no code beyond reading the
parameters. :func:`admit` returns the gold only when both agree exactly (canonical bytes).
"""

from __future__ import annotations

import datetime as dt
import functools
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runner.canonical import canonical_bytes
from runner.ect import (
    Cardinality,
    Contract,
    ContractScope,
    DateRange,
    Descriptor,
    SlotSpec,
    Transform,
)
from runner.errors import WorldError
from runner.worlds._errors import OracleDisagreement, UnknownWorld
from runner.worlds._rng import Stream
from runner.worlds._world import ATTRIBUTES, World, build_world

__all__ = [
    "FAMILIES",
    "TaskSpec",
    "admit",
    "build_contract",
    "choose_parameters",
    "oracle_python",
    "oracle_sql",
    "world_database",
]

FAMILIES: tuple[str, ...] = (
    "lookup",
    "aggregation",
    "top_k",
    "temporal_comparison",
    "hierarchy_join",
    "missing_data",
)

REQUIRED_SLOTS: dict[str, tuple[str, str]] = {
    "lookup": ("value", "parent"),
    "aggregation": ("total", "days"),
    "top_k": ("top", "best_value"),
    "temporal_comparison": ("delta", "day_change"),
    "hierarchy_join": ("top_regions", "regions"),
    "missing_data": ("window", "previous_day"),
}

TOP_K = 2
WINDOW_DAYS = 7


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What an oracle needs: the task id, family, world and parameters."""

    task_id: str
    family: str
    world_id: str
    parameters: dict[str, Any]


class _HasSpec(Protocol):
    @property
    def task_id(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def parameters(self) -> dict[str, Any]: ...


def _shift(day: str, days: int) -> str:
    return (dt.date.fromisoformat(day) + dt.timedelta(days=days)).isoformat()


def _span(start: str, end: str) -> list[str]:
    d0, d1 = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    return [(d0 + dt.timedelta(days=i)).isoformat() for i in range((d1 - d0).days + 1)]


# --- parameters ------------------------------------------------------------------------------


def _cells_ok(world: World, cells: list[tuple[str, str, str]]) -> bool:
    """No null inside and at least one corrected cell (so U1 can be staged)."""
    if any(world.value(s, a, d) is None for s, a, d in cells):
        return False
    return any(c in world.corrections for c in cells)


def choose_parameters(world: World, family: str, task_id: str) -> dict[str, Any]:
    """Draw the task's parameters from the world (deterministic in ``task_id``).

    Raises:
        WorldError: no candidate satisfies the family's preconditions in this world.
    """
    stream = Stream(world.world_id, "task", task_id)
    dates = world.dates
    candidates: list[dict[str, Any]] = []
    if family == "lookup":
        for (s, a, d), _old in sorted(world.corrections.items()):
            if world.value(s, a, d) is not None:
                candidates.append({"entity": s, "attribute": a, "date": d})
    elif family == "aggregation":
        for s in world.store_ids:
            for a in ATTRIBUTES:
                for i in range(len(dates) - WINDOW_DAYS + 1):
                    window = dates[i : i + WINDOW_DAYS]
                    if _cells_ok(world, [(s, a, d) for d in window]):
                        candidates.append(
                            {"entity": s, "attribute": a, "start": window[0], "end": window[-1]}
                        )
    elif family == "top_k":
        for r in world.regions:
            stores = world.stores_of(r)
            if len(stores) <= TOP_K:
                continue
            for a in ATTRIBUTES:
                for d in dates:
                    if _cells_ok(world, [(s, a, d) for s in stores]):
                        candidates.append(
                            {"region": r, "attribute": a, "date": d, "k": TOP_K, "order": "desc"}
                        )
    elif family == "temporal_comparison":
        for s in world.store_ids:
            for a in ATTRIBUTES:
                for i in range(len(dates) - 2 * WINDOW_DAYS + 1):
                    span = dates[i : i + 2 * WINDOW_DAYS]
                    if _cells_ok(world, [(s, a, d) for d in span]):
                        b = {"start": span[0], "end": span[WINDOW_DAYS - 1]}
                        later = {"start": span[WINDOW_DAYS], "end": span[-1]}
                        candidates.append({"entity": s, "attribute": a, "a": later, "b": b})
    elif family == "hierarchy_join":
        for a in ATTRIBUTES:
            for d in dates:
                if _cells_ok(world, [(s, a, d) for s in world.store_ids]):
                    candidates.append({"attribute": a, "date": d, "k": TOP_K, "order": "desc"})
    elif family == "missing_data":
        s, a, start, end = world.gap
        candidates.append({"entity": s, "attribute": a, "start": start, "end": end})
    else:
        raise WorldError(f"unknown task family {family!r}")
    if not candidates:
        raise WorldError(f"world {world.world_id} has no admissible {family} task")
    return stream.choice(candidates)


# --- contract --------------------------------------------------------------------------------


def _slot(
    op: str,
    params: dict[str, Any],
    scope: ContractScope,
    n: int,
    *,
    nullable: bool = False,
) -> SlotSpec:
    return SlotSpec(
        transforms=(Transform(op, params),),
        scope=scope,
        cardinality=Cardinality(n, n),
        nullable=nullable,
        tolerance_abs=0,
    )


def build_contract(task_id: str, family: str, world: World, params: dict[str, Any]) -> Contract:
    """The trusted contract ``R_t`` of a task (docs/formats.md)."""
    store = ("store",)
    p = params
    slots: dict[str, SlotSpec]
    if family == "lookup":
        ent = (p["entity"],)
        slots = {
            "value": _slot(
                "identity", {}, ContractScope(ent, (p["attribute"],), store, (p["date"],)), 1
            ),
            "parent": _slot("identity", {}, ContractScope(ent, ("parent",), store, None), 1),
        }
    elif family == "aggregation":
        scope = ContractScope(
            (p["entity"],), (p["attribute"],), store, DateRange(p["start"], p["end"])
        )
        n = len(_span(p["start"], p["end"]))
        slots = {"total": _slot("sum", {}, scope, n), "days": _slot("count", {}, scope, n)}
    elif family == "top_k":
        stores = world.stores_of(p["region"])
        scope = ContractScope(stores, (p["attribute"],), store, (p["date"],))
        slots = {
            "top": _slot("top_k", {"k": p["k"], "order": p["order"]}, scope, len(stores)),
            "best_value": _slot("max", {}, scope, len(stores)),
        }
    elif family == "temporal_comparison":
        a, b = p["a"], p["b"]
        ent, attr = (p["entity"],), (p["attribute"],)
        both = ContractScope(ent, attr, store, DateRange(b["start"], a["end"]))
        ends = ContractScope(ent, attr, store, (b["end"], a["end"]))
        n = len(_span(b["start"], a["end"]))
        slots = {
            "delta": _slot("window_sum_diff", {"a": dict(a), "b": dict(b)}, both, n),
            "day_change": _slot("diff", {"a": a["end"], "b": b["end"]}, ends, 2),
        }
    elif family == "hierarchy_join":
        stores = world.store_ids
        joined = ContractScope(stores, (p["attribute"], "parent"), store, (p["date"],))
        members = ContractScope(stores, ("parent",), store, None)
        slots = {
            "top_regions": _slot(
                "grouped_sum_top_k", {"k": p["k"], "order": p["order"]}, joined, 2 * len(stores)
            ),
            "regions": _slot("union", {}, members, len(stores)),
        }
    elif family == "missing_data":
        ent, attr = (p["entity"],), (p["attribute"],)
        gap = ContractScope(ent, attr, store, DateRange(p["start"], p["end"]))
        before = ContractScope(ent, attr, store, (_shift(p["start"], -1),))
        slots = {
            "window": _slot("all_null", {}, gap, len(_span(p["start"], p["end"])), nullable=True),
            "previous_day": _slot("identity", {}, before, 1),
        }
    else:
        raise WorldError(f"unknown task family {family!r}")
    descriptor = Descriptor(
        task_id=task_id,
        family=family,
        world_id=world.world_id,
        parameters=params,
        required_slots=REQUIRED_SLOTS[family],
    )
    return Contract(task_id=task_id, descriptor=descriptor, slots=slots)


# --- oracle 1: pure Python over the world object ----------------------------------------------


def _rank(pairs: dict[str, int], order: str) -> list[str]:
    sign = -1 if order == "desc" else 1
    return [k for k, _ in sorted(pairs.items(), key=lambda kv: (sign * kv[1], kv[0]))]


def _known(world: World, s: str, a: str, d: str) -> int:
    v = world.value(s, a, d)
    if v is None:
        raise WorldError(f"python oracle: {s}/{a}/{d} is missing in world {world.world_id}")
    return v


def oracle_python(task: _HasSpec, world: World) -> dict[str, Any]:
    """Gold answer computed in pure Python from the world's in-memory tables."""
    p = task.parameters
    f = task.family
    if f == "lookup":
        return {
            "value": _known(world, p["entity"], p["attribute"], p["date"]),
            "parent": world.parent(p["entity"]),
        }
    if f == "aggregation":
        days = _span(p["start"], p["end"])
        values = [_known(world, p["entity"], p["attribute"], d) for d in days]
        return {"total": sum(values), "days": len(values)}
    if f == "top_k":
        vals = {
            s: _known(world, s, p["attribute"], p["date"]) for s in world.stores_of(p["region"])
        }
        return {"top": _rank(vals, p["order"])[: p["k"]], "best_value": max(vals.values())}
    if f == "temporal_comparison":
        a, b = p["a"], p["b"]
        wa = sum(_known(world, p["entity"], p["attribute"], d) for d in _span(a["start"], a["end"]))
        wb = sum(_known(world, p["entity"], p["attribute"], d) for d in _span(b["start"], b["end"]))
        end_a = _known(world, p["entity"], p["attribute"], a["end"])
        end_b = _known(world, p["entity"], p["attribute"], b["end"])
        return {"delta": wa - wb, "day_change": end_a - end_b}
    if f == "hierarchy_join":
        totals: dict[str, int] = {}
        for s, r in world.stores:
            totals[r] = totals.get(r, 0) + _known(world, s, p["attribute"], p["date"])
        parents = sorted({r for _, r in world.stores})
        return {"top_regions": _rank(totals, p["order"])[: p["k"]], "regions": parents}
    if f == "missing_data":
        window = [world.value(p["entity"], p["attribute"], d) for d in _span(p["start"], p["end"])]
        if any(v is not None for v in window):
            raise WorldError(f"python oracle: the window of {task.task_id} is not all null")
        before = _known(world, p["entity"], p["attribute"], _shift(p["start"], -1))
        return {"window": None, "previous_day": before}
    raise WorldError(f"unknown task family {f!r}")


# --- oracle 2: SQL over the world loaded into SQLite -------------------------------------------


def world_database(world: World) -> sqlite3.Connection:
    """The world as three tables in a fresh in-memory SQLite database.

    ``entities(id, level, parent)``, ``metrics(entity, attribute, day, value)`` with one row per
    store, attribute and day (``value`` NULL where missing).
    """
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE entities (id TEXT PRIMARY KEY, level TEXT NOT NULL, parent TEXT)")
    db.execute(
        "CREATE TABLE metrics (entity TEXT NOT NULL, attribute TEXT NOT NULL, day TEXT NOT NULL,"
        " value INTEGER, PRIMARY KEY (entity, attribute, day))"
    )
    db.executemany("INSERT INTO entities VALUES (?, 'region', NULL)", [(r,) for r in world.regions])
    db.executemany("INSERT INTO entities VALUES (?, 'store', ?)", list(world.stores))
    rows: list[tuple[str, str, str, int | None]] = []
    for (s, a), series in world.metrics.items():
        rows.extend((s, a, d, v) for d, v in zip(world.dates, series, strict=True))
    db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?)", rows)
    return db


@functools.cache
def _database_for(world_id: str) -> sqlite3.Connection:
    return world_database(build_world(world_id))


def _cached_database(world: World) -> sqlite3.Connection:
    """One read-only database per generated world (a world passed in by a test gets its own)."""
    try:
        generated = build_world(world.world_id)
    except UnknownWorld:
        generated = None
    if world is generated:
        return _database_for(world.world_id)
    return world_database(world)


def _one(db: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> Any:
    row = db.execute(sql, args).fetchone()
    return None if row is None else row[0]


def _complete_window(db: sqlite3.Connection, args: tuple[Any, ...], n: int, task_id: str) -> None:
    known = _one(
        db,
        "SELECT COUNT(value) FROM metrics WHERE entity=? AND attribute=? AND day BETWEEN ? AND ?",
        args,
    )
    if known != n:
        raise WorldError(f"sql oracle: {task_id} has missing values in its window")


def oracle_sql(task: _HasSpec, world: World) -> dict[str, Any]:
    """Gold answer computed by SQL queries over :func:`world_database`."""
    p = task.parameters
    f = task.family
    db = _cached_database(world)
    if f == "lookup":
        value = _one(
            db,
            "SELECT value FROM metrics WHERE entity=? AND attribute=? AND day=?",
            (p["entity"], p["attribute"], p["date"]),
        )
        if value is None:
            raise WorldError(f"sql oracle: {task.task_id} looks up a missing value")
        parent = _one(db, "SELECT parent FROM entities WHERE id=?", (p["entity"],))
        return {"value": value, "parent": parent}
    if f == "aggregation":
        args = (p["entity"], p["attribute"], p["start"], p["end"])
        n = _one(
            db,
            "SELECT julianday(?) - julianday(?) + 1",
            (p["end"], p["start"]),
        )
        _complete_window(db, args, int(n), task.task_id)
        total, days = db.execute(
            "SELECT SUM(value), COUNT(*) FROM metrics"
            " WHERE entity=? AND attribute=? AND day BETWEEN ? AND ?",
            args,
        ).fetchone()
        return {"total": total, "days": days}
    if f == "top_k":
        order = "DESC" if p["order"] == "desc" else "ASC"
        rows = db.execute(
            "SELECT m.entity, m.value FROM metrics m JOIN entities e ON e.id = m.entity"
            " WHERE e.parent=? AND m.attribute=? AND m.day=?"
            f" ORDER BY m.value {order}, m.entity ASC",
            (p["region"], p["attribute"], p["date"]),
        ).fetchall()
        if any(v is None for _, v in rows):
            raise WorldError(f"sql oracle: {task.task_id} ranks a missing value")
        top = [e for e, _ in rows[: p["k"]]]
        best = _one(
            db,
            "SELECT MAX(m.value) FROM metrics m JOIN entities e ON e.id = m.entity"
            " WHERE e.parent=? AND m.attribute=? AND m.day=?",
            (p["region"], p["attribute"], p["date"]),
        )
        return {"top": top, "best_value": best}
    if f == "temporal_comparison":
        a, b = p["a"], p["b"]
        _complete_window(
            db,
            (p["entity"], p["attribute"], b["start"], a["end"]),
            2 * WINDOW_DAYS,
            task.task_id,
        )
        delta = _one(
            db,
            "SELECT SUM(CASE WHEN day BETWEEN ? AND ? THEN value ELSE 0 END)"
            " - SUM(CASE WHEN day BETWEEN ? AND ? THEN value ELSE 0 END)"
            " FROM metrics WHERE entity=? AND attribute=?",
            (a["start"], a["end"], b["start"], b["end"], p["entity"], p["attribute"]),
        )
        change = _one(
            db,
            "SELECT x.value - y.value FROM metrics x JOIN metrics y"
            " ON x.entity = y.entity AND x.attribute = y.attribute"
            " WHERE x.entity=? AND x.attribute=? AND x.day=? AND y.day=?",
            (p["entity"], p["attribute"], a["end"], b["end"]),
        )
        return {"delta": delta, "day_change": change}
    if f == "hierarchy_join":
        order = "DESC" if p["order"] == "desc" else "ASC"
        missing = _one(
            db,
            "SELECT COUNT(*) FROM metrics WHERE attribute=? AND day=? AND value IS NULL",
            (p["attribute"], p["date"]),
        )
        if missing:
            raise WorldError(f"sql oracle: {task.task_id} sums a missing value")
        rows = db.execute(
            "SELECT e.parent, SUM(m.value) AS total FROM metrics m"
            " JOIN entities e ON e.id = m.entity"
            " WHERE e.level = 'store' AND m.attribute=? AND m.day=?"
            f" GROUP BY e.parent ORDER BY total {order}, e.parent ASC LIMIT ?",
            (p["attribute"], p["date"], p["k"]),
        ).fetchall()
        regions = [
            r
            for (r,) in db.execute(
                "SELECT DISTINCT parent FROM entities WHERE level='store' ORDER BY parent"
            ).fetchall()
        ]
        return {"top_regions": [r for r, _ in rows], "regions": regions}
    if f == "missing_data":
        known = _one(
            db,
            "SELECT COUNT(value) FROM metrics"
            " WHERE entity=? AND attribute=? AND day BETWEEN ? AND ?",
            (p["entity"], p["attribute"], p["start"], p["end"]),
        )
        if known:
            raise WorldError(f"sql oracle: the window of {task.task_id} is not all null")
        before = _one(
            db,
            "SELECT value FROM metrics WHERE entity=? AND attribute=? AND day=date(?, '-1 day')",
            (p["entity"], p["attribute"], p["start"]),
        )
        return {"window": None, "previous_day": before}
    raise WorldError(f"unknown task family {f!r}")


Oracle = Callable[[_HasSpec, World], dict[str, Any]]


def admit(
    task: _HasSpec,
    world: World,
    *,
    sql: Oracle = oracle_sql,
    python: Oracle = oracle_python,
) -> dict[str, Any]:
    """Return the gold answer if both oracles agree exactly (canonical bytes), else refuse.

    Raises:
        OracleDisagreement: naming the task and both answers.
        WorldError: an oracle found the task inadmissible (a missing value in scope, ...).
    """
    from_sql = sql(task, world)
    from_python = python(task, world)
    if canonical_bytes(from_sql) != canonical_bytes(from_python):
        raise OracleDisagreement(task.task_id, from_sql, from_python)
    return from_python
