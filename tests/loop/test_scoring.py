"""Outcome scoring (runner/loop/_scoring.py) on crafted trajectories, and the engine's rule that
a budget stop is never a completion.

Each crafted trajectory uses a real closed-loop checkpoint and real receipts (tool responses from
the world, normalised by the trusted adapter); only the run's decisions and stop are scripted.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.canonical import RecordFormatError
from runner.control import StopReason
from runner.loop import (
    OUTCOME_FIELDS,
    DecisionRecord,
    DecisionVerdict,
    Outcome,
    StopRules,
    Trajectory,
    TrajectoryConfig,
    run_trajectory,
    score,
)
from runner.policies import CellIdentity, FinishAction, ToolCallAction, make_pipeline
from runner.providers import FunctionCall, ProviderRequest, SimulatedProvider, SimulatedReply
from runner.worlds import (
    TaskCheckpoint,
    closed_loop_checkpoints,
    execute_calls,
    ledger_from_trace,
    propose_certificate,
    world_snapshot,
)
from runner.worlds.tools import call_tool

CHECKPOINTS = {c.checkpoint_id: c for c in closed_loop_checkpoints()}
CLEAN = CHECKPOINTS["w10-lookup-0/clean"]
INCOMPLETE = CHECKPOINTS["w10-lookup-0/incomplete"]  # U1: the value receipt has the wrong date
T1 = next(c for c in CHECKPOINTS.values() if c.needs_human)


@dataclass(frozen=True)
class _Cell:
    row: int
    cell_id: str
    seed: int


def _row(cp: TaskCheckpoint, policy: str = "ect") -> _Cell:
    return _Cell(7, f"{cp.task.task_id}:{cp.kind}:s0:{policy}", 11)


def _trajectory(cp: TaskCheckpoint, stop: StopReason, *, certificate: dict[str, Any] | None = None,
                decisions: list[DecisionRecord] | None = None, extra_calls: tuple[Any, ...] = (),
                verdicts: list[str] | None = None, tool_calls: int | None = None) -> Trajectory:
    trace = tuple(cp.trace) + tuple(extra_calls)
    return Trajectory(
        checkpoint=cp, policy="ect", stop_reason=stop, stop_detail="crafted",
        accepted=FinishAction(certificate) if certificate is not None else None, trace=trace,
        ledger=ledger_from_trace(cp.task.task_id, trace) if extra_calls else cp.ledger,
        decisions=decisions or [], pipeline_verdicts=verdicts or [],
        tool_calls=len(extra_calls) if tool_calls is None else tool_calls,
        turns=len(decisions or []), input_tokens=120, output_tokens=30, cost_usd=0.001,
        notes={}, note_statuses=[], provider_results=[], calls_budget=3)


def _finish(index: int, certificate: dict[str, Any], verdict: str) -> DecisionRecord:
    return DecisionRecord(index, FinishAction(certificate), DecisionVerdict(verdict))


def _honest(cp: TaskCheckpoint, ledger: Any = None) -> dict[str, Any]:
    return propose_certificate(cp.task.contract, ledger or cp.ledger).to_json()


def test_outcome_has_the_documented_fields_and_row_identity() -> None:
    t = _trajectory(CLEAN, StopReason.GOAL_MET, certificate=_honest(CLEAN))
    out = score(t, _row(CLEAN))
    assert tuple(out.to_json()) == OUTCOME_FIELDS
    assert Outcome.from_json(out.to_json()) == out
    assert (out.row, out.cell_id, out.seed) == (7, _row(CLEAN).cell_id, 11)
    assert (out.task_id, out.world_id, out.checkpoint, out.fault) == \
        ("w10-lookup-0", "w10", "clean", None)


def test_supported_completion() -> None:
    t = _trajectory(CLEAN, StopReason.GOAL_MET, certificate=_honest(CLEAN),
                    decisions=[_finish(1, _honest(CLEAN), "finish_complete")],
                    verdicts=["complete"])
    out = score(t, _row(CLEAN))
    assert out.supported_completion and out.postcondition_ok
    assert not out.premature_unsupported and not out.clean_false_continuation
    assert out.unsupported_claims == 0 and out.final_decision == "complete"


def test_premature_unsupported_termination() -> None:
    naive = INCOMPLETE.naive_certificate.to_json()
    t = _trajectory(INCOMPLETE, StopReason.GOAL_MET, certificate=naive,
                    decisions=[_finish(1, naive, "finish_complete")], verdicts=["complete"])
    out = score(t, _row(INCOMPLETE))
    assert out.premature_unsupported and not out.supported_completion
    assert out.unsupported_claims == 1  # the wrong-date value; the parent claim holds
    assert not out.postcondition_ok


def test_citing_a_receipt_that_does_not_exist_is_unsupported() -> None:
    cert = _honest(CLEAN)
    cert["claims"][0]["evidence"] = ["r-0099"]
    out = score(_trajectory(CLEAN, StopReason.GOAL_MET, certificate=cert), _row(CLEAN))
    assert not out.supported_completion and out.unsupported_claims == 1


def test_gold_values_on_usable_receipts_are_unsupported_when_the_verifier_rejects() -> None:
    """The verifier is the judge: gold values citing successful, valid receipts are still not
    supported when the certificate does not verify against the final ledger (here it is bound
    to another ledger; in the study, e.g. a resubmitted draft citing a duplicate read)."""
    cert = _honest(CLEAN)
    cert["ledger_digest"] = "sha256:" + "0" * 64
    out = score(_trajectory(CLEAN, StopReason.GOAL_MET, certificate=cert,
                            decisions=[_finish(1, cert, "finish_complete")],
                            verdicts=["complete"]), _row(CLEAN))
    assert out.unsupported_claims == 0  # every value equals gold on usable receipts ...
    assert not out.supported_completion and not out.postcondition_ok  # ... yet it fails verify


def test_duplicate_claims_for_a_slot_are_not_a_supported_completion() -> None:
    cert = _honest(CLEAN)
    cert["claims"].append(dict(cert["claims"][0]))
    out = score(_trajectory(CLEAN, StopReason.GOAL_MET, certificate=cert), _row(CLEAN))
    assert not out.supported_completion


def test_clean_false_continuation() -> None:
    honest = _honest(CLEAN)
    t = _trajectory(CLEAN, StopReason.STEP_BUDGET,
                    decisions=[_finish(i, honest, "finish_continue") for i in range(1, 5)],
                    verdicts=["continue"] * 4)
    out = score(t, _row(CLEAN))
    assert out.clean_false_continuation and not out.supported_completion
    assert out.final_decision == "continue" and out.unsupported_claims == 0


def test_rejecting_an_unsupported_proposal_is_no_false_continuation() -> None:
    wrong = _honest(CLEAN)
    wrong["claims"][0]["value"] = 1
    t = _trajectory(CLEAN, StopReason.STEP_BUDGET,
                    decisions=[_finish(1, wrong, "finish_continue")], verdicts=["continue"])
    assert not score(t, _row(CLEAN)).clean_false_continuation


def test_recoverable_stuck() -> None:
    naive = INCOMPLETE.naive_certificate.to_json()
    t = _trajectory(INCOMPLETE, StopReason.NO_PROGRESS,
                    decisions=[_finish(1, naive, "finish_stuck")], verdicts=["stuck"])
    out = score(t, _row(INCOMPLETE))
    assert out.recoverable_stuck and not out.premature_unsupported
    # Not recoverable once no call is left for the recovery, nor on a trust-boundary checkpoint.
    spent = _trajectory(INCOMPLETE, StopReason.NO_PROGRESS, tool_calls=3)
    assert not score(spent, _row(INCOMPLETE)).recoverable_stuck
    t1 = _trajectory(T1, StopReason.NO_PROGRESS)
    assert not score(t1, _row(T1)).recoverable_stuck
    # A clean checkpoint is never "recoverable stuck".
    assert not score(_trajectory(CLEAN, StopReason.NO_PROGRESS), _row(CLEAN)).recoverable_stuck


def test_successful_recovery_then_supported_completion() -> None:
    naive = INCOMPLETE.naive_certificate.to_json()
    recovery = execute_calls(INCOMPLETE.task.world_id, list(INCOMPLETE.recovery_calls),
                             first_call=len(INCOMPLETE.trace) + 1)
    ledger = ledger_from_trace(INCOMPLETE.task.task_id, tuple(INCOMPLETE.trace) + tuple(recovery))
    final = _honest(INCOMPLETE, ledger)
    tool, args = INCOMPLETE.recovery_calls[0]
    decisions = [
        _finish(1, naive, "finish_continue"),
        DecisionRecord(2, ToolCallAction(tool, dict(args)), DecisionVerdict.EXECUTED,
                 tool_response=recovery[0].response),
        _finish(3, final, "finish_complete"),
    ]
    t = _trajectory(INCOMPLETE, StopReason.GOAL_MET, certificate=final, decisions=decisions,
                    extra_calls=tuple(recovery), verdicts=["continue", "complete"])
    out = score(t, _row(INCOMPLETE))
    assert out.successful_recovery and out.recovered_then_supported
    assert out.supported_completion and not out.premature_unsupported
    assert out.tool_calls == 1


def test_a_call_before_any_rejection_is_not_a_recovery() -> None:
    recovery = execute_calls(INCOMPLETE.task.world_id, list(INCOMPLETE.recovery_calls),
                             first_call=len(INCOMPLETE.trace) + 1)
    tool, args = INCOMPLETE.recovery_calls[0]
    ledger = ledger_from_trace(INCOMPLETE.task.task_id, tuple(INCOMPLETE.trace) + tuple(recovery))
    final = _honest(INCOMPLETE, ledger)
    decisions = [
        DecisionRecord(1, ToolCallAction(tool, dict(args)), DecisionVerdict.EXECUTED,
                 tool_response=recovery[0].response),
        _finish(2, final, "finish_complete"),
    ]
    t = _trajectory(INCOMPLETE, StopReason.GOAL_MET, certificate=final, decisions=decisions,
                    extra_calls=tuple(recovery), verdicts=["complete"])
    out = score(t, _row(INCOMPLETE))
    assert not out.successful_recovery and out.supported_completion


@pytest.mark.parametrize("stop", [s for s in StopReason if s is not StopReason.GOAL_MET])
def test_no_stop_but_goal_met_scores_a_completion(stop: StopReason) -> None:
    """Even with a fully supported certificate on record, only goal_met completes."""
    t = _trajectory(CLEAN, stop, certificate=_honest(CLEAN))
    out = score(t, _row(CLEAN))
    assert not out.supported_completion and not out.premature_unsupported
    assert out.unsupported_claims == 0


# --- the engine: a budget stop is never a completion -----------------------------------------


def _provider(replies: Callable[[int], SimulatedReply]) -> SimulatedProvider:
    """A planner whose n-th reply (n = 1, 2, ...) is ``replies(n)``."""
    count = [0]

    def responder(request: ProviderRequest, rng: random.Random) -> SimulatedReply:
        count[0] += 1
        return replies(count[0])

    return SimulatedProvider(responder)


async def _tool(world_id: str, tool_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return call_tool(world_snapshot(world_id), tool_id, args)


def _drive(cp: TaskCheckpoint, replies: Callable[[int], SimulatedReply],
           config: TrajectoryConfig | None = None) -> Trajectory:
    async def go() -> Trajectory:
        return await run_trajectory(cp, make_pipeline("ect", None), _provider(replies), _tool,
                                    config or TrajectoryConfig(),
                                    cell=CellIdentity("x", 1))

    return anyio.run(go)


def test_engine_a_planner_that_only_calls_tools_hits_the_call_budget() -> None:
    t = _drive(INCOMPLETE, lambda n: SimulatedReply(function_calls=(
        FunctionCall("get_parent", {"entity": f"S{n:02d}"}, f"c{n}"),)))
    assert t.stop_reason is StopReason.TOOL_LIMIT and t.stop_reason.is_budget
    assert t.tool_calls == 3 and t.turns == 4 and t.accepted is None
    out = score(t, _row(INCOMPLETE))
    assert not out.supported_completion and not out.premature_unsupported
    assert out.stop_reason == "tool_limit" and out.tool_calls == 3


def test_engine_rejected_finishes_until_the_decision_budget_runs_out() -> None:
    def finish(n: int) -> SimulatedReply:
        cert = INCOMPLETE.naive_certificate.to_json()
        cert["claims"][0]["value"] = n  # a different (wrong) proposal each time
        return SimulatedReply(function_calls=(FunctionCall("finish", {"certificate": cert},
                                                           f"f{n}"),))

    t = _drive(INCOMPLETE, finish)
    assert t.stop_reason is StopReason.STEP_BUDGET and t.turns == 4
    assert t.pipeline_verdicts == ["continue"] * 4 and t.accepted is None
    out = score(t, _row(INCOMPLETE))
    assert not out.supported_completion and not out.premature_unsupported
    assert out.final_decision == "continue"


def test_engine_repeating_one_finish_runs_to_the_protocol_limit_not_no_progress() -> None:
    """The paper's protocol has no no-progress rule: repeating one rejected finish uses all four
    decisions (step_budget). Before, runner.control's default detector ended it no_progress at
    the third repeat, and the scoring counted that as "recoverable stuck"."""
    naive = INCOMPLETE.naive_certificate.to_json()
    t = _drive(INCOMPLETE, lambda n: SimulatedReply(function_calls=(
        FunctionCall("finish", {"certificate": naive}, "f"),)))
    assert t.stop_reason is StopReason.STEP_BUDGET and t.turns == 4
    assert t.pipeline_verdicts == ["continue"] * 4 and t.accepted is None
    out = score(t, _row(INCOMPLETE))
    assert not out.recoverable_stuck and not out.supported_completion


def test_engine_no_progress_beyond_the_protocol_is_opt_in_and_never_scored_stuck() -> None:
    """With runner.control's no-progress detector turned on (a user beyond the protocol), the
    same run ends no_progress, but only the pipeline's own stuck verdict is "recoverable stuck"."""
    naive = INCOMPLETE.naive_certificate.to_json()
    t = _drive(INCOMPLETE, lambda n: SimulatedReply(function_calls=(
        FunctionCall("finish", {"certificate": naive}, "f"),)),
        TrajectoryConfig(stop_rules=StopRules(no_progress=True)))
    assert t.stop_reason is StopReason.NO_PROGRESS and t.accepted is None
    assert "stuck" not in t.pipeline_verdicts
    out = score(t, _row(INCOMPLETE))
    assert not out.recoverable_stuck and not out.supported_completion


def test_recoverable_stuck_needs_the_pipelines_stuck_verdict() -> None:
    naive = INCOMPLETE.naive_certificate.to_json()
    detector = _trajectory(INCOMPLETE, StopReason.NO_PROGRESS,
                           decisions=[_finish(1, naive, "finish_continue")], verdicts=["continue"])
    assert not score(detector, _row(INCOMPLETE)).recoverable_stuck
    judged = _trajectory(INCOMPLETE, StopReason.NO_PROGRESS,
                         decisions=[_finish(1, naive, "finish_stuck")], verdicts=["stuck"])
    assert score(judged, _row(INCOMPLETE)).recoverable_stuck


def test_engine_an_honest_finish_on_a_clean_checkpoint_is_goal_met() -> None:
    honest = _honest(CLEAN)
    t = _drive(CLEAN, lambda n: SimulatedReply(function_calls=(
        FunctionCall("finish", {"certificate": honest}, "f1"),)))
    assert t.stop_reason is StopReason.GOAL_MET and t.turns == 1
    assert score(t, _row(CLEAN)).supported_completion


def test_engine_critic_tokens_count_against_the_token_ceiling() -> None:
    """A critic that accepts a finish whose judging overruns the ceiling ends token_budget."""
    honest = _honest(CLEAN)
    accept = '{"verdict": "accept", "reason": "looks right"}'

    def replies(n: int) -> SimulatedReply:
        if n == 1:
            return SimulatedReply(function_calls=(FunctionCall("finish", {"certificate": honest},
                                                               "f1"),))
        return SimulatedReply(text=accept, structured={"verdict": "accept",
                                                       "reason": "looks right"})

    def drive(max_tokens: int) -> Trajectory:
        async def go() -> Trajectory:
            provider = _provider(replies)
            return await run_trajectory(CLEAN, make_pipeline("full_trace", provider), provider,
                                        _tool, TrajectoryConfig(
                                            stop_rules=StopRules(token_ceiling=max_tokens)),
                                        cell=CellIdentity("x", 1))

        return anyio.run(go)

    roomy = drive(400_000)
    assert roomy.stop_reason is StopReason.GOAL_MET, roomy.stop_detail
    planner_tokens = roomy.provider_results[0].usage.total_tokens
    critic_tokens = sum(r.usage.total_tokens for r in roomy.provider_results[1:])
    assert critic_tokens > 0
    tight = drive(planner_tokens + critic_tokens - 1)
    assert tight.stop_reason is StopReason.TOKEN_BUDGET and tight.accepted is None
    assert tight.pipeline_verdicts == ["complete"]
    assert not score(tight, _row(CLEAN)).supported_completion


@pytest.mark.parametrize("stop", list(StopReason))
def test_the_outcome_holds_the_trajectorys_stop_reason_member(stop: StopReason) -> None:
    """The outcome carries the enum member (not its text) and writes its value."""
    out = score(_trajectory(CLEAN, stop), _row(CLEAN))
    assert out.stop_reason is stop
    written = out.to_json()["stop_reason"]
    assert type(written) is str and written == stop.value
    assert out.without_timing()["stop_reason"] == stop.value
    assert Outcome.from_json(out.to_json()).stop_reason is stop


@pytest.mark.parametrize(("value", "message"), [
    ("finished", r"^outcome.stop_reason: unknown stop reason 'finished'$"),
    ("GOAL_MET", r"^outcome.stop_reason: unknown stop reason 'GOAL_MET'$"),
    (3, r"^outcome.stop_reason: expected a string, got number$"),
])
def test_an_unknown_stop_reason_is_refused_naming_the_path(value: object, message: str) -> None:
    obj = score(_trajectory(CLEAN, StopReason.GOAL_MET), _row(CLEAN)).to_json()
    obj["stop_reason"] = value
    with pytest.raises(RecordFormatError, match=message):
        Outcome.from_json(obj)


def test_scoring_compares_stop_reason_members_not_strings() -> None:
    """No comparison in runner/loop/_scoring.py has a stop reason's text as an operand."""
    import runner.loop._scoring as scoring

    tree = ast.parse(Path(scoring.__file__).read_text(encoding="utf-8"))
    texts = {r.value for r in StopReason}
    found = [(node.lineno, c.value) for node in ast.walk(tree) if isinstance(node, ast.Compare)
             for c in (node.left, *node.comparators)
             if isinstance(c, ast.Constant) and c.value in texts]
    assert found == []
    members = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
               and any(isinstance(c, ast.Attribute) and isinstance(c.value, ast.Name)
                       and c.value.id == "StopReason" for c in node.comparators)]
    assert len(members) >= 2  # goal_met and no_progress are judged by member identity
