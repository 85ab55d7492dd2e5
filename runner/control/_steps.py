"""The step state machine: the step-by-step API of :class:`~runner.control.RunController`.

For an engine that drives its own loop (the whole-run drivers, ``run`` and ``arun``, are in
``runner/control/_controller.py``)::

    state = ctl.start(task)
    while True:
        if ctl.check_before_model(state):          # rules, kill switch, budgets (or the earlier stop)
            break
        v = ctl.on_action(state, decide(state))     # guards, no-progress, limits
        if v.kind is VerdictKind.EXECUTE:
            ctl.on_tool_result(state, v.call, execute(v.call))
        elif v.kind is VerdictKind.CHECK_FINISH:
            ctl.on_finish(state, v.finish, report=None)  # or your own (async) check's report
    result = ctl.result(state)

Order of checks (each step of the loop):

1. before the model call: the previous step's spend lease is settled; stopping rules are
   evaluated against the folded state (an early-stop rule whose predicates all hold ends
   ``goal_met``; a check asking for a human ends ``needs_human``; missing predicates become the
   directive); then the kill switch flag, the step budget, the time budget, the token/cost
   ceilings and ``stop_when``; last, under a daily spend ceiling, this step's spend is reserved.
2. on the model's action: its usage is added and the ceilings re-checked (an overrun is a
   ``token_budget`` stop, whatever the action was); the kill switch flag; escalate ends
   ``needs_human``; a tool call goes through the guard (``policy_block`` / ``needs_human``), the
   no-progress detector, the idempotency dedupe (this run's keys and the shared ledger), the
   per-tool limits (``tool_limit``) and ``stop_when``; a finish is checked by the rules plus
   ``validate`` (passes: ``goal_met``; fails: the missing list is fed back and the loop
   continues, bounded by the budget).
3. after a tool result: it is recorded, facts it voids are dropped, it is folded into the
   state; then the stopping rules (the rule first: a rule that now holds ends ``goal_met``),
   tool failures (``tool_error``), no progress (``no_progress``), ceilings, time and
   ``stop_when``.

Every exit is a typed stop with a handoff: an exception in user code (``decide``, a guard rule,
``fold``, ``stop_when``, a rule's ``output``), a broken contract (``validate`` returning neither
bool nor PredicateReport) and an interruption (Ctrl-C, cancellation) end the run
``internal_error``; the whole-run drivers (``runner/control/_controller.py``) also cancel work
in flight at the deadline (``time_budget``).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any

from runner.canonical import canonical_bytes
from runner.control._checks import _usd
from runner.control._claims import _Claims
from runner.control._conditions import (
    ExternalStop,
)
from runner.control._errors import KillSwitchEngaged
from runner.control._handoff import build_handoff
from runner.control._result import RunResult
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
    add_usd,
)
from runner.control._verdicts import (
    ContractViolation,
    UserCodeError,
    Verdict,
    VerdictKind,
    _call,
    _contract,
    _Failed,
    _user_error,
)
from runner.errors import ControlError


class _Steps(_Claims):
    """The step-by-step API: start, check_before_model, on_action, on_tool_result, on_finish,
    charge, halt, result, reopen."""

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
        state.started_at = self.clock()
        state._limits = (self.budget, self.clock)
        if admission is not None:
            state._admission = (self.kill_switch, admission)  # the kill switch that admitted it
            state.daily_remaining_usd = admission.remaining_usd
        return state

    def check_before_model(self, state: RunState) -> Stop | None:
        """Evaluate stopping rules (after tool results are folded), then the kill switch and
        budgets. Call it before building every model request; a returned stop ends the run.
        Sets ``state.directive``.

        On a run that already stopped (say, ``on_finish`` accepted a finish) it returns that same
        stop, so a loop can always test here first."""
        if state.stop is not None:
            return state.stop
        try:
            return self._before_model(state)
        except _Failed as f:
            return self._fail(state, f)

    def _before_model(self, state: RunState) -> Stop | None:
        stop, missing = self._rules_first(state)
        if stop is not None:
            return stop
        point = Checkpoint(Phase.BEFORE_MODEL, state)
        stop = (self._flag(state) or self._steps.check(point) or self._timed(point)
                or self._spend.check(point) or self._user(point) or self._reserve(state))
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
        _check_usage(tokens, cost_usd)
        turn = None
        if isinstance(action, Turn):
            turn, action = action, action.action
        if not isinstance(action, ToolCall | Finish | Escalate | Invalid):
            raise TypeError(f"decide must return an Action or Turn, got {type(action).__name__}")
        bad: list[str] = []
        if turn is not None:  # what decide reported: a value it may not report is refused
            bad = _bad_usage(turn.tokens, turn.cost_usd, "Turn")
            if not any(b.startswith("Turn.tokens") for b in bad):
                tokens += turn.tokens
            if not any(b.startswith("Turn.cost_usd") for b in bad):
                cost_usd = add_usd(cost_usd, turn.cost_usd)
        state.step += 1
        state.tokens += tokens
        state.cost_usd = add_usd(state.cost_usd, cost_usd)
        state.last_action = action
        state.usage.append((tokens, cost_usd))
        try:
            if bad:  # refused, never counted: the run ends naming the field
                raise _Failed(ContractViolation("decide"), f"decide returned {bad[0]}")
            self._alert(state)
            return self._judge(state, action)
        except _Failed as f:
            return Verdict(VerdictKind.STOP, stop=self._fail(state, f))

    def _judge(self, state: RunState, action: Action) -> Verdict:
        call = action if isinstance(action, ToolCall) else None
        point = Checkpoint(Phase.ON_ACTION, state, action, call)
        if call is not None:
            self._shared_key(state, call)
        stop = (self._spend.check(point) or self._timed(point) or self._flag(state)
                or self._escalation.check(point)
                or (_call("guard", self.guard.check, point) if self.guard is not None else None)
                or (_call("no_progress", self.no_progress.check, point)
                    if self.no_progress is not None else None))
        if stop is not None:
            if isinstance(action, Escalate):
                state.findings.extend(action.found)
            return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
        if call is not None:
            key = self.guard.idempotency_key(call) if self.guard is not None else None
            if key is not None and key in state._idempotency:
                return self._deduplicated(state, point, call, key)
            stop = self._tools.check(point) or self._user(point)
            if stop is None and key is not None:
                claimed = self._claim(state, point, call, key)
                if claimed is not None:
                    return claimed
            if stop is not None:
                return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
            self._observe(point)
            state._call_started = self.clock()
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
        missing checks become the next directive and the loop continues). A ``validate`` that
        returns neither bool nor PredicateReport ends the run ``internal_error``.
        """
        self._running(state)
        if report is None and self.validate is not None:
            state.proposal = finish.output
            try:
                value = self.validate(state, finish.output)
            except Exception as e:  # a check that cannot run is user code that failed
                return self._fail(state, _user_error("validate", e))
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()
                raise TypeError("validate is async: use arun(), or pass report= to on_finish")
            report = value
            if report is None:
                return self._fail(state, _contract("validate", None))
        return self._decide_finish(state, finish, report)

    def _decide_finish(self, state: RunState, finish: Finish,
                       report: PredicateReport | bool | None) -> Stop | None:
        state.proposal = finish.output
        checks: list[tuple[Condition, PredicateReport]] = []
        for rule in self.rules:
            try:  # an evaluator returning neither bool nor report raises TypeError
                rep: PredicateReport = _call(f"{rule.name}.evaluate", rule.evaluate, state)
            except _Failed as f:
                return self._fail(state, f)
            state.reports[rule.name] = rep
            checks.append((rule, rep))
        if report is not None:
            if not isinstance(report, PredicateReport | bool):
                return self._fail(state, _contract("validate", report))
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
        state.trace.append(StepRecord(state.step, "finish_rejected", note=note,
                                      output=_replayable(finish.output)))
        state._missing.extend(missing)
        state._notes.append("Your finish was not accepted" + (f": {details}." if details else "."))
        return None

    def on_tool_result(self, state: RunState, call: ToolCall, result: ToolResult | Any) -> Stop | None:
        """Record and fold one executed call's result, then judge the folded state: the stopping
        rules first, then tool failures, no progress, ceilings and time.

        A value that is not a :class:`ToolResult` is taken as a successful result's data.
        """
        self._running(state)
        if not isinstance(result, ToolResult):
            result = ToolResult.success(result)
        bad = _bad_usage(0, result.cost_usd, "ToolResult")
        if bad:  # refused, never counted (a negative cost would buy budget)
            result = dataclasses.replace(result, cost_usd=0.0)
        state.tool_calls += 1
        state.calls_by_tool[call.tool] = state.calls_by_tool.get(call.tool, 0) + 1
        if not result.ok:
            state.failed_by_tool[call.tool] = state.failed_by_tool.get(call.tool, 0) + 1
        state.cost_usd = add_usd(state.cost_usd, result.cost_usd)
        try:
            return self._after_tool(state, call, result, bad)
        except _Failed as f:
            return self._fail(state, f)

    def _after_tool(self, state: RunState, call: ToolCall, result: ToolResult,
                    bad: list[str]) -> Stop | None:
        key = self.guard.idempotency_key(call) if self.guard is not None else None
        owner = state._claims.pop(key, None) if key is not None else None
        if key is not None and result.ok:
            fingerprint = canonical_bytes([call.tool, call.args])
            state._idempotency[key] = (fingerprint, result)
            if self.idempotency is not None:
                try:
                    self.idempotency.put(key, fingerprint, result, state.run_id)
                except ControlError as e:
                    raise _Failed(UserCodeError("idempotency.ledger"), str(e)) from None
        elif key is not None and owner is not None and self.idempotency is not None:
            try:  # a failed call did not happen: the key is free for a retry
                self.idempotency.release(key, owner)
            except ControlError as e:
                raise _Failed(UserCodeError("idempotency.ledger"), str(e)) from None
        started, state._call_started = state._call_started, None
        state.trace.append(StepRecord(state.step, "tool", call.tool, dict(call.args), result,
                                      idempotency_key=call.idempotency_key,
                                      seconds=None if started is None or not self.budget.timed
                                      else round(self.clock() - started, 6)))
        if bad:  # the call's outcome is recorded above; the run ends naming the field
            raise _Failed(ContractViolation("execute"), f"execute returned {bad[0]}")
        self._alert(state)
        self._invalidate_facts(state, call)
        if self.fold is not None:
            _call("fold", self.fold, state, call, result)
        if self.rules:
            stop, _ = self._rules_first(state)
            if stop is not None:
                return stop
        point = Checkpoint(Phase.AFTER_TOOL, state, None, call, result)
        stop = (self.tool_failure.check(point)
                or (self.no_progress.check(point) if self.no_progress is not None else None)
                or self._spend.check(point) or self._timed(point) or self._user(point))
        if stop is not None:
            return self._end(state, stop)
        self._observe(point)
        return None

    def _invalidate_facts(self, state: RunState, call: ToolCall) -> None:
        writes = self.guard is not None and call.tool in self.guard.side_effect_tools
        for name, f in list(state.facts.items()):
            if (call.tool in f.invalidated_by) if f.invalidated_by is not None else writes:
                del state.facts[name]

    def charge(self, state: RunState, *, tokens: int = 0, cost_usd: float = 0.0) -> Stop | None:
        """Account for model usage that is not a decision of the agent (e.g. a judge or critic
        asked about a finish) and check the token/cost ceilings: an overrun ends the run
        ``token_budget``, whatever the judge said."""
        self._running(state)
        _check_usage(tokens, cost_usd)
        state.tokens += tokens
        state.cost_usd = add_usd(state.cost_usd, cost_usd)
        try:
            self._alert(state)
        except _Failed as f:
            return self._fail(state, f)
        # no mutate: the spend ceilings treat every phase but before_model alike (None too)
        stop = self._spend.check(Checkpoint(Phase.ON_ACTION, state))  # pragma: no mutate
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

    def result(self, state: RunState, *, _resume: Any = None) -> RunResult[Any]:
        """The run's result (it must have stopped). Settles its spend with the kill switch."""
        if state.stop is None:
            raise RuntimeError(f"run {state.run_id} has not stopped yet")
        self._settle(state)
        self._settle_claims(state)
        stop = state.stop
        goal = stop.reason is StopReason.GOAL_MET
        return RunResult.build(
            stop=stop,
            output=state._output,  # _end left _NO_OUTPUT unless goal_met
            run_id=state.run_id,
            steps=state.step,
            tool_calls=state.tool_calls,
            tokens=state.tokens,
            cost_usd=_usd(state.cost_usd),
            trace=tuple(state.trace),
            data=dict(state.data),
            handoff=None if goal else build_handoff(state, stop),
            unmetered_steps=state.unmetered_steps,
            reports=dict(state.reports),
            record=self._record(state),
            _resume=_resume,
        )

    def describe(self) -> dict[str, Any]:
        """The controls as JSON (kept in every run record, so a run can be replayed)."""
        np_ = self.no_progress
        return {
            "budget": self.budget.to_json(),
            "guard": self.guard.to_json() if self.guard is not None else None,
            "no_progress": None if np_ is None else {
                "repeats": np_.repeats, "empty_results": np_.empty_results,
                **({"stalled": np_.stalled} if np_.stalled is not None else {})},
            "tool_failure": {"consecutive": self.tool_failure.consecutive},
            "rules": [{"name": r.name, "predicates": [p.name for p in r.predicates],
                       "stop_early": r.stops_early} for r in self.rules],
            "validate": self.validate is not None,
        }

    def _record(self, state: RunState) -> dict[str, Any]:
        return {"task": _replayable(state.task), "controls": self.describe(),
                "last_action": _action_json(state.last_action),
                "usage": [[t, _usd(c)] for t, c in state.usage],
                # how long each decision took, for a replay under the same deadline
                **({"decide_seconds": [round(x, 6) for x in state.decide_seconds]}
                   if self.budget.timed else {})}

    # -- resuming after a human decision ----------------------------------------------------
    def reopen(self, state: RunState, *, approvals: frozenset[str] | set[str] = frozenset(),
               answer: str | None = None) -> RunState:
        """Reopen a ``needs_human`` run after a person decided: ``approvals`` name the tools
        now approved (their ``requires_approval`` / ``escalate_above`` rules let them through,
        ``max_amount`` still applies) and ``answer`` is fed to the model as a note. Budgets,
        counters and idempotency keys carry on from where the run stopped."""
        stop = state.stop
        if stop is None or stop.reason is not StopReason.NEEDS_HUMAN:
            raise ValueError("only a needs_human run can be resumed, this one "
                             + ("is still running" if stop is None else f"ended {stop.reason}"))
        why = self.kill_switch.engaged() if self.kill_switch is not None else None
        if why is not None:
            raise KillSwitchEngaged(why)
        state.stop = None
        state._output = None
        state.approvals = state.approvals | frozenset(approvals)
        if answer:
            state._notes.append(f"A person answered: {answer}")
        return state


def _bad_usage(tokens: Any, cost_usd: Any, owner: str) -> list[str]:
    """What is wrong with reported usage: tokens must be a whole number >= 0, a cost a finite
    number >= 0 (a negative cost would buy budget back; NaN and infinity compare false)."""
    bad = []
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        bad.append(f"{owner}.tokens={tokens!r}: it must be a whole number >= 0")
    if (isinstance(cost_usd, bool) or not isinstance(cost_usd, int | float)
            or not math.isfinite(cost_usd) or cost_usd < 0):
        bad.append(f"{owner}.cost_usd={cost_usd!r}: it must be a finite number >= 0")
    return bad


def _check_usage(tokens: Any, cost_usd: Any) -> None:
    """The step API's own usage arguments (the caller's, not a callback's): misuse raises."""
    if (isinstance(tokens, bool) or not isinstance(tokens, int) or isinstance(cost_usd, bool)
            or not isinstance(cost_usd, int | float) or not math.isfinite(cost_usd)):
        raise ValueError("tokens must be a whole number and cost_usd a finite number")
    if tokens < 0 or cost_usd < 0:
        raise ValueError("tokens and cost must be >= 0")


def _replayable(value: Any) -> Any:
    from runner.errors import FormatError

    try:
        canonical_bytes(value)
    except FormatError:
        return repr(value)
    return value


def _action_json(action: Any) -> dict[str, Any] | None:
    """An action in the shape of an eval case's turn (``ect.stop-eval/1``)."""
    if isinstance(action, ToolCall):
        call: dict[str, Any] = {"tool": action.tool, "args": dict(action.args)}
        if action.idempotency_key is not None:
            call["idempotency_key"] = action.idempotency_key
        return {"call": call}
    if isinstance(action, Finish):
        return {"finish": _replayable(action.output)}
    if isinstance(action, Escalate):
        return {"escalate": action.question, "found": list(action.found)}
    if isinstance(action, Invalid):
        return {"invalid": action.detail}
    return None
