"""The simulated planner sees the checkpoint as a real model would, and is tempted by it.

Before, the planner never looked at what a checkpoint held besides its trace: the draft
certificate written before the checkpoint (with the fault's forged reference, wrong-scope or
failed receipt, altered value or wrong transform parameter) never reached it, so a fault
stratum did not exercise the check it is named for. Now the view carries the draft and the
planner may submit it (``p_reuse_draft``) -- while staying blind to the fault label, the
gold answer, the split and the pipeline under test.
"""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

import anyio
import pytest

from runner.ect import ledger_digest
from runner.loop import TrajectoryConfig, run_trajectory
from runner.policies import (
    CellIdentity,
    CriticBehaviour,
    PlannerBehaviour,
    PlannerView,
    build_planner_request,
    make_pipeline,
    simulated_responder,
)
from runner.policies._views import extract_view
from runner.providers import (
    FunctionCall,
    GenerationConfig,
    ProviderRequest,
    SimulatedProvider,
    SimulatedReply,
)
from runner.worlds import TaskCheckpoint, closed_loop_checkpoints, world_snapshot
from runner.worlds.tools import call_tool

INCOMPLETE = [c for c in closed_loop_checkpoints() if c.kind == "incomplete"]
GEN = GenerationConfig(temperature=0.2, seed=9, max_output_tokens=512)
# Everything the planner must never see: label keys, split names, fault codes as values, and
# the names of the pipelines under test as keys.
_LABELS = re.compile(r'"(split|fault|gold|policy|pipeline|checkpoint_id|kind)"\s*:'
                     r'|heldout|held-out|"(F[1-8]|U[1-3]|T1)"')


class _Recorder:
    """A provider that answers every planner request with one fixed tool call and records it."""

    name, model, simulated = "simulated", "simulated-1", True

    def __init__(self) -> None:
        self.requests: list[ProviderRequest] = []

    async def generate(self, request: ProviderRequest, *, observer: Any = None) -> Any:
        self.requests.append(request)
        reply = SimulatedReply(function_calls=(FunctionCall(
            "list_entities", {"level": "region"}, "c1"),))
        return await SimulatedProvider(lambda r, rng: reply).generate(request, observer=observer)


async def _tool(world_id: str, tool_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return call_tool(world_snapshot(world_id), tool_id, args)


def _planner_requests(cp: TaskCheckpoint, pipeline: str) -> list[ProviderRequest]:
    provider = _Recorder()

    async def go() -> None:
        await run_trajectory(cp, make_pipeline(pipeline, provider), provider, _tool,
                             TrajectoryConfig(), cell=CellIdentity("cell", 1))

    anyio.run(go)
    return [r for r in provider.requests if r.role == "planner"]


def _view(request: ProviderRequest) -> dict[str, Any]:
    text = request.messages[-1].parts[0].text
    assert text is not None
    _, obj = extract_view(text)
    assert isinstance(obj, dict)
    return obj


@pytest.mark.parametrize("cp", INCOMPLETE[:12], ids=lambda c: c.fault or "")
def test_the_planner_sees_the_checkpoints_draft_at_every_decision(cp: TaskCheckpoint) -> None:
    requests = _planner_requests(cp, "ect")
    assert len(requests) == 4  # the recorder only calls tools: every decision is a request
    for n, request in enumerate(requests, start=1):
        view = _view(request)
        assert view["draft"] == cp.naive_certificate.to_json()
        assert view["decision"] == n


@pytest.mark.parametrize("cp", INCOMPLETE, ids=lambda c: c.checkpoint_id)
def test_the_planner_is_blind_to_fault_gold_split_and_pipeline(cp: TaskCheckpoint) -> None:
    """Relabelling the checkpoint (another fault code, another gold answer, another split) and
    running it under another pipeline leaves every planner request byte-identical; no request
    names a label."""
    gold = {slot: ["relabelled", slot] for slot in cp.task.gold}
    split = "dev" if cp.task.split != "dev" else "heldout"
    relabelled = dataclasses.replace(
        cp, fault="F9", task=dataclasses.replace(cp.task, gold=gold, split=split))  # type: ignore[arg-type]
    base = [r.canonical() for r in _planner_requests(cp, "ect")]
    assert [r.canonical() for r in _planner_requests(relabelled, "full_trace")] == base
    for request in _planner_requests(cp, "ect"):
        text = request.canonical().decode("utf-8")
        assert _LABELS.search(text) is None, _LABELS.search(text)


def test_the_responder_reads_only_the_view() -> None:
    """Two requests with one view but different metadata (another cell id naming another
    checkpoint kind and pipeline) get the same reply from the same draws: the simulated planner
    reads the view alone (the metadata only seeds the provider's draws)."""
    cp = INCOMPLETE[0]
    view = PlannerView(cp.task.contract, cp.trace, cp.ledger, decision=1,
                       draft=cp.naive_certificate.to_json())
    respond = simulated_responder(PlannerBehaviour(), CriticBehaviour())
    for seed in range(20):
        a = build_planner_request(view, GEN, CellIdentity(f"{cp.task.task_id}:incomplete:s0:ect",
                                                           seed))
        b = build_planner_request(view, GEN, CellIdentity(f"{cp.task.task_id}:clean:s2:controller",
                                                           seed))
        assert respond(a, random.Random(seed)) == respond(b, random.Random(seed))


def _first_finish(cp: TaskCheckpoint, **planner: float) -> dict[str, Any]:
    behaviour = PlannerBehaviour(**{**PlannerBehaviour().to_json(), "p_invalid_output": 0.0,
                                    "p_escalate_on_conflict": 0.0, "p_premature_finish": 1.0,
                                    **planner})
    view = PlannerView(cp.task.contract, cp.trace, cp.ledger, decision=1,
                       draft=cp.naive_certificate.to_json())
    request = build_planner_request(view, GEN, CellIdentity("c", 1))
    reply = simulated_responder(behaviour, CriticBehaviour())(request, random.Random(1))
    assert reply.function_calls and reply.function_calls[0].name == "finish"
    cert = reply.function_calls[0].args["certificate"]
    assert isinstance(cert, dict)
    return cert


@pytest.mark.parametrize("cp", INCOMPLETE, ids=lambda c: c.checkpoint_id)
def test_a_tempted_planner_submits_the_draft_as_it_stands(cp: TaskCheckpoint) -> None:
    cert = _first_finish(cp, p_reuse_draft=1.0)
    draft = cp.naive_certificate.to_json()
    assert cert["claims"] == draft["claims"]  # the forged id, the wrong transform, ... as drafted
    assert cert["ledger_digest"] == ledger_digest(cp.ledger) and "format" not in cert


def test_an_untempted_planner_composes_its_own_finish() -> None:
    u3 = next(c for c in INCOMPLETE if c.fault == "U3")
    cert = _first_finish(u3, p_reuse_draft=0.0)
    ops = {c["slot"]: c["transform"] for c in cert["claims"]}
    drafted = {c.slot: c.transform.to_json() for c in u3.naive_certificate.claims}
    assert ops != drafted  # its own finish uses the contract's transform, not the note's
