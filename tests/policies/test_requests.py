"""Every model request carries what a real one carries: the decision index and the current trace.

Critic requests used to carry no decision index, so judging a repeated proposal at a later
decision was a byte-identical request, hence (with the seeded simulated provider) the same reply:
a rejection could never flip.
"""

from __future__ import annotations

from typing import Any

import anyio

from runner.policies import (
    CellIdentity,
    CriticBehaviour,
    FinishAction,
    PipelineParams,
    PipelineState,
    PlannerBehaviour,
    PlannerView,
    build_planner_request,
    make_pipeline,
    simulated_responder,
)
from runner.policies._views import extract_view
from runner.providers import GenerationConfig, SimulatedProvider
from runner.worlds import closed_loop_checkpoints, propose_certificate

CLEAN = next(c for c in closed_loop_checkpoints() if c.kind == "clean")
GEN = GenerationConfig(temperature=0.2, seed=7, max_output_tokens=512)


class _Recorder:
    """A simulated provider that keeps every request it answers."""

    def __init__(self, critic: CriticBehaviour) -> None:
        self.inner = SimulatedProvider(simulated_responder(PlannerBehaviour(), critic))
        self.requests: list[Any] = []
        self.name, self.model, self.simulated = "simulated", "simulated-1", True

    async def generate(self, request: Any, *, observer: Any = None) -> Any:
        self.requests.append(request)
        return await self.inner.generate(request, observer=observer)


def _judge(kind: str, decision: int, seed: int, critic: CriticBehaviour) -> tuple[str, Any]:
    provider = _Recorder(critic)
    gen = GenerationConfig(temperature=0.2, seed=seed, max_output_tokens=512)
    pipeline = make_pipeline(kind, provider, PipelineParams(
        generation=gen, cell=CellIdentity(f"c{seed}", seed)))
    state = PipelineState(CLEAN.task.contract, CLEAN.trace, CLEAN.ledger,
                          decisions_used=decision, calls_used=0)
    honest = propose_certificate(CLEAN.task.contract, CLEAN.ledger).to_json()
    decided = anyio.run(pipeline.on_finish, state, FinishAction(honest))
    return decided.decision, provider.requests[-1]


def test_a_critic_request_at_a_later_decision_differs_and_carries_the_index() -> None:
    # (The critic core's model critic is asked the same way; an honest proposal takes its
    # deterministic fast path, so the full-trace critic is the one asked here.)
    critic = CriticBehaviour()
    _, first = _judge("full_trace", 1, 3, critic)
    _, later = _judge("full_trace", 2, 3, critic)
    assert first.canonical() != later.canonical()
    assert first.metadata["decision"] == 1 and later.metadata["decision"] == 2
    _, view1 = extract_view(first.messages[-1].parts[0].text)
    _, view2 = extract_view(later.messages[-1].parts[0].text)
    assert (view1["decision"], view2["decision"]) == (1, 2)
    assert view1["trace"] == view2["trace"] != []  # the current trace travels too


def test_a_rejection_can_flip_across_decisions_under_the_simulator() -> None:
    """The same supported proposal, judged at decision 1 and again at decision 2: with a critic
    that rejects supported proposals half the time, some cell's rejection turns into an accept."""
    critic = CriticBehaviour(p_reject_supported=0.5)
    flips = 0
    for seed in range(40):
        first, _ = _judge("full_trace", 1, seed, critic)
        second, _ = _judge("full_trace", 2, seed, critic)
        flips += first == "continue" and second == "complete"
    assert flips > 0


def test_planner_requests_carry_the_decision_index_in_the_view() -> None:
    def view_at(decision: int) -> dict[str, Any]:
        view = PlannerView(CLEAN.task.contract, CLEAN.trace, CLEAN.ledger, decision=decision)
        request = build_planner_request(view, GEN, CellIdentity("c", 7))
        _, obj = extract_view(request.messages[-1].parts[0].text)
        assert isinstance(obj, dict)
        return obj

    assert view_at(1)["decision"] == 1 and view_at(3)["decision"] == 3
    assert view_at(1)["trace"] == view_at(3)["trace"] != []
