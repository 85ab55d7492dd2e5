"""Budgets are set from the task and fail closed on nonsense."""

from __future__ import annotations

import pytest

from runner.control import Budget, MaxCost, MaxSteps, MaxTokens, ToolCallLimit, ToolLimits


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
