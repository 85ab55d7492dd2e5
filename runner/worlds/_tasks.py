"""Admitted tasks: the static set (48) and the closed-loop set (24), built from the worlds."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from runner.canonical import JsonRecord
from runner.ect import Contract, Descriptor, descriptor_digest
from runner.worlds import tools
from runner.worlds._adapter import TraceCall, call_id
from runner.worlds._errors import UnknownTask
from runner.worlds._families import (
    FAMILIES,
    TaskSpec,
    admit,
    build_contract,
    choose_parameters,
)
from runner.worlds._world import (
    WORLDS_CLOSED_LOOP,
    WORLDS_STATIC,
    WORLDS_STATIC_DEV,
    build_world,
)

__all__ = [
    "Split",
    "Task",
    "closed_loop_tasks",
    "execute_calls",
    "get_task",
    "static_tasks",
    "world_snapshot",
]

Split = Literal["dev", "heldout", "closed_loop"]


@dataclass(frozen=True, slots=True)
class Task(JsonRecord):
    """An admitted task: frozen descriptor, trusted contract and dual-oracle gold answer."""

    task_id: str
    family: str
    world_id: str
    split: Split
    descriptor: Descriptor
    contract: Contract
    gold: dict[str, Any]

    _derived = ("descriptor_digest",)

    @property
    def parameters(self) -> dict[str, Any]:
        return self.descriptor.parameters

    @property
    def descriptor_digest(self) -> str:
        return descriptor_digest(self.descriptor)


def task_id_for(world_id: str, family: str) -> str:
    return f"{world_id}-{family}-0"


@functools.cache
def world_snapshot(world_id: str) -> dict[str, Any]:
    """The cached snapshot the in-process tools read (shared: never mutate it)."""
    return build_world(world_id).snapshot()


def execute_calls(
    world_id: str, calls: Sequence[tuple[str, dict[str, Any]]], *, first_call: int = 1
) -> list[TraceCall]:
    """Run calls in-process through ``tools.call_tool``; call ids ``c-%04d`` from ``first_call``."""
    snap = world_snapshot(world_id)
    return [
        TraceCall(call_id(first_call + i), tool, dict(args), tools.call_tool(snap, tool, args))
        for i, (tool, args) in enumerate(calls)
    ]


def _build(world_id: str, family: str, split: Split) -> Task:
    world = build_world(world_id)
    tid = task_id_for(world_id, family)
    params = choose_parameters(world, family, tid)
    gold = admit(TaskSpec(tid, family, world_id, params), world)
    contract = build_contract(tid, family, world, params)
    return Task(
        task_id=tid,
        family=family,
        world_id=world_id,
        split=split,
        descriptor=contract.descriptor,
        contract=contract,
        gold=gold,
    )


@functools.lru_cache(maxsize=1)
def _static() -> tuple[Task, ...]:
    return tuple(
        _build(w, f, "dev" if w in WORLDS_STATIC_DEV else "heldout")
        for w in WORLDS_STATIC
        for f in FAMILIES
    )


@functools.lru_cache(maxsize=1)
def _closed() -> tuple[Task, ...]:
    return tuple(_build(w, f, "closed_loop") for w in WORLDS_CLOSED_LOOP for f in FAMILIES)


def static_tasks() -> list[Task]:
    """The 48 static tasks (8 worlds x 6 families), world-major, families in FAMILIES order."""
    return list(_static())


def closed_loop_tasks() -> list[Task]:
    """The 24 closed-loop tasks (worlds w10..w13 x 6 families), same order."""
    return list(_closed())


def get_task(task_id: str) -> Task:
    """Look a task up by id in either set.

    Raises:
        UnknownTask: no such task.
    """
    for task in (*_static(), *_closed()):
        if task.task_id == task_id:
            return task
    raise UnknownTask(f"unknown task {task_id!r} (ids look like w02-top_k-0 or w10-lookup-0)")
