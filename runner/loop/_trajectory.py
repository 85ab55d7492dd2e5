"""The trajectory engine (DESIGN §8): one closed-loop cell from a checkpoint to one typed stop.

It drives :class:`runner.control.RunController` step by step, so budgets, the per-tool limits,
the side-effect guard, no-progress detection and the stop reasons are the stop-control library's,
not a second implementation. Each decision:

1. ``check_before_model`` (budgets) -> the planner request is built from the :class:`PlannerView`
   (contract, trace, ledger, directive; never split, fault or gold) and sent through the provider;
2. ``on_action`` judges the parsed action: a tool call runs in the sandbox (a fresh child) and its
   response is folded into the trace and re-normalised into the ledger by the trusted adapter;
   a finish goes to the termination pipeline under test; an escalation ends ``needs_human``;
3. the pipeline's ``complete`` becomes ``goal_met`` through ``on_finish``; ``continue`` feeds the
   directive back; ``stuck`` ends ``no_progress``; ``needs_human`` ends ``needs_human``.

A provider failure consumes the decision and maps to ``continue`` (it stays in the denominator).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from runner.canonical import (
    JsonObject,
    RecordFormatError,
    canonical_bytes,
    read_bool,
    read_int,
    read_object,
    read_opt_object,
    read_opt_str,
    read_str,
)
from runner.control import (
    Budget,
    Escalate,
    Finish,
    Guard,
    Invalid,
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
from runner.policies import (
    EscalateAction,
    FinishAction,
    InvalidAction,
    Pipeline,
    PipelineState,
    PlannerView,
    ToolCallAction,
    build_planner_request,
    parse_planner_action,
)
from runner.providers import GenerationConfig, PriceTable, Provider, ProviderResult
from runner.worlds import NoteBook, TaskCheckpoint, TraceCall, call_id, ledger_from_trace
from runner.worlds.tools import SIDE_EFFECT_TOOLS, TOOL_SCHEMAS

__all__ = ["DecisionRecord", "ToolCallFn", "Trajectory", "TrajectoryConfig", "run_trajectory", "trace_bytes"]

ToolCallFn = Callable[[str, str, JsonObject], Awaitable[JsonObject]]
"""``(world_id, tool_id, args) -> response``: one sandboxed call. Raises EctError on failure."""


@dataclass(frozen=True)
class TrajectoryConfig:
    max_decisions: int = 4
    max_additional_tool_calls: int = 3
    max_tokens: int = 400_000
    generation: GenerationConfig = field(
        default_factory=lambda: GenerationConfig(temperature=0.2, seed=0, max_output_tokens=2048))
    price: PriceTable | None = None


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One planner decision as recorded in the result (deterministic fields only).

    ``action``, ``pipeline`` and ``tool_response`` are JSON objects as the model, the pipeline
    and the tool produced them; :meth:`from_json` checks the record's own shape around them.
    """

    index: int
    action: JsonObject
    verdict: str
    pipeline: JsonObject | None = None
    tool_response: JsonObject | None = None
    tool_error: str | None = None
    provider_ok: bool = True

    def to_json(self) -> JsonObject:
        return {
            "index": self.index,
            "action": self.action,
            "verdict": self.verdict,
            "pipeline": self.pipeline,
            "tool_response": self.tool_response,
            "tool_error": self.tool_error,
            "provider_ok": self.provider_ok,
        }

    @classmethod
    def from_json(cls, obj: object, path: str = "decision") -> DecisionRecord:
        d = read_object(obj, path, _DECISION_FIELDS)
        action = read_opt_object(d["action"], f"{path}.action")
        if action is None:
            raise RecordFormatError(f"{path}.action", "expected an object, got null")
        return cls(
            index=read_int(d["index"], f"{path}.index"),
            action=action,
            verdict=read_str(d["verdict"], f"{path}.verdict"),
            pipeline=read_opt_object(d["pipeline"], f"{path}.pipeline"),
            tool_response=read_opt_object(d["tool_response"], f"{path}.tool_response"),
            tool_error=read_opt_str(d["tool_error"], f"{path}.tool_error"),
            provider_ok=read_bool(d["provider_ok"], f"{path}.provider_ok"),
        )


_DECISION_FIELDS = ("index", "action", "verdict", "pipeline", "tool_response", "tool_error",
                    "provider_ok")


@dataclass
class Trajectory:
    """Everything one cell did. ``provider_results`` is the audit group, in call order."""

    checkpoint: TaskCheckpoint
    policy: str
    stop_reason: StopReason
    stop_detail: str
    final_certificate: JsonObject | None
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


def _controller(config: TrajectoryConfig) -> RunController:
    side = {tool: SideEffectRule() for tool in sorted(SIDE_EFFECT_TOOLS)}
    budget = Budget(
        max_steps=config.max_decisions,
        max_tokens=config.max_tokens,
        tool_limits=ToolLimits(default=config.max_additional_tool_calls, side_effect_default=1,
                               total=config.max_additional_tool_calls),
    )
    return RunController(budget, guard=Guard(allow=frozenset(TOOL_SCHEMAS), side_effects=side))


def _action_json(action: Any) -> JsonObject:
    if isinstance(action, ToolCallAction):
        return {"kind": "tool_call", "tool_id": action.tool_id, "args": dict(action.args)}
    if isinstance(action, FinishAction):
        return {"kind": "finish", "certificate": action.certificate_obj}
    if isinstance(action, EscalateAction):
        return {"kind": "escalate", "question": action.question}
    assert isinstance(action, InvalidAction)
    return {"kind": "invalid", "detail": action.detail}


def _control_action(action: Any) -> ToolCall | Finish | Escalate | Invalid:
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
    metadata: JsonObject,
) -> Trajectory:
    """Run one cell from ``checkpoint`` until the controller records a stop."""
    task = checkpoint.task
    contract = task.contract
    ctl = _controller(config)
    state = ctl.start(task.task_id, run_id=str(metadata.get("cell_id", task.task_id)))
    trace: list[TraceCall] = list(checkpoint.trace)
    ledger = checkpoint.ledger
    notes = NoteBook()
    note_statuses: list[str] = []
    directive: str | None = None
    final_certificate: JsonObject | None = None
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
        )
        request = build_planner_request(view, config.generation,
                                        {**metadata, "decision": state.step + 1})
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
        record = _action_json(action)
        verdict = ctl.on_action(state, _control_action(action), tokens=usage.total_tokens,
                                cost_usd=step_cost)
        index = state.step

        if verdict.kind is VerdictKind.EXECUTE:
            assert verdict.call is not None
            call = verdict.call
            try:
                response = await execute_tool(task.world_id, call.tool, dict(call.args))
            except EctError as e:
                decisions.append(DecisionRecord(index, record, "tool_failed", tool_error=str(e),
                                          provider_ok=result.ok))
                ctl.on_tool_result(state, call, ToolResult.failure(str(e), fatal=True))
                break
            if call.tool in SIDE_EFFECT_TOOLS and response.get("ok") is True:
                note_statuses.append(notes.record(dict(call.args)))
            trace.append(TraceCall(call_id(len(trace) + 1), call.tool, dict(call.args), response))
            ledger = ledger_from_trace(task.task_id, trace)
            decisions.append(DecisionRecord(index, record, "executed", tool_response=response,
                                      provider_ok=result.ok))
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
            decisions.append(DecisionRecord(index, record, f"finish_{decided.decision}",
                                      pipeline=decided.to_json(), provider_ok=result.ok))
            # The critics' usage counts against the same ceilings; an overrun ends the run
            # token_budget whatever the critic said.
            if ctl.charge(state, tokens=judge_tokens, cost_usd=judge_cost) is not None:
                break
            if decided.decision == "complete":
                stop = ctl.on_finish(state, verdict.finish, report=True)
                assert stop is not None and stop.reason is StopReason.GOAL_MET
                final_certificate = action.certificate_obj
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
            decisions.append(DecisionRecord(index, record, "stopped", provider_ok=result.ok))
            break
        else:  # CONTINUE (invalid reply fed back) or DEDUPLICATED (no second effect)
            decisions.append(DecisionRecord(index, record, verdict.kind.value, provider_ok=result.ok))

    run = ctl.result(state)
    return Trajectory(
        checkpoint=checkpoint,
        policy=pipeline.name,
        stop_reason=run.stop.reason,
        stop_detail=run.stop.detail,
        final_certificate=final_certificate,
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
