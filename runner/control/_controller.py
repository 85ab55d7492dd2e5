"""RunController: drive any agent loop to exactly one typed stop.

Whole-run use: ``controller.run(task, decide, execute)`` (or ``await controller.arun(...)``)
where ``decide(state) -> Action | Turn`` is the model side and ``execute(call) -> ToolResult``
the tool side. Step-by-step use, for an engine that drives its own loop::

    state = ctl.start(task)
    while True:
        if ctl.check_before_model(state):          # rules, then budgets (or the earlier stop)
            break
        v = ctl.on_action(state, decide(state))     # guards, no-progress, limits
        if v.kind is VerdictKind.EXECUTE:
            ctl.on_tool_result(state, v.call, execute(v.call))
        elif v.kind is VerdictKind.CHECK_FINISH:
            ctl.on_finish(state, v.finish, report=None)  # or your own (async) check's report
    result = ctl.result(state)

Order of checks (each step of the loop):

1. before the model call: the kill switch was checked at ``start``; stopping rules are evaluated
   against the folded state (an early-stop rule whose predicates all hold ends ``goal_met``; a
   check asking for a human ends ``needs_human``; missing predicates become the directive);
   then the step budget, the token/cost ceilings and ``stop_when``.
2. on the model's action: its usage is added and the ceilings re-checked (an overrun is a
   ``token_budget`` stop, whatever the action was); escalate ends ``needs_human``; a tool call
   goes through the guard (``policy_block`` / ``needs_human``), the no-progress detector, the
   idempotency dedupe, the per-tool limits (``tool_limit``) and ``stop_when``; a finish is
   checked by the rules plus ``validate`` (passes: ``goal_met``; fails: the missing list is fed
   back and the loop continues, bounded by the budget).
3. after a tool result: it is recorded and folded into the state, then tool failures
   (``tool_error``), repeated empty results (``no_progress``), ceilings and ``stop_when``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runner.canonical import canonical_bytes
from runner.control._budget import Budget
from runner.control._conditions import (
    AnyOf,
    DailySpendCap,
    EscalationRequested,
    ExternalStop,
    FinishGate,
    MaxSteps,
    NoProgressDetector,
    StopCondition,
    ToolFailure,
)
from runner.control._guards import Guard
from runner.control._handoff import build_handoff
from runner.control._killswitch import CostAlert, KillSwitch
from runner.control._result import _NO_OUTPUT, RunResult
from runner.control._rules import StoppingRule
from runner.control._types import (
    Action,
    Checkpoint,
    Condition,
    Directive,
    Escalate,
    Finish,
    Invalid,
    Phase,
    PredicateReport,
    RunState,
    StepRecord,
    Stop,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
)

__all__ = ["Decide", "Execute", "Fold", "RunController", "Validate", "Verdict", "VerdictKind"]

Decide = Callable[[RunState], "Action | Turn | Awaitable[Action | Turn]"]
Execute = Callable[[ToolCall], "ToolResult | Any | Awaitable[ToolResult | Any]"]
Fold = Callable[[RunState, ToolCall, ToolResult], None]
Validate = Callable[[RunState, Any], "bool | PredicateReport | Awaitable[bool | PredicateReport]"]


class VerdictKind(StrEnum):
    EXECUTE = "execute"  # run ``call`` and report its result with on_tool_result
    DEDUPLICATED = "deduplicated"  # same idempotency key and arguments: ``result`` is the earlier one
    CHECK_FINISH = "check_finish"  # check ``finish`` with on_finish
    CONTINUE = "continue"  # nothing to run (an invalid reply was fed back); call the model again
    STOP = "stop"  # the run ended: ``stop``


@dataclass(frozen=True)
class Verdict:
    """What the controller says about a proposed action."""

    kind: VerdictKind
    call: ToolCall | None = None
    result: ToolResult | None = None
    finish: Finish | None = None
    stop: Stop | None = None


class RunController:
    """Enforces budgets, guards, no-progress, stopping rules, escalation and the kill switch.

    Args:
        budget: what bounds every run (required; see :meth:`Budget.from_task`).
        guard: allow-list and side-effect rules; side-effect tools get the lowest call limit.
        rules: predicate stopping rules, evaluated before each model call and on each finish.
        validate: ``(state, output) -> bool | PredicateReport`` (sync or async) checking a finish.
        no_progress: the no-progress detector (default ``NoProgressDetector()``).
        tool_failure: when tool failures end the run (fatal at once, else N in a row).
        stop_when: extra conditions, checked at every checkpoint after the built-in ones.
        kill_switch: checked before every run; records spend and raises cost alerts.
        fold: ``(state, call, result) -> None`` folds a tool result into ``state.data``.
    """

    def __init__(
        self,
        budget: Budget,
        *,
        guard: Guard | None = None,
        rules: Sequence[StoppingRule] = (),
        validate: Validate | None = None,
        no_progress: NoProgressDetector | None = None,
        tool_failure: ToolFailure | None = None,
        stop_when: StopCondition | None = None,
        kill_switch: KillSwitch | None = None,
        fold: Fold | None = None,
    ) -> None:
        if not isinstance(budget, Budget):
            raise TypeError("RunController needs a Budget")
        names = [r.name for r in rules]
        if len(set(names)) != len(names):
            raise ValueError("stopping rule names must be unique")
        self.budget = budget
        self.guard = guard
        self.rules = tuple(rules)
        self.validate = validate
        self.no_progress = no_progress if no_progress is not None else NoProgressDetector()
        self.tool_failure = tool_failure if tool_failure is not None else ToolFailure()
        self.stop_when = stop_when
        self.kill_switch = kill_switch
        self.fold = fold
        side = guard.side_effect_tools if guard is not None else frozenset()
        self._steps = MaxSteps(budget.max_steps)
        self._spend = AnyOf(*budget.spend_conditions(), DailySpendCap())
        self._tools = AnyOf(*budget.tool_conditions(side))
        self._escalation = EscalationRequested()
        self._gate = FinishGate()
        self._observers: list[StopCondition] = [self._spend, self._tools, self.no_progress,
                                                self.tool_failure]
        if stop_when is not None:
            self._observers.append(stop_when)
        self._runs = 0

    # -- helpers ----------------------------------------------------------------------------
    def _user(self, point: Checkpoint) -> Stop | None:
        return self.stop_when.check(point) if self.stop_when is not None else None

    def _observe(self, point: Checkpoint) -> None:
        for cond in self._observers:
            cond.observe(point)

    @staticmethod
    def _running(state: RunState) -> None:
        if state.stop is not None:
            raise RuntimeError(f"run {state.run_id} already stopped ({state.stop.reason})")

    def _end(self, state: RunState, stop: Stop, output: Any = _NO_OUTPUT) -> Stop:
        if stop.reason is StopReason.GOAL_MET and output is _NO_OUTPUT:
            raise RuntimeError("goal_met needs an output")
        if stop.reason is not StopReason.GOAL_MET and output is not _NO_OUTPUT:
            raise RuntimeError("only goal_met carries an output")
        state.stop = stop
        state._output = output
        state.proposal = None
        return stop

    def _alert(self, state: RunState) -> None:
        ks = self.kill_switch
        if ks is not None and not state._alerted and ks.alert_due(state.cost_usd):
            state._alerted = True
            assert ks.cost_alert_usd is not None
            ks.on_cost_alert(CostAlert(state.run_id, round(state.cost_usd, 9), ks.cost_alert_usd))

    def _record_spend(self, state: RunState) -> None:
        if self.kill_switch is not None and state._admission is not None and not state._recorded:
            state._recorded = True
            self.kill_switch.record_spend(state._admission, state.cost_usd)

    # -- step-by-step API -------------------------------------------------------------------
    def start(self, task: Any, *, run_id: str | None = None,
              data: dict[str, Any] | None = None) -> RunState:
        """Admit a run (kill switch first) and return its fresh state.

        Raises:
            RunRefused: the kill switch refused the run (disabled, daily ceiling).
            LedgerError: the kill-switch ledger is unusable.
        """
        admission = self.kill_switch.admit() if self.kill_switch is not None else None
        self._runs += 1
        state = RunState(run_id=run_id or f"run-{self._runs}", task=task, data=dict(data or {}))
        if admission is not None:
            state._admission = admission
            state.daily_remaining_usd = admission.remaining_usd
        return state

    def check_before_model(self, state: RunState) -> Stop | None:
        """Evaluate stopping rules (after tool results are folded), then budgets. Call it before
        building every model request; a returned stop ends the run. Sets ``state.directive``.

        On a run that already stopped (say, ``on_finish`` accepted a finish) it returns that same
        stop, so a loop can always test here first."""
        if state.stop is not None:
            return state.stop
        missing: list[str] = []
        for rule in self.rules:
            report = rule.evaluate(state)
            state.reports[rule.name] = report
            if report.escalate is not None:
                return self._end(state, Stop(StopReason.NEEDS_HUMAN, rule,
                                             report.detail or f"{rule.name} asked for a human",
                                             state.step, question=report.escalate))
            if report.ok and rule.output is not None:
                return self._end(state, Stop(StopReason.GOAL_MET, rule,
                                             f"every predicate of {rule.name} holds", state.step),
                                 rule.output(state))
            missing.extend(report.missing)
        point = Checkpoint(Phase.BEFORE_MODEL, state)
        stop = self._steps.check(point) or self._spend.check(point) or self._user(point)
        if stop is not None:
            return self._end(state, stop)
        self._observe(point)
        notes = tuple(state._notes)
        missing.extend(state._missing)  # what the last rejected finish lacked
        state._notes.clear()
        state._missing.clear()
        state.directive = (Directive(tuple(dict.fromkeys(missing)), notes)
                           if missing or notes else None)
        return None

    def on_action(self, state: RunState, action: Action | Turn, *, tokens: int = 0,
                  cost_usd: float = 0.0) -> Verdict:
        """Account for one model call and judge the action it proposed."""
        self._running(state)
        if isinstance(action, Turn):
            tokens, cost_usd, action = tokens + action.tokens, cost_usd + action.cost_usd, action.action
        if not isinstance(action, ToolCall | Finish | Escalate | Invalid):
            raise TypeError(f"decide must return an Action or Turn, got {type(action).__name__}")
        if tokens < 0 or cost_usd < 0:
            raise ValueError("tokens and cost must be >= 0")
        state.step += 1
        state.tokens += tokens
        state.cost_usd += cost_usd
        self._alert(state)
        call = action if isinstance(action, ToolCall) else None
        point = Checkpoint(Phase.ON_ACTION, state, action, call)
        stop = (self._spend.check(point) or self._escalation.check(point)
                or (self.guard.check(point) if self.guard is not None else None)
                or self.no_progress.check(point))
        if stop is not None:
            if isinstance(action, Escalate):
                state.findings.extend(action.found)
            return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
        if call is not None:
            key = self.guard.idempotency_key(call) if self.guard is not None else None
            if key is not None and key in state._idempotency:
                self._observe(point)
                earlier = state._idempotency[key][1]
                state.trace.append(StepRecord(state.step, "deduplicated", call.tool,
                                              dict(call.args), earlier,
                                              f"idempotency key {key!r} already executed"))
                return Verdict(VerdictKind.DEDUPLICATED, call=call, result=earlier)
            stop = self._tools.check(point) or self._user(point)
            if stop is not None:
                return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
            self._observe(point)
            return Verdict(VerdictKind.EXECUTE, call=call)
        stop = self._user(point)
        if stop is not None:
            return Verdict(VerdictKind.STOP, stop=self._end(state, stop))
        self._observe(point)
        if isinstance(action, Finish):
            state.proposal = action.output
            return Verdict(VerdictKind.CHECK_FINISH, finish=action)
        assert isinstance(action, Invalid)
        state.trace.append(StepRecord(state.step, "invalid", note=action.detail))
        state._notes.append(f"Your last reply was not a valid action: {action.detail}.")
        return Verdict(VerdictKind.CONTINUE)

    def on_finish(self, state: RunState, finish: Finish,
                  report: PredicateReport | bool | None = None) -> Stop | None:
        """Check a proposed finish: every stopping rule, plus ``report`` if given (the caller's
        own check, e.g. an async verifier) or else the configured ``validate``.

        Returns the ``goal_met`` / ``needs_human`` stop, or None when the finish is rejected (the
        missing checks become the next directive and the loop continues).
        """
        self._running(state)
        state.proposal = finish.output
        checks: list[tuple[Condition, PredicateReport]] = []
        for rule in self.rules:
            rep = rule.evaluate(state)
            state.reports[rule.name] = rep
            checks.append((rule, rep))
        if report is None and self.validate is not None:
            try:
                value = self.validate(state, finish.output)
            except Exception as e:  # a check that cannot run does not pass (fail closed)
                value = _check_failed(e)
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()
                raise TypeError("validate is async: use arun(), or pass report= to on_finish")
            report = value
        if report is not None:
            checks.append((self._gate, PredicateReport.of(report, "finish_check")))
        if not checks:
            raise ValueError("no finish check: configure rules= or validate=, or pass report=")
        state.proposal = None
        for cond, rep in checks:
            if rep.escalate is not None:
                return self._end(state, Stop(StopReason.NEEDS_HUMAN, cond,
                                             rep.detail or f"{cond.name} asked for a human",
                                             state.step, question=rep.escalate))
        missing = tuple(dict.fromkeys(m for _, rep in checks for m in rep.missing))
        if not missing:
            return self._end(state, Stop(StopReason.GOAL_MET, self._gate,
                                         "the finish passed every check", state.step),
                             finish.output)
        details = "; ".join(rep.detail for _, rep in checks if rep.detail)
        note = "missing " + ", ".join(missing) + (f" ({details})" if details else "")
        state.trace.append(StepRecord(state.step, "finish_rejected", note=note))
        state._missing.extend(missing)
        state._notes.append("Your finish was not accepted" + (f": {details}." if details else "."))
        return None

    def on_tool_result(self, state: RunState, call: ToolCall, result: ToolResult | Any) -> Stop | None:
        """Record and fold one executed call's result, then check failures and empty repeats.

        A value that is not a :class:`ToolResult` is taken as a successful result's data.
        """
        self._running(state)
        if not isinstance(result, ToolResult):
            result = ToolResult.success(result)
        state.tool_calls += 1
        state.calls_by_tool[call.tool] = state.calls_by_tool.get(call.tool, 0) + 1
        state.cost_usd += result.cost_usd
        self._alert(state)
        key = self.guard.idempotency_key(call) if self.guard is not None else None
        if key is not None and result.ok:
            state._idempotency[key] = (canonical_bytes([call.tool, call.args]), result)
        state.trace.append(StepRecord(state.step, "tool", call.tool, dict(call.args), result))
        if self.fold is not None:
            self.fold(state, call, result)
        point = Checkpoint(Phase.AFTER_TOOL, state, None, call, result)
        stop = (self.tool_failure.check(point) or self.no_progress.check(point)
                or self._spend.check(point) or self._user(point))
        if stop is not None:
            return self._end(state, stop)
        self._observe(point)
        return None

    def charge(self, state: RunState, *, tokens: int = 0, cost_usd: float = 0.0) -> Stop | None:
        """Account for model usage that is not a decision of the agent (e.g. a judge or critic
        asked about a finish) and check the token/cost ceilings: an overrun ends the run
        ``token_budget``, whatever the judge said."""
        self._running(state)
        if tokens < 0 or cost_usd < 0:
            raise ValueError("tokens and cost must be >= 0")
        state.tokens += tokens
        state.cost_usd += cost_usd
        self._alert(state)
        stop = self._spend.check(Checkpoint(Phase.ON_ACTION, state))
        return self._end(state, stop) if stop is not None else None

    def halt(self, state: RunState, reason: StopReason | str, detail: str, *,
             question: str | None = None, name: str = "caller") -> Stop:
        """End the run for a reason the caller decided (e.g. its own check found the agent
        stuck). ``goal_met`` is refused: completion only comes from a checked finish or rule."""
        self._running(state)
        reason = StopReason(reason)
        if reason is StopReason.GOAL_MET:
            raise ValueError("halt cannot end a run with goal_met")
        return self._end(state, Stop(reason, ExternalStop(name), detail, state.step,
                                     question=question))

    def result(self, state: RunState) -> RunResult[Any]:
        """The run's result (it must have stopped). Records its spend with the kill switch."""
        if state.stop is None:
            raise RuntimeError(f"run {state.run_id} has not stopped yet")
        self._record_spend(state)
        stop = state.stop
        goal = stop.reason is StopReason.GOAL_MET
        return RunResult.build(
            stop=stop,
            output=state._output if goal else _NO_OUTPUT,
            run_id=state.run_id,
            steps=state.step,
            tool_calls=state.tool_calls,
            tokens=state.tokens,
            cost_usd=round(state.cost_usd, 9),
            trace=tuple(state.trace),
            data=dict(state.data),
            handoff=None if goal else build_handoff(state, stop),
        )

    # -- whole-run drivers ------------------------------------------------------------------
    def _check_runnable(self) -> None:
        if not self.rules and self.validate is None:
            raise ValueError("a run needs a finish check: pass validate= or rules=")

    def run(self, task: Any, decide: Decide, execute: Execute, *, run_id: str | None = None,
            data: dict[str, Any] | None = None) -> RunResult[Any]:
        """Run a synchronous agent loop to its stop. Use :meth:`arun` for async callables."""
        self._check_runnable()
        state = self.start(task, run_id=run_id, data=data)
        try:
            while state.stop is None:
                if self.check_before_model(state) is not None:
                    break
                verdict = self.on_action(state, _sync(decide(state), "decide"))
                if verdict.kind is VerdictKind.EXECUTE:
                    assert verdict.call is not None
                    try:
                        raw = execute(verdict.call)
                    except Exception as e:  # a crashing tool is a fatal tool failure
                        raw = _crashed(e)
                    self.on_tool_result(state, verdict.call, _sync(raw, "execute"))
                elif verdict.kind is VerdictKind.CHECK_FINISH:
                    assert verdict.finish is not None
                    report: PredicateReport | bool | None = None
                    if self.validate is not None:
                        checked: Any
                        try:
                            checked = self.validate(state, verdict.finish.output)
                        except Exception as e:  # fail closed
                            checked = _check_failed(e)
                        report = _sync(checked, "validate")
                    self.on_finish(state, verdict.finish, report=report)
        finally:
            self._record_spend(state)
        return self.result(state)

    async def arun(self, task: Any, decide: Decide, execute: Execute, *,
                   run_id: str | None = None, data: dict[str, Any] | None = None) -> RunResult[Any]:
        """Like :meth:`run`; ``decide``, ``execute`` and ``validate`` may be sync or async."""
        self._check_runnable()
        state = self.start(task, run_id=run_id, data=data)
        try:
            while state.stop is None:
                if self.check_before_model(state) is not None:
                    break
                verdict = self.on_action(state, await _maybe(decide(state)))
                if verdict.kind is VerdictKind.EXECUTE:
                    assert verdict.call is not None
                    try:
                        result = await _maybe(execute(verdict.call))
                    except Exception as e:  # a crashing tool is a fatal tool failure
                        result = _crashed(e)
                    self.on_tool_result(state, verdict.call, result)
                elif verdict.kind is VerdictKind.CHECK_FINISH:
                    assert verdict.finish is not None
                    report = None
                    if self.validate is not None:
                        try:
                            report = await _maybe(self.validate(state, verdict.finish.output))
                        except Exception as e:  # fail closed
                            report = _check_failed(e)
                    self.on_finish(state, verdict.finish, report=report)
        finally:
            self._record_spend(state)
        return self.result(state)


def _crashed(e: Exception) -> ToolResult:
    first = (str(e).splitlines() or [""])[0]
    return ToolResult.failure(f"{type(e).__name__}: {first}".rstrip(": "), fatal=True)


def _check_failed(e: Exception) -> PredicateReport:
    first = (str(e).splitlines() or [""])[0]
    return PredicateReport(missing=("finish_check",),
                           detail=f"the finish check raised {type(e).__name__}: {first}".rstrip(": "))


def _sync(value: Any, what: str) -> Any:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError(f"{what} returned an awaitable: use `await controller.arun(...)`")
    return value


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
