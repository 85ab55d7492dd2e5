"""Planner + pipelines on the real closed-loop checkpoints (tool calls in-process, no sandbox):
a competent planner recovers every recoverable checkpoint under ECT's directive, and a premature
finish passes the critic core but not ECT."""

from __future__ import annotations

from typing import Any

import anyio

from runner.ect import Ledger, verify_json
from runner.policies import (
    CellIdentity,
    CriticBehaviour,
    FinishAction,
    PipelineParams,
    PipelineState,
    PlannerBehaviour,
    PlannerView,
    ToolCallAction,
    build_planner_request,
    make_pipeline,
    parse_planner_action,
    simulated_responder,
)
from runner.providers import GenerationConfig, SimulatedProvider
from runner.worlds import closed_loop_checkpoints, execute_calls, to_receipts

GEN = GenerationConfig(temperature=0.2, seed=4, max_output_tokens=1024)
CAREFUL = PlannerBehaviour(
    p_premature_finish=0.0, p_wrong_scope_call=0.0, p_corrupt_value=0.0,
    p_cite_missing_receipt=0.0, p_repeat_call=0.0, p_follow_directive=1.0,
    p_wrong_call=0.0, p_arithmetic_error=0.0,
    p_escalate_on_conflict=0.0, p_invalid_output=0.0,
)


async def trajectory(cp: Any, planner: PlannerBehaviour, pipeline_name: str) -> tuple[str, Any, Any]:
    """(final decision, ledger, certificate) of one run: 4 decisions, 3 calls at most."""
    provider = SimulatedProvider(simulated_responder(planner, CriticBehaviour()))
    pipeline = make_pipeline(pipeline_name, provider, PipelineParams(GEN, CellIdentity("flow", 4)))
    trace, ledger, directive, calls = tuple(cp.trace), cp.ledger, None, 0
    for decision in range(1, 5):
        view = PlannerView(cp.task.contract, trace, ledger, directive, 5 - decision, 3 - calls)
        result = await provider.generate(build_planner_request(view, GEN, CellIdentity("flow", 4)))
        action = parse_planner_action(result.response)
        if isinstance(action, ToolCallAction) and calls < 3:
            calls += 1
            (tc,) = execute_calls(cp.task.world_id, [(action.tool_id, action.args)],
                                  first_call=len(trace) + 1)
            new = to_receipts(cp.task.task_id, tc.call_id, tc.tool_id, tc.args, tc.response,
                              first_index=len(ledger.receipts) + 1)
            trace, ledger = (*trace, tc), Ledger(ledger.task_id, (*ledger.receipts, *new))
        elif isinstance(action, FinishAction):
            state = PipelineState(cp.task.contract, trace, ledger, decision, calls)
            d = await pipeline.on_finish(state, action)
            if d.decision != "continue":
                return d.decision, ledger, action.certificate_obj
            directive = d.directive
        else:
            return "other", ledger, None
    return "budget", ledger, None


def test_careful_planner_recovers_every_recoverable_checkpoint_under_ect() -> None:
    for cp in closed_loop_checkpoints():
        decision, ledger, cert = anyio.run(trajectory, cp, CAREFUL, "ect")
        if cp.fault == "T1":
            assert decision == "needs_human", cp.checkpoint_id
            continue
        assert decision == "complete", cp.checkpoint_id
        d = verify_json(cp.task.contract.to_json(), ledger.to_json(), cert)
        values = {c["slot"]: c["value"] for c in cert["claims"]}
        assert d.complete and values == cp.task.gold, cp.checkpoint_id


def test_premature_finish_passes_the_critic_core_but_not_ect() -> None:
    hasty = PlannerBehaviour(p_premature_finish=1.0, p_follow_directive=0.0, p_repeat_call=0.0,
                             p_wrong_scope_call=0.0, p_escalate_on_conflict=0.0,
                             p_invalid_output=0.0)
    incomplete = [cp for cp in closed_loop_checkpoints() if cp.kind == "incomplete" and cp.fault != "T1"]
    critic = [anyio.run(trajectory, cp, hasty, "critic_core")[0] for cp in incomplete]
    ect = [anyio.run(trajectory, cp, hasty, "ect")[0] for cp in incomplete]
    # The critic core accepts every premature finish except where the agent was looping (F8).
    assert critic == ["stuck" if cp.fault == "F8" else "complete" for cp in incomplete]
    assert "complete" not in ect
