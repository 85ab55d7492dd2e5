"""Task families, contracts, and the dual oracles (admission and refusal)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runner.canonical import canonical_bytes
from runner.ect import Contract, Descriptor, descriptor_digest
from runner.errors import WorldError
from runner.worlds import (
    FAMILIES,
    REQUIRED_SLOTS,
    OracleDisagreement,
    TaskSpec,
    UnknownTask,
    admit,
    build_world,
    closed_loop_tasks,
    get_task,
    oracle_python,
    oracle_sql,
    static_tasks,
)


def test_task_sets_have_the_specified_shape() -> None:
    st, cl = static_tasks(), closed_loop_tasks()
    assert len(st) == 48 and len(cl) == 24
    assert [t.world_id for t in st] == [w for w in [f"w0{i}" for i in range(8)] for _ in FAMILIES]
    assert [t.family for t in st] == list(FAMILIES) * 8
    assert [t.family for t in cl] == list(FAMILIES) * 4
    assert {t.split for t in st[:12]} == {"dev"} and {t.split for t in st[12:]} == {"heldout"}
    assert {t.split for t in cl} == {"closed_loop"}
    assert len({t.task_id for t in (*st, *cl)}) == 72
    assert {t.world_id for t in st}.isdisjoint({t.world_id for t in cl})


def test_every_task_has_two_required_slots_a_frozen_descriptor_and_a_contract() -> None:
    for t in (*static_tasks(), *closed_loop_tasks()):
        assert len(t.descriptor.required_slots) >= 2
        assert t.descriptor.required_slots == REQUIRED_SLOTS[t.family]
        assert set(t.gold) == set(t.descriptor.required_slots)
        # Strict wire round trips: the contract and descriptor are what `ect verify` reads.
        assert Contract.from_json(t.contract.to_json()) == t.contract
        assert Descriptor.from_json(t.descriptor.to_json()) == t.descriptor
        assert t.contract.descriptor == t.descriptor and t.contract.task_id == t.task_id
        with pytest.raises(dataclasses.FrozenInstanceError):
            t.descriptor.task_id = "x"  # type: ignore[misc]
        assert descriptor_digest(t.descriptor).startswith("sha256:")


def test_both_oracles_agree_exactly_on_every_admitted_task() -> None:
    for t in (*static_tasks(), *closed_loop_tasks()):
        world = build_world(t.world_id)
        by_sql, by_python = oracle_sql(t, world), oracle_python(t, world)
        assert canonical_bytes(by_sql) == canonical_bytes(by_python) == canonical_bytes(t.gold)


def test_gold_answers_have_the_expected_types() -> None:
    for t in static_tasks():
        g = t.gold
        if t.family == "lookup":
            assert type(g["value"]) is int and g["parent"] in ("R1", "R2", "R3")
        elif t.family == "aggregation":
            assert g["days"] == 7 and type(g["total"]) is int
        elif t.family == "top_k":
            assert len(g["top"]) == 2 and type(g["best_value"]) is int
        elif t.family == "temporal_comparison":
            assert type(g["delta"]) is int and type(g["day_change"]) is int
        elif t.family == "hierarchy_join":
            assert len(g["top_regions"]) == 2 and g["regions"] == ["R1", "R2", "R3"]
        else:
            assert g["window"] is None and type(g["previous_day"]) is int


def test_planted_disagreement_is_refused_naming_task_and_values() -> None:
    task = get_task("w03-aggregation-0")
    world = build_world("w03")

    def off_by_one(t: Any, w: Any) -> dict[str, Any]:
        gold = oracle_python(t, w)
        return dict(gold, total=gold["total"] + 1)

    with pytest.raises(OracleDisagreement) as err:
        admit(task, world, python=off_by_one)
    assert err.value.task_id == "w03-aggregation-0"
    assert str(task.gold["total"]) in str(err.value) and str(task.gold["total"] + 1) in str(
        err.value
    )


def test_planted_world_corruption_is_seen_by_one_oracle_only() -> None:
    """Corrupt the table the SQL oracle loads: the two oracles must then disagree."""
    task = get_task("w05-top_k-0")
    world = build_world("w05")
    p = task.parameters
    leader = task.gold["top"][0]
    corrupt = dict(world.metrics)
    series = list(corrupt[(leader, p["attribute"])])
    series[world.day_index(p["date"])] = 0
    corrupt[(leader, p["attribute"])] = tuple(series)
    bad_world = dataclasses.replace(world, metrics=corrupt)
    with pytest.raises(OracleDisagreement, match="w05-top_k-0"):
        admit(task, world, sql=lambda t, _w: oracle_sql(t, bad_world))


def test_integer_and_float_answers_are_not_equal() -> None:
    task = get_task("w02-aggregation-0")
    world = build_world("w02")
    with pytest.raises(OracleDisagreement):
        admit(task, world, python=lambda t, w: dict(oracle_python(t, w), days=7.5))


def test_inadmissible_parameters_are_refused_by_the_oracles() -> None:
    world = build_world("w02")
    store, attr, start, end = world.gap
    spec = TaskSpec(
        "w02-aggregation-x",
        "aggregation",
        "w02",
        {"entity": store, "attribute": attr, "start": start, "end": end},
    )
    with pytest.raises(WorldError):
        oracle_python(spec, world)
    with pytest.raises(WorldError):
        oracle_sql(spec, world)


def test_get_task_unknown() -> None:
    assert get_task("w10-lookup-0").split == "closed_loop"
    with pytest.raises(UnknownTask):
        get_task("w99-lookup-0")
