"""The trajectory engine (docs/protocol.md, part 2): one closed-loop cell from a checkpoint to one
typed stop.

It drives :class:`runner.control.RunController` step by step, so budgets, the per-tool limits,
the side-effect guard and the stop reasons are the stop-control library's, not a second
implementation. The stop rules in force are the ECT paper's protocol limits only (4 decisions,
3 additional tool calls) unless :class:`StopRules` turns on a control beyond the protocol
(``runner.control``'s no-progress detector, a token ceiling, a lower call limit for side-effect
tools): the frozen study turns none on, and the lock and the run header record which are on.
Each decision:

1. ``check_before_model`` (budgets) -> the planner request is built from the :class:`PlannerView`
   (decision index, contract, trace, ledger, the draft certificate the checkpoint holds,
   directive; never split, fault, gold or the pipeline under test) and sent through the provider;
2. ``on_action`` judges the parsed action: a tool call runs in the sandbox (a fresh child) and its
   response is folded into the trace and re-normalised into the ledger by the trusted adapter;
   a finish goes to the termination pipeline under test; an escalation ends ``needs_human``;
3. the pipeline's ``complete`` becomes ``goal_met`` through ``on_finish``; ``continue`` feeds the
   directive back; ``stuck`` ends ``no_progress``; ``needs_human`` ends ``needs_human``.

A provider failure consumes the decision and maps to ``continue`` (it stays in the denominator).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from runner.canonical import (
    JsonObject,
    canonical_bytes,
)
from runner.control import (
    Budget,
    Escalate,
    Finish,
    Guard,
    Invalid,
    NoProgressDetector,
    PredicateReport,
    RunController,
    SideEffectRule,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
    VerdictKind,
)
from runner.ect import Ledger
from runner.errors import EctError
from runner.loop._config import StopRules, TrajectoryConfig, stop_rules_in_force
from runner.loop._decision import DecisionRecord, DecisionVerdict, PipelineJudgement
from runner.policies import (
    CellIdentity,
    EscalateAction,
    FinishAction,
    InvalidAction,
    Pipeline,
    PipelineState,
    PlannerAction,
    PlannerView,
    ToolCallAction,
    build_planner_request,
    parse_planner_action,
)
from runner.providers import Provider, ProviderResult
from runner.worlds import NoteBook, TaskCheckpoint, TraceCall, call_id, ledger_from_trace
from runner.worlds.tools import SIDE_EFFECT_TOOLS, TOOL_SCHEMAS

__all__ = [
    "DecisionRecord",
    "DecisionVerdict",
    "PipelineJudgement",
    "StopRules",
    "ToolCallFn",
    "Trajectory",
    "TrajectoryConfig",
    "run_trajectory",
    "stop_rules_in_force",
    "trace_bytes",
]

ToolCallFn = Callable[[str, str, JsonObject], Awaitable[JsonObject]]
"""``(world_id, tool_id, args) -> response``: one sandboxed call. Raises EctError on failure."""


@dataclass
class Trajectory:
    """Everything one cell did. ``accepted`` is the finish the pipeline answered ``complete``
    (its certificate is the cell's final certificate); ``provider_results`` is the audit group,
    in call order."""

    checkpoint: TaskCheckpoint
    policy: str
    stop_reason: StopReason
    stop_detail: str
    accepted: FinishAction | None
    trace: tuple[TraceCall, ...]
    ledger: Ledger
    decisions: list[DecisionRecord]
    pipeline_verdicts: list[str]
    tool_calls: int
    turns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    notes: JsonObject
    note_statuses: list[str]
    provider_results: list[ProviderResult]
    calls_budget: int

    @property
    def latency_s(self) -> float:
        return round(sum(a.latency_s or 0.0 for r in self.provider_results for a in r.attempts), 6)


# runner.control requires a spend ceiling on every run; the protocol has none. With the token
# ceiling off, the ceiling is one no trajectory can reach (the decision limit bounds the spend).
_NO_TOKEN_CEILING = 2**62


def _controller(config: TrajectoryConfig) -> RunController:
    rules = config.stop_rules
    side = {tool: SideEffectRule() for tool in sorted(SIDE_EFFECT_TOOLS)}
    calls = config.max_additional_tool_calls
    side_limit = rules.side_effect_call_limit if rules.side_effect_call_limit is not None else calls
    budget = Budget(
        max_steps=config.max_decisions,
        max_tokens=rules.token_ceiling if rules.token_ceiling is not None else _NO_TOKEN_CEILING,
        tool_limits=ToolLimits(default=calls, side_effect_default=side_limit, total=calls),
    )
    return RunController(budget, guard=Guard(allow=frozenset(TOOL_SCHEMAS), side_effects=side),
                         no_progress=NoProgressDetector() if rules.no_progress else False)


def _control_action(action: PlannerAction) -> ToolCall | Finish | Escalate | Invalid:
    if isinstance(action, ToolCallAction):
        try:
            return ToolCall(action.tool_id, dict(action.args))
        except EctError as e:  # arguments that are not JSON
            return Invalid(f"tool arguments are not JSON: {e}")
    if isinstance(action, FinishAction):
        return Finish(action.certificate_obj)
    if isinstance(action, EscalateAction):
        return Escalate(action.question)
    return Invalid(action.detail)


async def run_trajectory(
    checkpoint: TaskCheckpoint,
    pipeline: Pipeline,
    provider: Provider,
    execute_tool: ToolCallFn,
    config: TrajectoryConfig,
    *,
    cell: CellIdentity,
) -> Trajectory:
    """Run one cell from ``checkpoint`` until the controller records a stop; every provider
    request carries ``cell`` (its id and seed) in its metadata."""
    task = checkpoint.task
    contract = task.contract
    ctl = _controller(config)
    state = ctl.start(task.task_id, run_id=cell.cell_id)
    trace: list[TraceCall] = list(checkpoint.trace)
    ledger = checkpoint.ledger
    notes = NoteBook()
    note_statuses: list[str] = []
    directive: str | None = None
    accepted: FinishAction | None = None
    decisions: list[DecisionRecord] = []
    verdicts: list[str] = []
    results: list[ProviderResult] = []
    input_tokens = output_tokens = 0
    cost = 0.0

    while ctl.check_before_model(state) is None:
        view = PlannerView(
            contract=contract,
            trace=tuple(trace),
            ledger=ledger,
            directive=directive,
            decisions_left=config.max_decisions - state.step,
            calls_left=config.max_additional_tool_calls - state.tool_calls,
            decision=state.step + 1,
            draft=checkpoint.naive_certificate.to_json(),
        )
        request = build_planner_request(view, config.generation, cell)
        result = await provider.generate(request)
        results.append(result)
        usage = result.usage
        input_tokens += usage.input_tokens
        output_tokens += usage.output_tokens
        step_cost = result.cost_usd(config.price) if config.price is not None else 0.0
        cost += step_cost
        if result.ok:
            action = parse_planner_action(result.response)
        else:
            assert result.failure is not None
            action = InvalidAction(f"provider failure ({result.failure.kind})")
        verdict = ctl.on_action(state, _control_action(action), tokens=usage.total_tokens,
                                cost_usd=step_cost)
        index = state.step

        if verdict.kind is VerdictKind.EXECUTE:
            assert verdict.call is not None
            call = verdict.call
            try:
                response = await execute_tool(task.world_id, call.tool, dict(call.args))
            except EctError as e:
                decisions.append(DecisionRecord(index, action, DecisionVerdict.TOOL_FAILED,
                                                tool_error=str(e), provider_ok=result.ok))
                ctl.on_tool_result(state, call, ToolResult.failure(str(e), fatal=True))
                break
            if call.tool in SIDE_EFFECT_TOOLS and response.get("ok") is True:
                note_statuses.append(notes.record(dict(call.args)))
            trace.append(TraceCall(call_id(len(trace) + 1), call.tool, dict(call.args), response))
            ledger = ledger_from_trace(task.task_id, trace)
            decisions.append(DecisionRecord(index, action, DecisionVerdict.EXECUTED,
                                            tool_response=response, provider_ok=result.ok))
            if ctl.on_tool_result(state, call, ToolResult.success(response)) is not None:
                break
        elif verdict.kind is VerdictKind.CHECK_FINISH:
            assert isinstance(action, FinishAction) and verdict.finish is not None
            pstate = PipelineState(
                contract=contract,
                trace=tuple(trace),
                ledger=ledger,
                decisions_used=state.step,
                calls_used=state.tool_calls,
                decisions_budget=config.max_decisions,
                calls_budget=config.max_additional_tool_calls,
            )
            decided = await pipeline.on_finish(pstate, action)
            results.extend(decided.provider_results)
            judge_tokens, judge_cost = 0, 0.0
            for r in decided.provider_results:
                input_tokens += r.usage.input_tokens
                output_tokens += r.usage.output_tokens
                judge_tokens += r.usage.total_tokens
                judge_cost += r.cost_usd(config.price) if config.price is not None else 0.0
            cost += judge_cost
            verdicts.append(decided.decision)
            decisions.append(DecisionRecord(index, action,
                                            DecisionVerdict.of_finish(decided.decision),
                                            pipeline=PipelineJudgement.of(decided),
                                            provider_ok=result.ok))
            # The critics' usage counts against the same ceilings; an overrun ends the run
            # token_budget whatever the critic said.
            if ctl.charge(state, tokens=judge_tokens, cost_usd=judge_cost) is not None:
                break
            if decided.decision == "complete":
                stop = ctl.on_finish(state, verdict.finish, report=True)
                assert stop is not None and stop.reason is StopReason.GOAL_MET
                accepted = action
                break
            if decided.decision == "stuck":
                ctl.halt(state, StopReason.NO_PROGRESS,
                         f"{pipeline.name} judged the run stuck", name=pipeline.name)
                break
            if decided.decision == "needs_human":
                ctl.halt(state, StopReason.NEEDS_HUMAN,
                         f"{pipeline.name}: " + ", ".join(decided.codes),
                         question="Two valid receipts disagree; which source is authoritative?",
                         name=pipeline.name)
                break
            missing = decided.codes or ("pipeline.continue",)
            ctl.on_finish(state, verdict.finish,
                          report=PredicateReport(missing=missing, detail=decided.directive or ""))
            directive = decided.directive
        elif verdict.kind is VerdictKind.STOP:
            decisions.append(DecisionRecord(index, action, DecisionVerdict.STOPPED,
                                            provider_ok=result.ok))
            break
        else:  # CONTINUE (invalid reply fed back) or DEDUPLICATED (no second effect)
            decisions.append(DecisionRecord(index, action, DecisionVerdict(verdict.kind.value),
                                            provider_ok=result.ok))

    run = ctl.result(state)
    return Trajectory(
        checkpoint=checkpoint,
        policy=pipeline.name,
        stop_reason=run.stop.reason,
        stop_detail=run.stop.detail,
        accepted=accepted,
        trace=tuple(trace),
        ledger=ledger,
        decisions=decisions,
        pipeline_verdicts=verdicts,
        tool_calls=state.tool_calls,
        turns=state.step,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=round(cost, 9),
        notes=notes.notes,
        note_statuses=note_statuses,
        provider_results=results,
        calls_budget=config.max_additional_tool_calls,
    )


def trace_bytes(trajectory: Trajectory) -> bytes:
    """Canonical bytes of the trajectory's trace (kept as a blob for replay)."""
    return canonical_bytes([c.to_json() for c in trajectory.trace])
