"""World generation: id sets, determinism across runs and processes, shape, missing values."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runner.canonical import canonical_bytes, loads_strict
from runner.worlds import (
    ATTRIBUTES,
    WORLDS_CLOSED_LOOP,
    WORLDS_STATIC,
    WORLDS_STATIC_DEV,
    WORLDS_STATIC_HELDOUT,
    UnknownWorld,
    build_world,
    write_snapshot,
)
from runner.worlds._world import WORLD_DAYS

ALL = (*WORLDS_STATIC, *WORLDS_CLOSED_LOOP)


def test_world_id_sets_are_disjoint_and_as_specified() -> None:
    assert WORLDS_STATIC_DEV == ("w00", "w01")
    assert WORLDS_STATIC_HELDOUT == ("w02", "w03", "w04", "w05", "w06", "w07")
    assert WORLDS_CLOSED_LOOP == ("w10", "w11", "w12", "w13")
    sets = [set(WORLDS_STATIC_DEV), set(WORLDS_STATIC_HELDOUT), set(WORLDS_CLOSED_LOOP)]
    assert sum(len(s) for s in sets) == len(set().union(*sets))


def test_unknown_world_is_refused() -> None:
    with pytest.raises(UnknownWorld, match="w99"):
        build_world("w99")


def test_generation_is_byte_identical_across_runs() -> None:
    for w in ALL:
        fresh = build_world.__wrapped__(w)  # bypass the cache: a second, independent build
        assert canonical_bytes(fresh.snapshot()) == canonical_bytes(build_world(w).snapshot())


def test_worlds_differ_from_each_other() -> None:
    digests = {build_world(w).digest() for w in ALL}
    assert len(digests) == len(ALL)


_CHILD = """
import sys
from runner.worlds import build_world, task_manifest_digest
ids = sys.argv[1:]
print(" ".join(build_world(w).digest() for w in ids))
print(task_manifest_digest())
"""


def test_generation_is_byte_identical_across_processes() -> None:
    outputs = []
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, *ALL],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    from runner.worlds import task_manifest_digest

    assert outputs[0].split() == [*(build_world(w).digest() for w in ALL), task_manifest_digest()]


@pytest.mark.parametrize("world_id", ALL)
def test_world_shape(world_id: str) -> None:
    w = build_world(world_id)
    assert w.regions == ("R1", "R2", "R3")
    assert 9 <= len(w.stores) <= 12
    assert all(len(w.stores_of(r)) >= 3 for r in w.regions)
    assert len(w.dates) == WORLD_DAYS and w.start == "2026-03-01" and w.end == "2026-03-28"
    for s in w.store_ids:
        for a in ATTRIBUTES:
            series = w.metrics[(s, a)]
            assert len(series) == WORLD_DAYS
            assert all(v is None or (type(v) is int and v >= 0) for v in series)
    # Deliberately missing values: scattered nulls plus the planted all-null gap.
    nulls = sum(v is None for series in w.metrics.values() for v in series)
    store, attr, start, end = w.gap
    gap_days = [d for d in w.dates if start <= d <= end]
    assert 4 <= len(gap_days) <= 6
    assert all(w.value(store, attr, d) is None for d in gap_days)
    before = w.dates[w.day_index(start) - 1]
    assert w.value(store, attr, before) is not None
    assert (store, attr, before) in w.corrections
    assert nulls > len(gap_days)
    # Corrections keep a superseded value that differs from the current one.
    assert w.corrections
    for (s, a, d), old in w.corrections.items():
        assert w.value(s, a, d) is not None and old != w.value(s, a, d) and old >= 0


def test_write_snapshot_writes_canonical_bytes(tmp_path) -> None:
    path = write_snapshot("w03", tmp_path)
    assert path == tmp_path / "w03.json"
    data = path.read_bytes()
    assert data == canonical_bytes(build_world("w03").snapshot())
    snap = loads_strict(data)
    assert snap["format"] == "ect.world/1" and snap["world_id"] == "w03"


def test_snapshot_is_a_fresh_copy() -> None:
    a = build_world("w01").snapshot()
    a["metrics"]["S01"]["units"][0] = -1
    assert build_world("w01").snapshot()["metrics"]["S01"]["units"][0] != -1
