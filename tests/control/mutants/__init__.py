"""Nine deliberate controller bugs (M1-M9), applied with monkeypatch, that the bundled evals and
the unit tests must each catch (kill). They are the fixtures of the mutation run: a bug that
slips past both is a hole in the tests.

``apply(name, mp)`` installs one mutant for the duration of the MonkeyPatch ``mp``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runner.control import (
    PredicateReport,
    RunController,
    RunResult,
    RunState,
    Stop,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolCallLimit,
    ToolFailure,
)
from runner.control._conditions import MaxTokens, RepeatedAction, _short
from runner.control._types import Checkpoint, Finish, Phase

Mutant = Callable[[pytest.MonkeyPatch], None]


def m1_budget_stop_returns_last_finish(mp: pytest.MonkeyPatch) -> None:
    """M1: budget stops return the last proposed finish as output."""
    on_action, result = RunController.on_action, RunController.result

    def remember(self: RunController, state: RunState, action: Any, **kw: Any) -> Any:
        inner = getattr(action, "action", action)
        if hasattr(inner, "output"):
            state.__dict__["_m1_last"] = inner.output
        return on_action(self, state, action, **kw)

    def leak(self: RunController, state: RunState, **kw: Any) -> Any:
        res = result(self, state, **kw)
        if not res.completed and "_m1_last" in state.__dict__:
            object.__setattr__(res, "_output", state.__dict__["_m1_last"])
        return res

    mp.setattr(RunController, "on_action", remember)
    mp.setattr(RunController, "result", leak)
    mp.setattr(RunResult, "output", property(lambda self: self._output))


def m2_guard_after_execution(mp: pytest.MonkeyPatch) -> None:
    """M2: the guard runs after the tool executed."""
    from runner.control import Guard

    check, on_tool_result = Guard.check, RunController.on_tool_result

    def late(self: RunController, state: RunState, call: ToolCall, result: Any) -> Any:
        if self.guard is not None:
            stop = check(self.guard, Checkpoint(Phase.ON_ACTION, state, call, call))
            if stop is not None:
                return self._end(state, stop)
        return on_tool_result(self, state, call, result)

    mp.setattr(Guard, "check", lambda self, point: None)
    mp.setattr(RunController, "on_tool_result", late)


def m3_tool_limit_off_by_one(mp: pytest.MonkeyPatch) -> None:
    """M3: a per-tool limit off by one (one call too many is allowed)."""
    def check(self: ToolCallLimit, point: Checkpoint) -> Stop | None:
        call = point.call
        if point.phase is not Phase.ON_ACTION or call is None:
            return None
        if self.tool is None:
            used = point.state.tool_calls
        elif call.tool == self.tool:
            used = (point.state.calls_by_tool.get(self.tool, 0)
                    - point.state.failed_by_tool.get(self.tool, 0))
        else:
            return None
        if used > self.limit:  # the bug: was used + 1 > limit
            what = "tool calls in total" if self.tool is None else f"successful calls of {self.tool}"
            return self._stop(StopReason.TOOL_LIMIT, point,
                              f"{call.tool}: would exceed the limit of {self.limit} {what}")
        return None

    mp.setattr(ToolCallLimit, "check", check)


def m4_rules_on_previous_report(mp: pytest.MonkeyPatch) -> None:
    """M4: stopping rules judged on the previous step's report."""
    evaluate = StoppingRule.evaluate

    def stale(self: StoppingRule, state: RunState) -> PredicateReport:
        memo = state.scratch(self)
        fresh = evaluate(self, state)
        reports = memo.setdefault("m4", {})
        reports[state.step] = fresh
        earlier = [s for s in reports if s < state.step]
        if not earlier:
            return PredicateReport(missing=tuple(p.name for p in self.predicates) or (self.name,))
        return reports[max(earlier)]  # type: ignore[no-any-return]

    mp.setattr(StoppingRule, "evaluate", stale)


def m5_no_directive_after_rejected_finish(mp: pytest.MonkeyPatch) -> None:
    """M5: no directive fed back after a rejected finish."""
    decide_finish = RunController._decide_finish

    def mute(self: RunController, state: RunState, finish: Any, report: Any) -> Any:
        stop = decide_finish(self, state, finish, report)
        if stop is None:
            state._missing.clear()
            state._notes.clear()
        return stop

    mp.setattr(RunController, "_decide_finish", mute)


def m6_no_token_check_before_model(mp: pytest.MonkeyPatch) -> None:
    """M6: no token check before the model call (only an overrun is caught, after paying)."""
    def check(self: MaxTokens, point: Checkpoint) -> Stop | None:
        used = point.state.tokens
        if used > self.limit:  # the bug: no ">= limit" check before the model call
            return self._stop(StopReason.TOKEN_BUDGET, point,
                              f"used {used} tokens of a {self.limit}-token budget")
        return None

    mp.setattr(MaxTokens, "check", check)


def m7_repeat_limit_off_by_one(mp: pytest.MonkeyPatch) -> None:
    """M7: the repeat limit off by one (one more identical action runs)."""
    def check(self: RepeatedAction, point: Checkpoint) -> Stop | None:
        fp = self._fp(point)
        if fp is None:
            return None
        seen = point.state.scratch(self).get(fp, 0)
        if seen + 1 > self.repeats:  # the bug: was >=
            action = point.action
            what = (f"{action.tool}({_short(action.args)})" if isinstance(action, ToolCall)
                    else "the same finish" if isinstance(action, Finish) else "the same invalid reply")
            return self._stop(StopReason.NO_PROGRESS, point,
                              f"{what} proposed {seen + 1} times with no change")
        return None

    mp.setattr(RepeatedAction, "check", check)


def m8_failure_streak_across_tools(mp: pytest.MonkeyPatch) -> None:
    """M8: the tool-failure streak counted across all tools instead of per tool."""
    def check(self: ToolFailure, point: Checkpoint) -> Stop | None:
        r, call = point.result, point.call
        if point.phase is not Phase.AFTER_TOOL or r is None or call is None or r.ok:
            return None
        if r.fatal:
            return self._stop(StopReason.TOOL_ERROR, point,
                              f"{call.tool} failed fatally: {r.error or 'unknown error'}")
        streak = point.state.scratch(self).get("*", 0) + 1  # the bug: one streak for all tools
        if streak >= self.consecutive:
            return self._stop(StopReason.TOOL_ERROR, point,
                              f"{call.tool} failed {streak} times in a row: {r.error or 'unknown error'}")
        return None

    def observe(self: ToolFailure, point: Checkpoint) -> None:
        r = point.result
        if point.phase is not Phase.AFTER_TOOL or r is None:
            return
        memo = point.state.scratch(self)
        memo["*"] = 0 if r.ok else memo.get("*", 0) + 1

    mp.setattr(ToolFailure, "check", check)
    mp.setattr(ToolFailure, "observe", observe)


def m9_validate_overrides_rules(mp: pytest.MonkeyPatch) -> None:
    """M9: a finish accepted because validate passed while a rule still reports missing
    predicates (the fluent early stop of the stopping-rule chapter)."""
    decide_finish = RunController._decide_finish

    def lenient(self: RunController, state: RunState, finish: Any, report: Any) -> Any:
        if isinstance(report, bool | PredicateReport) and PredicateReport.of(report).ok:
            for rule in self.rules:  # the bug: the rules' reports are computed, then ignored
                state.reports[rule.name] = rule.evaluate(state)
            return self._end(state, Stop(StopReason.GOAL_MET, self._gate,
                                         "the finish passed every check", state.step),
                             finish.output)
        return decide_finish(self, state, finish, report)

    mp.setattr(RunController, "_decide_finish", lenient)


MUTANTS: dict[str, Mutant] = {
    "M1": m1_budget_stop_returns_last_finish,
    "M2": m2_guard_after_execution,
    "M3": m3_tool_limit_off_by_one,
    "M4": m4_rules_on_previous_report,
    "M5": m5_no_directive_after_rejected_finish,
    "M6": m6_no_token_check_before_model,
    "M7": m7_repeat_limit_off_by_one,
    "M8": m8_failure_streak_across_tools,
    "M9": m9_validate_overrides_rules,
}


def apply(name: str, mp: pytest.MonkeyPatch) -> None:
    MUTANTS[name](mp)
