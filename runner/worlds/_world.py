"""Worlds generated from their id alone (docs/protocol.md, part 1).

A world is a hierarchy of 3 regions -> 9..12 stores and, for every store, 28 days (2026-03-01 ..
2026-03-28) of three daily integer metrics: ``units``, ``revenue`` (cents) and ``returns``.
Some values are deliberately missing (``null``): scattered single days, and one planted gap of
4..6 consecutive days for one store and attribute (the missing-data abstention family uses it).
About one published value in twelve was later *corrected*: the world keeps the superseded value
so that a stale read can be staged (fault U1). Every number comes from a :class:`Stream` seeded
by the world id, so a world is byte-identical in every process, forever.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.canonical import canonical_bytes, digest
from runner.worlds._errors import UnknownWorld
from runner.worlds._rng import Stream

__all__ = [
    "ATTRIBUTES",
    "LEVELS",
    "WORLDS_CLOSED_LOOP",
    "WORLDS_STATIC",
    "WORLDS_STATIC_DEV",
    "WORLDS_STATIC_HELDOUT",
    "WORLD_DAYS",
    "WORLD_FORMAT",
    "WORLD_START",
    "World",
    "build_world",
    "write_snapshot",
]

WORLD_FORMAT = "ect.world/1"
WORLDS_STATIC_DEV: tuple[str, ...] = ("w00", "w01")
WORLDS_STATIC_HELDOUT: tuple[str, ...] = ("w02", "w03", "w04", "w05", "w06", "w07")
WORLDS_STATIC: tuple[str, ...] = WORLDS_STATIC_DEV + WORLDS_STATIC_HELDOUT
WORLDS_CLOSED_LOOP: tuple[str, ...] = ("w10", "w11", "w12", "w13")

WORLD_START = dt.date(2026, 3, 1)
WORLD_DAYS = 28
ATTRIBUTES: tuple[str, ...] = ("units", "revenue", "returns")
LEVELS: tuple[str, ...] = ("region", "store")
REGIONS: tuple[str, ...] = ("R1", "R2", "R3")

# Weekday demand factors in percent, Monday first (2026-03-01 is a Sunday).
_WEEKDAY_PCT = (92, 95, 100, 104, 118, 131, 112)


@dataclass(frozen=True, slots=True, eq=False)
class World:
    """One generated world. Immutable: metrics are tuples, maps are never mutated after build."""

    world_id: str
    regions: tuple[str, ...]
    stores: tuple[tuple[str, str], ...]  # (store id, region id), sorted by store id
    dates: tuple[str, ...]
    metrics: dict[tuple[str, str], tuple[int | None, ...]]  # (store, attribute) -> per day
    corrections: dict[tuple[str, str, str], int]  # (store, attribute, date) -> superseded value
    gap: tuple[str, str, str, str]  # (store, attribute, first date, last date), all null
    date_index: dict[str, int]  # date -> position in ``dates``

    # -- lookups --------------------------------------------------------------------------
    @property
    def store_ids(self) -> tuple[str, ...]:
        return tuple(s for s, _ in self.stores)

    def parent(self, entity: str) -> str | None:
        for store, region in self.stores:
            if store == entity:
                return region
        if entity in self.regions:
            return None
        raise KeyError(entity)

    def stores_of(self, region: str) -> tuple[str, ...]:
        return tuple(s for s, r in self.stores if r == region)

    def day_index(self, day: str) -> int:
        return self.date_index[day]

    def value(self, store: str, attribute: str, day: str) -> int | None:
        return self.metrics[(store, attribute)][self.day_index(day)]

    @property
    def start(self) -> str:
        return self.dates[0]

    @property
    def end(self) -> str:
        return self.dates[-1]

    # -- serialisation --------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The world as JSON (``format: ect.world/1``; see ``runner/worlds/tools.py``).

        Returns a fresh object each call; its canonical bytes are what the sandbox binds.
        """
        corrections: dict[str, dict[str, dict[str, int]]] = {}
        for (store, attribute, day), old in sorted(self.corrections.items()):
            corrections.setdefault(store, {}).setdefault(attribute, {})[day] = old
        return {
            "format": WORLD_FORMAT,
            "world_id": self.world_id,
            "start": self.start,
            "end": self.end,
            "attributes": list(ATTRIBUTES),
            "levels": list(LEVELS),
            "entities": {
                "region": [{"id": r, "parent": None} for r in self.regions],
                "store": [{"id": s, "parent": r} for s, r in self.stores],
            },
            "metrics": {
                s: {a: list(self.metrics[(s, a)]) for a in ATTRIBUTES} for s in self.store_ids
            },
            "corrections": corrections,
        }

    def digest(self) -> str:
        """``ect/manifest/v1`` digest of :meth:`snapshot` (pinned in the task manifest)."""
        return digest("ect/manifest/v1", self.snapshot())


def _check_id(world_id: str) -> None:
    if world_id not in WORLDS_STATIC and world_id not in WORLDS_CLOSED_LOOP:
        known = ", ".join(WORLDS_STATIC + WORLDS_CLOSED_LOOP)
        raise UnknownWorld(f"unknown world {world_id!r} (known: {known})")


@functools.cache
def build_world(world_id: str) -> World:
    """Generate the world ``world_id`` from its id alone (cached; the result is immutable).

    Raises:
        UnknownWorld: ``world_id`` is not one of the study's worlds.
    """
    _check_id(world_id)
    dates = tuple((WORLD_START + dt.timedelta(days=i)).isoformat() for i in range(WORLD_DAYS))

    # Hierarchy: 3 regions with 3 or 4 stores each; store ids assigned to regions at random.
    shape = Stream(world_id, "hierarchy")
    sizes = [shape.randint(3, 4) for _ in REGIONS]
    n_stores = sum(sizes)
    ids = [f"S{i:02d}" for i in range(1, n_stores + 1)]
    order = shape.shuffled(ids)
    stores: list[tuple[str, str]] = []
    at = 0
    for region, size in zip(REGIONS, sizes, strict=True):
        stores.extend((s, region) for s in order[at : at + size])
        at += size
    stores.sort()

    metrics: dict[tuple[str, str], list[int | None]] = {}
    for store, _region in stores:
        prof = Stream(world_id, "profile", store)
        base = prof.randint(40, 400)
        price = prof.randint(399, 4999)
        rate = prof.randint(5, 60)  # returns per mille of units
        units: list[int | None] = []
        revenue: list[int | None] = []
        returns: list[int | None] = []
        day_s = Stream(world_id, "days", store)
        for i in range(WORLD_DAYS):
            weekday = (WORLD_START + dt.timedelta(days=i)).weekday()
            noise = day_s.randint(-(base // 5), base // 5)
            u = max(0, base * _WEEKDAY_PCT[weekday] // 100 + noise)
            discount = day_s.randint(0, 12)
            units.append(u)
            revenue.append(u * price * (100 - discount) // 100)
            returns.append((u * rate + day_s.randint(0, 999)) // 1000)
        metrics[(store, "units")] = units
        metrics[(store, "revenue")] = revenue
        metrics[(store, "returns")] = returns

    raw = {k: list(v) for k, v in metrics.items()}

    # Scattered missing values: about one cell in forty.
    holes = Stream(world_id, "holes")
    for store, _region in stores:
        for attribute in ATTRIBUTES:
            series = metrics[(store, attribute)]
            for i in range(WORLD_DAYS):
                if holes.chance(1, 40):
                    series[i] = None

    # The planted gap: one store/attribute, 4..6 consecutive null days, the day before it known.
    gap_s = Stream(world_id, "gap")
    g_store = gap_s.choice([s for s, _ in stores])
    g_attr = gap_s.choice(ATTRIBUTES)
    g_len = gap_s.randint(4, 6)
    g_start = gap_s.randint(8, WORLD_DAYS - g_len - 1)
    series = metrics[(g_store, g_attr)]
    for i in range(g_start, g_start + g_len):
        series[i] = None
    if series[g_start - 1] is None:
        series[g_start - 1] = raw[(g_store, g_attr)][g_start - 1]
    gap = (g_store, g_attr, dates[g_start], dates[g_start + g_len - 1])

    # Corrections: about one published value in twelve was superseded by a later correction,
    # and always the reference day before the gap.
    corr_s = Stream(world_id, "corrections")
    corrections: dict[tuple[str, str, str], int] = {}
    for store, _region in stores:
        for attribute in ATTRIBUTES:
            for i, v in enumerate(metrics[(store, attribute)]):
                forced = (store, attribute, i) == (g_store, g_attr, g_start - 1)
                if v is None or not (corr_s.chance(1, 12) or forced):
                    continue
                delta = corr_s.randint(1, max(1, v // 10))
                old = v + delta if (v - delta < 0 or corr_s.chance(1, 2)) else v - delta
                corrections[(store, attribute, dates[i])] = old

    return World(
        world_id=world_id,
        regions=REGIONS,
        stores=tuple(stores),
        dates=dates,
        metrics={k: tuple(v) for k, v in metrics.items()},
        corrections=corrections,
        gap=gap,
        date_index={d: i for i, d in enumerate(dates)},
    )


def write_snapshot(world_id: str, directory: str | Path) -> Path:
    """Write ``<directory>/<world_id>.json`` as canonical bytes; returns the path."""
    world = build_world(world_id)
    path = Path(directory) / f"{world_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canonical_bytes(world.snapshot()))
    return path
