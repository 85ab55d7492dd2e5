"""Budgets: set from the task, failing closed on nonsense (refusals name their parameters),
tool limits, the token ceiling before a model call, and unmetered usage warned at the caller."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from types import MappingProxyType

import anyio
import pytest

from runner.control import (
    Budget,
    Checkpoint,
    Finish,
    Guard,
    MaxCost,
    MaxSteps,
    MaxTokens,
    Phase,
    PredicateReport,
    RunController,
    RunState,
    SideEffectRule,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolCallLimit,
    ToolLimits,
    ToolResult,
    Turn,
    UnmeteredUsage,
)
from runner.control._budget import _DefaultToolLimit
from tests.control.conftest import merge, script, tools
from tests.control.helpers_runs import ok


def test_from_task_gives_a_margin_over_a_competent_person() -> None:
    b = Budget.from_task(expected_steps=4, tokens_per_step=5000)
    assert b.max_steps == 12 and b.max_tokens == 60_000 and b.max_cost_usd is None
    b = Budget.from_task(expected_steps=3, cost_per_step_usd=0.01, margin=1.5)
    assert b.max_steps == 5 and b.max_cost_usd == pytest.approx(0.05)


@pytest.mark.parametrize("kw", [
    {"max_steps": 0, "max_tokens": 10},
    {"max_steps": 3},  # no ceiling on spend
    {"max_steps": 3, "max_tokens": 0},
    {"max_steps": 3, "max_cost_usd": 0.0},
])
def test_budget_fails_closed(kw: dict) -> None:
    with pytest.raises(ValueError):
        Budget(**kw)


def test_side_effect_tools_get_the_lowest_default() -> None:
    lim = ToolLimits(per_tool={"search": 8, "email": 2})
    assert lim.limit_for("email", {"email"}) == 2  # explicit wins
    assert lim.limit_for("refund", {"refund"}) == 1
    assert lim.limit_for("lookup", {"refund"}) == 8
    with pytest.raises(ValueError):
        ToolLimits(default=-1)


def test_conditions_are_typed() -> None:
    b = Budget(max_steps=4, max_tokens=10, max_cost_usd=1.0,
               tool_limits=ToolLimits(per_tool={"a": 1}, total=3))
    kinds = [type(m) for m in b.conditions().members]
    assert kinds[:3] == [MaxSteps, MaxTokens, MaxCost]
    assert kinds[3] is ToolCallLimit and kinds[-1] is ToolCallLimit
    assert b.to_json()["tool_limits"] == {"per_tool": {"a": 1}, "default": 8,
                                          "side_effect_default": 1, "total": 3}


# Exact behaviour of budgets, tool limits and stopping rules: messages, JSON, boundaries.
# Written against the bounded mutation run (tests/control/test_mutation.py): each assertion pins
# something a mutant of runner/control/_budget.py or _rules.py changed unnoticed.
def refused(fn: object, message: str) -> None:
    with pytest.raises(ValueError) as e:
        fn()  # type: ignore[operator]
    assert str(e.value) == message


def test_budget_refusals_say_what_is_wrong() -> None:
    refused(lambda: Budget(max_steps=0, max_tokens=1), "Budget.max_steps must be an integer >= 1")
    refused(lambda: Budget(max_steps=1), "Budget needs max_tokens or max_cost_usd (a ceiling on spend)")
    refused(lambda: Budget(max_steps=1, max_tokens=0), "Budget.max_tokens must be >= 1")
    refused(lambda: Budget(max_steps=1, max_cost_usd=0), "Budget.max_cost_usd must be > 0")
    refused(lambda: Budget(max_steps=1, max_tokens=1, max_seconds=0),
            "Budget.max_seconds must be a number of seconds > 0")
    refused(lambda: Budget(max_steps=1, max_tokens=1, max_seconds=-2),
            "Budget.max_seconds must be a number of seconds > 0")
    refused(lambda: Budget(max_steps=1, max_tokens=1, tool_timeout_s=0),
            "Budget.tool_timeout_s must be a number of seconds > 0")
    refused(lambda: Budget(max_steps=1, max_tokens=1, tool_timeouts={"s": 0}),
            "Budget.tool_timeouts['s'] must be a number of seconds > 0")
    refused(lambda: Budget(max_steps=1, max_tokens=1, max_seconds="5"),  # type: ignore[arg-type]
            "Budget.max_seconds must be a number of seconds > 0")
    Budget(max_steps=1, max_tokens=1, max_seconds=0.001, tool_timeout_s=1, tool_timeouts={"s": 2})


def test_budget_keeps_its_own_copy_of_the_timeouts() -> None:
    timeouts = {"s": 2.0}
    budget = Budget(max_steps=1, max_tokens=1, tool_timeouts=MappingProxyType(timeouts))
    assert type(budget.tool_timeouts) is dict
    timeouts["s"] = 99.0
    assert budget.timeout_for("s") == 2.0
    assert budget.timeout_for("other") is None
    assert Budget(max_steps=1, max_tokens=1, tool_timeout_s=3).timeout_for("other") == 3
    assert Budget(max_steps=1, max_tokens=1, tool_timeout_s=3, tool_timeouts={"s": 1}).timeout_for("s") == 1


def test_budget_json() -> None:
    plain = Budget(max_steps=4, max_tokens=10, max_cost_usd=0.5,
                   tool_limits=ToolLimits(per_tool={"b": 2, "a": 1}, total=3))
    assert plain.to_json() == {
        "max_steps": 4, "max_tokens": 10, "max_cost_usd": 0.5,
        "tool_limits": {"per_tool": {"a": 1, "b": 2}, "default": 8, "side_effect_default": 1,
                        "total": 3}}
    assert list(plain.to_json()["tool_limits"]["per_tool"]) == ["a", "b"]
    timed = Budget(max_steps=1, max_tokens=1, max_seconds=9, tool_timeout_s=2,
                   tool_timeouts={"z": 1, "y": 3})
    out = timed.to_json()
    assert out["max_seconds"] == 9 and out["tool_timeout_s"] == 2
    assert out["tool_timeouts"] == {"y": 3, "z": 1} and list(out["tool_timeouts"]) == ["y", "z"]
    assert not plain.timed and timed.timed
    assert Budget(max_steps=1, max_tokens=1, tool_timeouts={"s": 1}).timed
    assert Budget(max_steps=1, max_tokens=1, tool_timeout_s=1).timed


def test_from_task_boundaries() -> None:
    one = Budget.from_task(expected_steps=1, tokens_per_step=10, margin=1)
    assert (one.max_steps, one.max_tokens) == (1, 10)
    assert one.tool_limits == ToolLimits()
    refused(lambda: Budget.from_task(expected_steps=0, tokens_per_step=1),
            "expected_steps must be >= 1 and margin >= 1")
    refused(lambda: Budget.from_task(expected_steps=2, tokens_per_step=1, margin=0.5),
            "expected_steps must be >= 1 and margin >= 1")
    limits = ToolLimits(default=2)
    assert Budget.from_task(expected_steps=2, cost_per_step_usd=0.1,
                            tool_limits=limits).tool_limits is limits


def test_from_task_refusals_name_its_own_parameters() -> None:
    refused(lambda: Budget.from_task(expected_steps=2),
            "Budget.from_task needs tokens_per_step or cost_per_step_usd (a ceiling on spend)")
    refused(lambda: Budget.from_task(expected_steps=2, tokens_per_step=0),
            "Budget.from_task: tokens_per_step must be >= 1")
    refused(lambda: Budget.from_task(expected_steps=2, cost_per_step_usd=0.0),
            "Budget.from_task: cost_per_step_usd must be > 0")
    least = Budget.from_task(expected_steps=1, tokens_per_step=1, cost_per_step_usd=1e-6, margin=1)
    assert (least.max_tokens, least.max_cost_usd) == (1, 1e-6)  # the smallest values allowed


def test_tool_limit_refusals_and_zero_limits() -> None:
    refused(lambda: ToolLimits(default=-1), "tool limit 'default' must be an integer >= 0")
    refused(lambda: ToolLimits(side_effect_default=-1),
            "tool limit 'side_effect_default' must be an integer >= 0")
    refused(lambda: ToolLimits(per_tool={"s": -1}), "tool limit 's' must be an integer >= 0")
    refused(lambda: ToolLimits(total=-1), "ToolLimits.total must be >= 0")
    zero = ToolLimits(per_tool={"s": 0}, default=0, side_effect_default=0, total=0)
    assert zero.limit_for("s") == 0 and zero.total == 0
    source = {"s": 1}
    limits = ToolLimits(per_tool=MappingProxyType(source))
    source["s"] = 9
    assert type(limits.per_tool) is dict and limits.limit_for("s") == 1


def test_default_limit_ignores_checkpoints_without_a_call() -> None:
    cond = _DefaultToolLimit(ToolLimits(default=0), frozenset())
    state = RunState("r", "t")
    assert cond.check(Checkpoint(Phase.ON_ACTION, state)) is None
    call = ToolCall("x")
    stop = cond.check(Checkpoint(Phase.ON_ACTION, state, call, call))
    assert stop is not None and stop.detail == "x: would exceed the limit of 0 successful calls of x"


def test_stopping_rule_refusals_and_bool_evaluators() -> None:
    refused(lambda: StoppingRule("r"), "StoppingRule needs exactly one of predicates= or evaluate=")
    refused(lambda: StoppingRule("r", {}), "StoppingRule needs at least one predicate")
    from runner.control import Predicate
    refused(lambda: StoppingRule("r", [Predicate("a", bool), Predicate("a", bool)]),
            "StoppingRule 'r': duplicate predicate names")
    state = RunState("r", "t")
    assert StoppingRule("ok", evaluate=lambda s: True).evaluate(state) == PredicateReport(  # type: ignore[arg-type,return-value]
        satisfied=("ok",))
    assert StoppingRule("no", evaluate=lambda s: False).evaluate(state) == PredicateReport(  # type: ignore[arg-type,return-value]
        missing=("no",))


# -- 2. the documented retry of a failed side-effect call ----------------------------------------
def test_failed_side_effect_call_can_be_retried_under_default_limits() -> None:
    attempts: list[int] = []

    def refund(call: ToolCall) -> ToolResult:
        attempts.append(1)
        if len(attempts) == 1:
            return ToolResult.failure("upstream 503")
        return ToolResult.success({"refunded": True})

    guard = Guard(allow={"refund"}, side_effects={"refund": SideEffectRule()})
    ctl = RunController(Budget(max_steps=6, max_tokens=1000), guard=guard,
                        validate=lambda s, o: s.data.get("refunded") is True, fold=merge)
    call = ToolCall("refund", {"amount": 5}, idempotency_key="r-1")
    result = ctl.run("refund", script(call, call, Finish("done")), tools({"refund": refund}))
    assert result.reason is StopReason.GOAL_MET, result.stop
    assert len(attempts) == 2


# -- 6. usage that is not reported does not pass silently ----------------------------------------
def test_token_ceiling_with_unmetered_actions_warns() -> None:
    ctl = RunController(Budget(max_steps=6, max_tokens=1), validate=lambda s, o: False)
    with pytest.warns(UnmeteredUsage, match="no token usage"):
        result = ctl.run("t", script(ToolCall("t", {"a": 1}), ToolCall("t", {"a": 2}),
                                     Finish("x")), tools({"t": ToolResult.success(1)}))
    assert result.unmetered_steps == result.steps > 0


def test_metered_turns_do_not_warn() -> None:
    ctl = RunController(Budget(max_steps=2, max_tokens=100), validate=ok)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctl.run("t", script(Turn(Finish("x"), tokens=3)), tools({}))


def test_per_tool_limit_allows_exactly_the_limit() -> None:  # M3
    ran: list[int] = []

    def execute(call: ToolCall) -> ToolResult:
        ran.append(call.args["i"])
        return ToolResult.success({"i": call.args["i"]})

    from runner.control import ToolLimits
    budget = Budget(max_steps=10, max_tokens=100, tool_limits=ToolLimits(per_tool={"s": 2}))
    result = RunController(budget, validate=ok).run(
        "t", lambda s: ToolCall("s", {"i": s.step}), execute)
    assert result.reason is StopReason.TOOL_LIMIT and ran == [0, 1] and result.steps == 3


def test_no_model_call_once_tokens_reach_the_limit() -> None:  # M6
    result = RunController(Budget(max_steps=10, max_tokens=100), validate=lambda s, o: False).run(
        "t", lambda s: Turn(ToolCall("s", {"i": s.step}), tokens=50),
        tools({"s": ToolResult.success({"v": 1})}))
    assert result.reason is StopReason.TOKEN_BUDGET and result.steps == 2 and result.tokens == 100


def test_budget_from_task_names_its_own_parameters() -> None:
    with pytest.raises(ValueError) as e:
        Budget.from_task(expected_steps=4)
    assert str(e.value) == ("Budget.from_task needs tokens_per_step or cost_per_step_usd "
                            "(a ceiling on spend)")
    with pytest.raises(ValueError, match="tokens_per_step must be >= 1"):
        Budget.from_task(expected_steps=4, tokens_per_step=0)


def test_the_unmetered_warning_points_at_the_callers_line() -> None:
    ctl = RunController(Budget(max_steps=2, max_tokens=100, max_seconds=30),
                        validate=lambda s, o: True)

    async def main() -> None:
        await ctl.arun("t", script(Finish(1)), tools({}))  # line A

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ctl.run("t", script(Finish(1)), tools({}))  # line R
        asyncio.run(main())
        anyio.run(ctl.arun, "t", script(Finish(1)), tools({}))  # line N
    source = Path(__file__).read_text("utf-8").splitlines()
    lines = [source[w.lineno - 1].split("#")[-1].strip() for w in seen
             if issubclass(w.category, UnmeteredUsage)]
    assert [w.filename for w in seen] == [__file__] * 3
    assert lines == ["line R", "line A", "line N"]
