"""The controls a run is checked against, and the primitives that end it.

``_Checks`` is the base of :class:`~runner.control.RunController`: its constructor holds the
controls (budget, guard, rules, validate, no-progress, tool failures, ``stop_when``, kill
switch, fold, idempotency ledger, clock; see :class:`RunController` for the arguments) and its
helpers evaluate them at a checkpoint (the stopping rules, the kill switch's flag, the time
budget, ``stop_when``, the observers), end a run with a typed stop (``_end``, ``_fail``), alert
on spend and lease and settle the daily spend with the kill switch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from runner.control._budget import Budget
from runner.control._conditions import (
    AnyOf,
    DailySpendCap,
    EscalationRequested,
    FinishGate,
    MaxSteps,
    MaxTime,
    NoProgressDetector,
    StopCondition,
    ToolFailure,
)
from runner.control._guards import Guard
from runner.control._killswitch import CostAlert, KillSwitch
from runner.control._ledger import IdempotencyLedger
from runner.control._result import _NO_OUTPUT
from runner.control._rules import StoppingRule
from runner.control._types import (
    Checkpoint,
    PredicateReport,
    RunState,
    Stop,
    StopReason,
    add_usd,
    dollars,
    micro,
)
from runner.control._verdicts import (
    ContractViolation,
    Fold,
    KillSwitchStop,
    UserCodeError,
    Validate,
    _call,
    _Failed,
)
from runner.errors import ControlError


class _Checks:
    """The controls and their checks (see :class:`RunController` for the arguments)."""

    def __init__(
        self,
        budget: Budget,
        *,
        guard: Guard | None = None,
        rules: Sequence[StoppingRule] = (),
        validate: Validate | None = None,
        no_progress: NoProgressDetector | Literal[False] | None = None,
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
        if no_progress is not None and no_progress is not False and not isinstance(
                no_progress, NoProgressDetector):
            raise TypeError("no_progress must be a NoProgressDetector, None (the default "
                            f"detector) or False (off), got {type(no_progress).__name__}")
        self.no_progress: NoProgressDetector | None = (
            None if no_progress is False
            else no_progress if no_progress is not None else NoProgressDetector())
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
        self._observers: list[StopCondition] = [self._spend, self._tools]
        if self.no_progress is not None:
            self._observers.append(self.no_progress)
        self._observers.append(self.tool_failure)
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



def _left(state: RunState) -> float | None:
    """The seconds left of the run's time budget (None: no time budget)."""
    left = state.remaining
    assert left is not None  # pragma: no mutate (for mypy only)
    return left.seconds


def _usd(amount: float) -> float:
    """A dollar figure in whole micro-dollars (the unit money is counted in)."""
    return dollars(micro(amount))
