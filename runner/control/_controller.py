"""RunController: drive any agent loop to exactly one typed stop.

Whole-run use: ``controller.run(task, decide, execute)`` (or ``await controller.arun(...)``)
where ``decide(state) -> Action | Turn`` is the model side and ``execute(call) -> ToolResult``
the tool side. Step-by-step use, for an engine that drives its own loop::

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
``internal_error``; the whole-run drivers cancel work in flight at the deadline (``time_budget``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import math
import os
import signal
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from runner.canonical import canonical_bytes
from runner.control._budget import Budget
from runner.control._conditions import (
    AnyOf,
    DailySpendCap,
    EscalationRequested,
    ExternalStop,
    FinishGate,
    MaxSteps,
    MaxTime,
    NoProgressDetector,
    StopCondition,
    ToolFailure,
    ToolTimeout,
)
from runner.control._errors import KillSwitchEngaged, UnmeteredUsage
from runner.control._guards import Guard
from runner.control._handoff import build_handoff
from runner.control._killswitch import CostAlert, KillSwitch
from runner.control._ledger import NOT_STORABLE, Claim, IdempotencyLedger
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
    add_usd,
    dollars,
    micro,
)
from runner.errors import ControlError

__all__ = [
    "ContractViolation",
    "Decide",
    "Execute",
    "Fold",
    "Interrupted",
    "KillSwitchStop",
    "RunController",
    "UnknownOutcome",
    "UserCodeError",
    "Validate",
    "Verdict",
    "VerdictKind",
]

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


@dataclass(frozen=True, eq=False)
class UserCodeError(Condition):
    """``internal_error``: user code (``decide``, a guard rule, ``fold``...) raised."""

    source: str

    @property
    def name(self) -> str:
        return f"user_code[{self.source}]"


@dataclass(frozen=True, eq=False)
class ContractViolation(Condition):
    """``internal_error``: a callable returned something its contract does not allow."""

    source: str

    @property
    def name(self) -> str:
        return f"contract[{self.source}]"


@dataclass(frozen=True, eq=False)
class Interrupted(Condition):
    """``internal_error``: the run was interrupted (Ctrl-C) or cancelled from outside."""

    how: str

    @property
    def name(self) -> str:
        return f"interrupted[{self.how}]"


@dataclass(frozen=True, eq=False)
class UnknownOutcome(Condition):
    """``needs_human``: an earlier attempt of a side-effect call with this idempotency key ended
    mid-call (its process died, its lease expired, its tool raised, it was cancelled): nobody
    knows whether the side effect happened, so it is not run again until a person resolves it."""

    key: str

    @property
    def name(self) -> str:
        return f"unknown_outcome[{self.key}]"


@dataclass(frozen=True, eq=False)
class ResultNotStored(Condition):
    """``needs_human``: another run already made this side-effect call (the key is done), but
    its result had no canonical encoding, so only "done, result not storable" was recorded:
    the call is not run again, and the run cannot go on with a result it does not have."""

    key: str

    @property
    def name(self) -> str:
        return f"result_not_stored[{self.key}]"


@dataclass(frozen=True, eq=False)
class KillSwitchStop(Condition):
    """``policy_block``: the kill switch's flag was raised while the run was going."""

    @property
    def name(self) -> str:
        return "kill_switch"


class _Failed(Exception):
    def __init__(self, condition: Condition, detail: str) -> None:
        super().__init__(detail)  # pragma: no mutate (only a traceback shows it; callers read .detail)
        self.condition, self.detail = condition, detail


def _first_line(e: BaseException) -> str:
    """``Type: first line of the message`` (the type alone for an empty message)."""
    first = (str(e).splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


# Frames a warning must not point into: this package and the async machinery that drives it
# (anyio, asyncio, worker threads), so it points at the caller's own line in run and arun.
_INTERNAL = (*(os.path.dirname(m.__file__ or "") + os.sep for m in (anyio, asyncio)),
             os.path.dirname(__file__) + os.sep, threading.__file__, contextlib.__file__)


def _caller_level() -> int:
    """``warnings.warn``'s ``stacklevel`` for the first frame outside :data:`_INTERNAL`, as
    seen from the function that calls this one."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame = frame.f_back
        level += 1
    return level


class RunController:
    """Enforces budgets, deadlines, guards, no-progress, stopping rules, escalation and the
    kill switch.

    Args:
        budget: what bounds every run (required; see :meth:`Budget.from_task`).
        guard: allow-list and side-effect rules; side-effect tools get the lowest call limit.
        rules: predicate stopping rules, evaluated after each tool result, before each model
            call and on each finish.
        validate: ``(state, output) -> bool | PredicateReport`` (sync or async) checking a finish.
        no_progress: the no-progress detector (default ``NoProgressDetector()``).
        tool_failure: when tool failures end the run (fatal at once, else N in a row).
        stop_when: an extra :class:`StopCondition`, checked at every checkpoint after the
            built-in ones (it may not end a run ``goal_met``).
        kill_switch: checked before every run and every step; leases daily spend per step.
        fold: ``(state, call, result) -> None`` folds a tool result into ``state.data``.
        idempotency: an :class:`IdempotencyLedger` shared by runs, so a retried or resumed run
            never repeats a side effect another run already did.
        clock: monotonic seconds for the time budget (default ``time.monotonic``).
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
        idempotency: IdempotencyLedger | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not isinstance(budget, Budget):
            raise TypeError("RunController needs a Budget")
        if stop_when is not None and not isinstance(stop_when, StopCondition):
            raise TypeError(f"stop_when must be a StopCondition, got {type(stop_when).__name__} "
                            "(use controller.halt() for a stop you decide yourself)")
        if any(not isinstance(r, StoppingRule) for r in rules):
            raise TypeError("rules must be StoppingRule instances")
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
        self.idempotency = idempotency
        self.clock = clock or time.monotonic
        side = guard.side_effect_tools if guard is not None else frozenset()
        self._steps = MaxSteps(budget.max_steps)
        self._time: MaxTime | None = budget.time_condition()
        self._spend = AnyOf(*budget.spend_conditions(), DailySpendCap())
        self._tools = AnyOf(*budget.tool_conditions(side))
        self._escalation = EscalationRequested()
        self._gate = FinishGate()
        self._kill = KillSwitchStop()
        self._observers: list[StopCondition] = [self._spend, self._tools, self.no_progress,
                                                self.tool_failure]
        if stop_when is not None:
            self._observers.append(stop_when)
        self._runs = 0

    # -- helpers ----------------------------------------------------------------------------
    def _user(self, point: Checkpoint) -> Stop | None:
        if self.stop_when is None:
            return None
        stop: Stop | None = _call("stop_when", self.stop_when.check, point)
        return stop

    def _timed(self, point: Checkpoint) -> Stop | None:
        return self._time.check(point) if self._time is not None else None

    def _observe(self, point: Checkpoint) -> None:
        for cond in self._observers:
            _call(f"{cond.name}.observe", cond.observe, point)

    @staticmethod
    def _running(state: RunState) -> None:
        if state.stop is not None:
            raise RuntimeError(f"run {state.run_id} already stopped ({state.stop.reason})")

    def _end(self, state: RunState, stop: Stop, output: Any = _NO_OUTPUT) -> Stop:
        if stop.reason is StopReason.GOAL_MET and output is _NO_OUTPUT:  # a condition's own stop
            name = stop.condition.name
            raise _Failed(ContractViolation(name),
                          f"{name} cannot end a run with goal_met (only a checked finish or an "
                          "early-stop rule can)")
        state.stop = stop
        state._output = output
        state.proposal = None
        return stop

    def _fail(self, state: RunState, f: _Failed) -> Stop:
        return self._end(state, Stop(StopReason.INTERNAL_ERROR, f.condition, f.detail, state.step,
                                     question="User code failed or broke its contract: fix it, "
                                              "then retry the run?"))

    def _alert(self, state: RunState) -> None:
        ks = self.kill_switch
        if ks is not None and not state._alerted and ks.alert_due(state.cost_usd):
            state._alerted = True
            assert ks.cost_alert_usd is not None
            _call("on_cost_alert", ks.on_cost_alert,
                  CostAlert(state.run_id, _usd(state.cost_usd), ks.cost_alert_usd))

    def _settle(self, state: RunState) -> None:
        """Release the step's lease and add what was spent since the last settlement."""
        if state._admission is None:
            return
        ks, admission = state._admission
        lease, state._lease = state._lease, None
        ks.settle(admission, lease, dollars(micro(state.cost_usd) - micro(state._settled_usd)))
        state._settled_usd = state.cost_usd

    def _flag(self, state: RunState) -> Stop | None:
        ks = self.kill_switch
        why = ks.engaged() if ks is not None else None
        if why is None:
            return None
        return Stop(StopReason.POLICY_BLOCK, self._kill, why, state.step,
                    question="The kill switch is engaged: release it and resume, or close the run?")

    def _reserve(self, state: RunState) -> Stop | None:
        """Reserve this step's spend under the daily ceiling (a lease); refuse if none is left.

        The reservation is ``step_reserve_usd``, else what is left of the run's
        ``max_cost_usd``, else all the day leaves (see :meth:`KillSwitch.reserve`)."""
        if state._admission is None:
            return None
        ks, admission = state._admission
        cap = self.budget.max_cost_usd
        bound = None if cap is None else dollars(micro(cap) - micro(state.cost_usd))
        try:
            self._settle(state)
            lease, allowed = ks.reserve(admission, state.run_id, bound)
        except ControlError as e:  # the ledger is unusable: fail closed
            raise _Failed(UserCodeError("kill_switch.ledger"), str(e)) from None
        if allowed is None:
            return None
        if lease is None:
            want = ks.step_reserve_usd if ks.step_reserve_usd is not None else bound
            asks = f"a step reserves ${want:.4f}" if want is not None else "a step needs some"
            return Stop(StopReason.TOKEN_BUDGET, DailySpendCap(),
                        f"today's spend ceiling leaves ${allowed:.4f}; {asks}", state.step)
        state._lease = lease
        state.daily_remaining_usd = add_usd(state.cost_usd, allowed)
        return None

    def _rules_first(self, state: RunState) -> tuple[Stop | None, list[str]]:
        """Evaluate every stopping rule on the folded state: a rule that holds (with an output)
        or asks for a human ends the run; otherwise the missing predicate names."""
        missing: list[str] = []
        for rule in self.rules:
            report: PredicateReport = _call(f"{rule.name}.evaluate", rule.evaluate, state)
            state.reports[rule.name] = report
            if report.escalate is not None:
                return self._end(state, Stop(StopReason.NEEDS_HUMAN, rule,
                                             report.detail or f"{rule.name} asked for a human",
                                             state.step, question=report.escalate)), missing
            if report.ok and rule.output is not None:
                output = _call(f"{rule.name}.output", rule.output, state)
                return self._end(state, Stop(StopReason.GOAL_MET, rule,
                                             f"every predicate of {rule.name} holds", state.step),
                                 output), missing
            missing.extend(report.missing)
        return None, missing

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
                or _call("no_progress", self.no_progress.check, point))
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

    def _deduplicated(self, state: RunState, point: Checkpoint, call: ToolCall,
                      key: str) -> Verdict:
        earlier = state._idempotency[key][1]
        if isinstance(earlier.data, dict) and set(earlier.data) == {NOT_STORABLE}:
            stop = Stop(StopReason.NEEDS_HUMAN, ResultNotStored(key),
                        f"{call.tool} with idempotency key {key!r} already happened, but its "
                        f"result could not be stored ({earlier.data[NOT_STORABLE]})", state.step,
                        question=f"{call.tool} with key {key!r} is done and will not run again; "
                                 "what should the run use as its result?")
            return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
        self._observe(point)
        state.trace.append(StepRecord(state.step, "deduplicated", call.tool,
                                      dict(call.args), earlier,
                                      f"idempotency key {key!r} already executed",
                                      idempotency_key=call.idempotency_key))
        if self.fold is not None:  # the earlier result is this call's result
            _call("fold", self.fold, state, call, earlier)
        return Verdict(VerdictKind.DEDUPLICATED, call=call, result=earlier)

    def _claim(self, state: RunState, point: Checkpoint, call: ToolCall,
               key: str) -> Verdict | None:
        """Claim ``key`` in the shared ledger before the call runs (None: claimed, run it).

        Another attempt holding it in flight is waited for (polling, within the run's time
        budget); when it is done its result is this call's; when its outcome is unknown the
        run stops ``needs_human``."""
        ledger = self.idempotency
        if ledger is None:
            return None
        fingerprint = canonical_bytes([call.tool, call.args])
        owner = f"{state.run_id}/{uuid.uuid4().hex}"
        pause = 0.01
        while True:
            try:
                outcome, found = ledger.claim(key, fingerprint, state.run_id, owner)
            except ControlError as e:
                raise _Failed(UserCodeError("idempotency.ledger"), str(e)) from None
            if outcome == "claimed":
                state._claims[key] = owner
                return None
            if outcome == "done":
                assert isinstance(found, tuple)
                state._idempotency[key] = found
                if found[0] != fingerprint:
                    assert self.guard is not None
                    stop = self.guard._stop(StopReason.POLICY_BLOCK, point,
                                            f"idempotency key {key!r} reused with different "
                                            "arguments")
                    return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
                return self._deduplicated(state, point, call, key)
            assert isinstance(found, Claim)
            if outcome == "unknown":
                stop = Stop(StopReason.NEEDS_HUMAN, UnknownOutcome(key),
                            f"an earlier attempt of {call.tool} with idempotency key {key!r} "
                            f"({found.describe()}) ended mid-call: its outcome is unknown",
                            state.step,
                            question=f"Did {call.tool} with key {key!r} take effect? Check, "
                                     "then resolve the key in the idempotency ledger "
                                     "(resolve(key, result) if it did, resolve(key) if not) "
                                     "and resume the run.")
                return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
            flagged = self._flag(state)  # re-read while waiting: a STOP file ends the wait
            if flagged is not None:
                return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, flagged))
            left = _left(state)
            if left is not None and left <= 0 and self._time is not None:
                stop = self._time.expired(point, f"waiting for {key!r} held by "
                                                 f"{found.describe()}")
                return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
            time.sleep(pause if left is None else min(pause, left))
            pause = min(pause * 1.5, 0.25)

    def _crashed(self, state: RunState, call: ToolCall, e: Exception) -> ToolResult:
        """A tool that raised is a fatal failure; if it was a side-effect call holding a claim,
        the side effect may have happened before it raised (the charge went through, then the
        reply timed out): its key becomes unknown, as when the controller's own deadline cuts a
        call off, and is never freed for a retry."""
        key = self.guard.idempotency_key(call) if self.guard is not None else None
        owner = state._claims.pop(key, None) if key is not None else None
        if key is not None and owner is not None and self.idempotency is not None:
            with contextlib.suppress(ControlError):  # unwritable: the claim stays held
                self.idempotency.abandon(key, owner)
        return ToolResult.failure(_first_line(e), fatal=True)

    def _release_claims(self, state: RunState) -> None:
        """Free every claim this run holds: its calls never ran (an async ``execute`` given to
        ``run`` returned a coroutine that was closed unawaited)."""
        ledger = self.idempotency
        for key, owner in list(state._claims.items()):
            del state._claims[key]
            if ledger is not None:
                with contextlib.suppress(ControlError):
                    ledger.release(key, owner)

    def _settle_claims(self, state: RunState) -> None:
        """A call whose claim is still held when the run ends never reported back (cancelled at
        a deadline, interrupted): its outcome is unknown."""
        ledger = self.idempotency
        for key, owner in list(state._claims.items()):
            del state._claims[key]
            if ledger is not None:
                with contextlib.suppress(ControlError):  # the run already ends; nothing to do
                    ledger.abandon(key, owner)

    def _shared_key(self, state: RunState, call: ToolCall) -> None:
        """Bring a key another run already used into this run's idempotency memory."""
        if self.idempotency is None or self.guard is None:
            return
        key = self.guard.idempotency_key(call)
        if key is None:
            return
        try:
            earlier = self.idempotency.get(key)
        except ControlError as e:
            raise _Failed(UserCodeError("idempotency.ledger"), str(e)) from None
        if earlier is not None:
            state._idempotency[key] = earlier

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
        stop = (self.tool_failure.check(point) or self.no_progress.check(point)
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
            "no_progress": {"repeats": np_.repeats, "empty_results": np_.empty_results,
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

    # -- whole-run drivers ------------------------------------------------------------------
    def _check_runnable(self) -> None:
        if not self.rules and self.validate is None:
            raise ValueError("a run needs a finish check: pass validate= or rules=")

    def _meter(self, state: RunState, action: Any) -> None:
        """Count a decision that reported no usage; warn once per run, at the caller's line
        (the first frame outside this package and the async machinery)."""
        if isinstance(action, Turn) or (self.budget.max_tokens is None
                                        and self.budget.max_cost_usd is None):
            return
        state.unmetered_steps += 1
        if not state._warned:
            state._warned = True
            warnings.warn(UnmeteredUsage(
                f"run {state.run_id}: decide returned a plain action, so no token usage or "
                "cost was counted against the budget; return Turn(action, tokens=..., "
                "cost_usd=...) to meter it"),
                stacklevel=_caller_level())

    def run(self, task: Any, decide: Decide, execute: Execute, *, run_id: str | None = None,
            data: dict[str, Any] | None = None) -> RunResult[Any]:
        """Run a synchronous agent loop to its stop. Use :meth:`arun` for async callables
        (``run`` refuses them with a ``TypeError``, deadline or not).

        With a deadline in the budget (``max_seconds``, tool timeouts) the callables run in a
        worker thread under an anyio cancel scope, so a hung tool is abandoned at the deadline
        (``time_budget``); this needs no running event loop (inside one, use :meth:`arun`).
        Ctrl-C or SIGTERM during the run ends it ``internal_error`` (condition
        ``Interrupted``) with a handoff, its spend settled; the result is returned."""
        self._check_runnable()
        for what, fn in (("decide", decide), ("execute", execute), ("validate", self.validate)):
            if fn is not None and _is_async(fn):
                raise _Misuse(f"{what} is async: use `await controller.arun(...)`")
        if self.budget.timed and _in_event_loop():
            raise RuntimeError("run() with a deadline cannot be called inside a running event "
                               "loop: use `await controller.arun(...)` there")
        state = self.start(task, run_id=run_id, data=data)
        return self._run_sync(state, decide, execute)

    def _run_sync(self, state: RunState, decide: Decide, execute: Execute) -> RunResult[Any]:
        with _terminate_as_interrupt():
            try:
                if self.budget.timed:
                    return anyio.run(self._drive, state, decide, execute, True)
                while state.stop is None:
                    if self.check_before_model(state) is not None:
                        break
                    began = self.clock()
                    try:
                        raw = decide(state)
                    except Exception as e:
                        self._fail(state, _user_error("decide", e))
                        break
                    state.decide_seconds.append(self.clock() - began)
                    action = _sync(raw, "decide")  # an async decide needs arun (TypeError)
                    self._step(state, action, execute)
            except (KeyboardInterrupt, _Terminated) as e:
                if state.stop is None:
                    self._end(state, _interrupted(state, "sigterm" if isinstance(e, _Terminated)
                                                  else "ctrl-c"))
            except _Misuse:  # the awaitable was closed unawaited: its call never ran
                self._release_claims(state)
                raise
            finally:
                self._settle(state)
        return self.result(state, _resume=self._resumer(state, decide, execute))

    def _step(self, state: RunState, action: Any, execute: Execute) -> None:
        self._meter(state, action)
        try:
            verdict = self.on_action(state, action)
        except TypeError as e:
            self._fail(state, _Failed(ContractViolation("decide"), str(e)))
            return
        if verdict.kind is VerdictKind.EXECUTE:
            assert verdict.call is not None
            try:
                raw = execute(verdict.call)
            except Exception as e:  # a crashing tool is a fatal tool failure
                raw = self._crashed(state, verdict.call, e)
            self.on_tool_result(state, verdict.call, _sync(raw, "execute"))
        elif verdict.kind is VerdictKind.CHECK_FINISH:
            assert verdict.finish is not None
            self.on_finish(state, verdict.finish)

    async def arun(self, task: Any, decide: Decide, execute: Execute, *,
                   run_id: str | None = None, data: dict[str, Any] | None = None,
                   on_stop: Callable[[RunResult[Any]], None] | None = None) -> RunResult[Any]:
        """Like :meth:`run`; ``decide``, ``execute`` and ``validate`` may be sync or async.

        Deadlines cancel work in flight (anyio cancel scopes); sync callables then run in a
        worker thread. When the caller cancels the run from outside (Ctrl-C under
        ``asyncio.run`` is such a cancellation), the run ends ``internal_error`` (condition
        ``Interrupted``), ``on_stop`` receives that result, and the cancellation propagates.
        SIGTERM (in the main thread, when no handler of yours is installed) ends the run the
        same way and the result is returned."""
        self._check_runnable()
        state = self.start(task, run_id=run_id, data=data)
        try:
            return await self._watched(state, decide, execute)
        except anyio.get_cancelled_exc_class():
            # no mutate: nothing below awaits, so the shield is defensive and False behaves alike
            with anyio.CancelScope(shield=True):  # pragma: no mutate
                if state.stop is None:
                    self._end(state, _interrupted(state, "cancelled"))
                result = self.result(state)
                if on_stop is not None:
                    on_stop(result)
            raise
        except KeyboardInterrupt:  # raised inside a sync callable running on the loop
            if state.stop is None:
                self._end(state, _interrupted(state, "ctrl-c"))
            return self.result(state, _resume=self._resumer(state, decide, execute, True))

    async def _watched(self, state: RunState, decide: Decide, execute: Execute) -> RunResult[Any]:
        """``_drive`` with SIGTERM ending the run ``internal_error`` (main thread only, and only
        while no other SIGTERM handler is installed)."""
        if not _can_watch_sigterm():
            return await self._drive(state, decide, execute, self.budget.timed, from_async=True)
        result: RunResult[Any] | None = None
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:
                async def watch() -> None:
                    async for _ in signals:
                        if state.stop is None:
                            self._end(state, _interrupted(state, "sigterm"))
                        tg.cancel_scope.cancel()
                        return

                tg.start_soon(watch)
                result = await self._drive(state, decide, execute, self.budget.timed,
                                           from_async=True)
                tg.cancel_scope.cancel()
        if result is None:  # SIGTERM cancelled the drive
            result = self.result(state, _resume=self._resumer(state, decide, execute, True))
        return result

    async def _drive(self, state: RunState, decide: Decide, execute: Execute,
                     threaded: bool, *, from_async: bool = False) -> RunResult[Any]:
        async def invoke(what: str, fn: Callable[..., Any], *args: Any) -> Any:
            # no mutate: a coroutine function sent to a thread returns its coroutine, awaited below
            if threaded and not inspect.iscoroutinefunction(fn):  # pragma: no mutate
                value = await _in_daemon_thread(fn, *args)
            else:
                value = fn(*args)
            if not from_async:  # run() refuses async callables, deadline or not
                return _sync(value, what)
            return await value if inspect.isawaitable(value) else value

        async def judge(action: Any) -> Verdict:
            if self.idempotency is None:  # no shared ledger: nothing can wait
                return self.on_action(state, action)
            # waiting for another attempt's claim polls; keep the event loop free meanwhile
            return await anyio.to_thread.run_sync(self.on_action, state, action)

        deadline = self._time
        doing: str  # what was under way when the deadline passed (set before every await)
        try:
            with anyio.fail_after(_left(state)):
                while state.stop is None:
                    if self.check_before_model(state) is not None:
                        break
                    doing = "waiting for decide"
                    began = self.clock()
                    try:
                        action = await invoke("decide", decide, state)
                    except _Misuse:
                        raise
                    except Exception as e:
                        self._fail(state, _user_error("decide", e))
                        break
                    state.decide_seconds.append(self.clock() - began)
                    self._meter(state, action)
                    try:
                        doing = "waiting for an idempotency key"
                        verdict = await judge(action)
                    except TypeError as e:
                        self._fail(state, _Failed(ContractViolation("decide"), str(e)))
                        break
                    if verdict.kind is VerdictKind.EXECUTE:
                        call = verdict.call
                        assert call is not None
                        doing = f"in {call.tool}"
                        limit = self.budget.timeout_for(call.tool)
                        raw: Any
                        try:
                            with anyio.move_on_after(limit) as scope:
                                raw = await invoke("execute", execute, call)
                        except _Misuse:
                            raise
                        except Exception as e:  # a crashing tool is a fatal tool failure
                            raw = self._crashed(state, call, e)
                        if scope.cancelled_caught:
                            assert limit is not None
                            self._end(state, Stop(StopReason.TIME_BUDGET,
                                                  ToolTimeout(call.tool, limit),
                                                  f"{call.tool} ran past its {limit:g}-second "
                                                  "timeout and was cancelled", state.step))
                            break
                        self.on_tool_result(state, call, raw)
                    elif verdict.kind is VerdictKind.CHECK_FINISH:
                        assert verdict.finish is not None
                        doing = "in validate"
                        report: Any = None
                        if self.validate is not None:
                            state.proposal = verdict.finish.output
                            try:
                                report = await invoke("validate", self.validate, state,
                                                      verdict.finish.output)
                            except _Misuse:
                                raise
                            except Exception as e:  # user code that failed
                                self._fail(state, _user_error("validate", e))
                                break
                            if report is None:
                                self._fail(state, _contract("validate", None))
                                break
                        self._decide_finish(state, verdict.finish, report)
        except TimeoutError:
            if state.stop is None:
                assert deadline is not None
                # no mutate: MaxTime.expired reads only the step from its checkpoint, not the phase
                point = Checkpoint(Phase.BEFORE_MODEL, state)  # pragma: no mutate
                self._end(state, deadline.expired(point, doing))
        except KeyboardInterrupt:
            if state.stop is None:
                self._end(state, _interrupted(state, "ctrl-c"))
        return self.result(state, _resume=self._resumer(state, decide, execute, from_async))

    def _resumer(self, state: RunState, decide: Decide, execute: Execute,
                 is_async: bool = False) -> Callable[..., Any] | None:
        if state.stop is None or state.stop.reason is not StopReason.NEEDS_HUMAN:
            return None

        def resume(approvals: frozenset[str] | set[str] = frozenset(),
                   answer: str | None = None) -> Any:
            self.reopen(state, approvals=approvals, answer=answer)
            if is_async:
                return self._drive(state, decide, execute, self.budget.timed, from_async=True)
            return self._run_sync(state, decide, execute)

        return resume


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a daemon thread, awaited; a deadline abandons it. anyio's own worker
    threads are not daemons, so a hung sync tool abandoned at a deadline would keep the process
    alive until it returned; a daemon thread lets the process exit once the caller is done."""
    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    out: list[tuple[bool, Any]] = []
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            out.append((True, ctx.run(fn, *args)))
        except BaseException as e:  # handed to the awaiting task, raised there
            out.append((False, e))
        with contextlib.suppress(Exception):  # abandoned: the event loop may be gone
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=work, name="runner.control worker", daemon=True).start()
    await done.wait()
    ok, value = out[0]
    if not ok:
        raise value
    return value


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


def _left(state: RunState) -> float | None:
    """The seconds left of the run's time budget (None: no time budget)."""
    left = state.remaining
    assert left is not None  # pragma: no mutate (for mypy only)
    return left.seconds


def _usd(amount: float) -> float:
    """A dollar figure in whole micro-dollars (the unit money is counted in)."""
    return dollars(micro(amount))


def _call(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except _Failed:
        raise
    except Exception as e:
        raise _user_error(what, e) from e


def _user_error(what: str, e: Exception) -> _Failed:
    return _Failed(UserCodeError(what), f"{what} raised {_first_line(e)}")


def _contract(what: str, value: Any) -> _Failed:
    return _Failed(ContractViolation(what),
                   f"{what} must return bool or PredicateReport, got {type(value).__name__}")


_HOW = {"ctrl-c": "interrupted by Ctrl-C", "sigterm": "terminated by SIGTERM",
        "cancelled": "cancelled from outside"}


def _interrupted(state: RunState, how: str) -> Stop:
    return Stop(StopReason.INTERNAL_ERROR, Interrupted(how), _HOW[how],
                state.step, question="The run was interrupted: resume it from the handoff, "
                                     "or close it?")


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


class _Misuse(TypeError):
    """An async callable given to the synchronous ``run`` (escapes the run as a TypeError)."""


class _Terminated(BaseException):
    """SIGTERM arrived while ``run`` was driving the loop."""


def _sync(value: Any, what: str) -> Any:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise _Misuse(f"{what} returned an awaitable: use `await controller.arun(...)`")
    return value


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    return inspect.iscoroutinefunction(fn) or (
        not inspect.isfunction(fn) and call is not None and inspect.iscoroutinefunction(call))


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _can_watch_sigterm() -> bool:
    return _main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While ``run`` drives the loop in the main thread, SIGTERM raises ``_Terminated`` (when
    no handler of the caller's is installed); the previous handler is restored after."""
    if not _can_watch_sigterm():
        yield
        return

    def raise_terminated(signum: int, frame: Any) -> None:
        raise _Terminated

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
