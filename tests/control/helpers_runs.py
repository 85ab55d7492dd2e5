"""Helpers shared by the control tests: a successful tool result and the runs that spend
under a daily ceiling from threads and processes."""

from __future__ import annotations

from typing import Any

from runner.control import (
    Budget,
    DailySpendCeiling,
    Finish,
    KillSwitch,
    RunController,
    RunState,
    ToolCall,
    ToolResult,
    Turn,
)
from tests.control.conftest import script, tools


def ok(state: RunState, out: Any) -> bool:
    return True


def _spend_run(ledger: str, n: int) -> tuple[int, float]:
    """One run of up to three $0.30 steps under a $2.70/day ceiling: (steps taken, cost)."""
    ks = KillSwitch(ledger=ledger, max_spend_per_day_usd=2.7, step_reserve_usd=0.30)
    ctl = RunController(Budget(max_steps=4, max_cost_usd=5.0), validate=ok, kill_switch=ks)
    step = Turn(ToolCall("t", {"n": n}), cost_usd=0.30)
    decide = script(step, Turn(ToolCall("t", {"n": n + 1}), cost_usd=0.30),
                    Turn(Finish("done"), cost_usd=0.30))
    try:
        result = ctl.run("t", decide, tools({"t": ToolResult.success({"x": n})}))
    except DailySpendCeiling:  # the day's money is spent or reserved before this run starts
        return 0, 0.0
    return result.steps, result.cost_usd


def _check_the_day(ledger: str, runs: list[tuple[int, float]]) -> None:
    usage = KillSwitch(ledger=ledger, max_spend_per_day_usd=2.7, step_reserve_usd=0.3).usage()
    # five runs want fifteen steps; nine $0.30 leases fit the day, so exactly nine steps ran
    # (whichever runs took them) and spent the day to the cent, never more
    assert sum(steps for steps, _ in runs) == 9
    assert usage["spend_usd"] == 2.7 and round(sum(c for _, c in runs), 6) == 2.7
    assert usage["reserved_usd"] == 0
