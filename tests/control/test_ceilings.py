"""The daily spend ceiling: runs, threads and processes sharing a day never spend more than it
allows; reservations and costs to the micro-dollar."""

from __future__ import annotations

import json
import math
import multiprocessing
import threading
from pathlib import Path

import pytest

from runner.control import (
    Budget,
    DailySpendCeiling,
    KillSwitch,
    RunController,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
    Turn,
)
from tests.control.conftest import tools
from tests.control.helpers_pay_processes import _SPENDER, _child, _day_switch
from tests.control.helpers_pay_retry import _day_run
from tests.control.helpers_runs import _check_the_day, _spend_run


def test_concurrent_threads_never_overshoot_the_daily_ceiling(tmp_path: Path) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    spent: list[tuple[int, float]] = []
    threads = [threading.Thread(target=lambda i=i: spent.append(_spend_run(ledger, i * 10)))
               for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(spent) == 5
    _check_the_day(ledger, spent)


def test_concurrent_processes_never_overshoot_the_daily_ceiling(tmp_path: Path) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        spent = pool.starmap(_spend_run, [(ledger, i * 10) for i in range(5)])
    _check_the_day(ledger, spent)


# -- 2. a daily ceiling is hard by default: every step reserves a positive bound --------------
def test_without_a_step_reserve_interleaved_runs_cannot_overshoot_the_ceiling(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "day.sqlite", max_spend_per_day_usd=1.0)
    ctl = RunController(Budget(max_steps=4, max_cost_usd=5.0), validate=lambda s, o: True,
                        kill_switch=ks)
    runs = [ctl.start("a")]
    assert ctl.check_before_model(runs[0]) is None  # a's first step holds its lease
    assert ks.usage()["reserved_usd"] == 1.0  # what is left of max_cost_usd, capped by the day
    try:
        runs.append(ctl.start("b"))
    except DailySpendCeiling:
        pass  # the day's money is reserved: b waits its turn
    else:
        assert ctl.check_before_model(runs[1]) is None
    for state in runs:
        ctl.on_action(state, Turn(ToolCall("t"), cost_usd=0.6))
        if state.stop is None:
            ctl.halt(state, "step_budget", "the test ends it")
        ctl.result(state)
    assert len(runs) == 1 and ks.usage()["spend_usd"] == 0.6


@pytest.mark.parametrize("reserve", [None, 0.3])
def test_concurrent_threads_spend_the_day_exactly_and_never_more(tmp_path: Path,
                                                                  reserve: float | None) -> None:
    ledger = str(tmp_path / "day.sqlite")
    out: list[tuple[int, float]] = []
    threads = [threading.Thread(target=lambda i=i: out.append(_day_run(ledger, i * 10, reserve)))
               for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    usage = KillSwitch(ledger=ledger, max_spend_per_day_usd=2.7).usage()
    assert usage["spend_usd"] <= 2.7 and usage["reserved_usd"] == 0.0
    assert round(sum(c for _, c in out), 6) == usage["spend_usd"]
    if reserve is not None:  # nine $0.30 leases fit the day: nine steps ran, whoever ran them
        assert sum(s for s, _ in out) == 9 and usage["spend_usd"] == 2.7


# -- 3. exact money: a step that spends exactly its reservation continues ----------------------
def test_a_step_that_spends_exactly_its_reservation_continues(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "day.sqlite", max_spend_per_day_usd=1.00,
                    step_reserve_usd=0.10)
    ctl = RunController(Budget(max_steps=20, max_tokens=10_000, tool_limits=ToolLimits(default=20)),
                        validate=lambda s, o: False, kill_switch=ks)
    res = ctl.run("t", lambda s: Turn(ToolCall("t", {"n": s.step}), cost_usd=0.10),
                  tools({"t": ToolResult.success({"x": 1})}))
    assert (res.steps, res.tool_calls, res.cost_usd) == (10, 10, 1.0)
    assert (res.reason, res.stop.kind, res.stop.detail) == (
        StopReason.TOKEN_BUDGET, "DailySpendCap",
        "today's spend ceiling leaves $0.0000; a step reserves $0.1000")
    assert ks.usage() == {"runs": 1, "spend_usd": 1.0, "reserved_usd": 0.0}


def test_costs_add_exactly_so_a_run_may_spend_its_whole_ceiling() -> None:
    ran: list[str] = []
    ctl = RunController(Budget(max_steps=5, max_cost_usd=0.30), validate=lambda s, o: True)
    res = ctl.run("t", lambda s: Turn(ToolCall("t", {"n": s.step}), cost_usd=(0.1, 0.2)[s.step]),
                  lambda call: ran.append(call.tool) or ToolResult.success({"x": 1}))  # type: ignore[func-returns-value]
    assert ran == ["t", "t"] and res.cost_usd == 0.3  # 0.1 + 0.2 is not over 0.30
    assert (res.reason, res.stop.detail, res.steps) == (
        StopReason.TOKEN_BUDGET, "spent $0.3000 of a $0.3000 cost ceiling", 2)


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_the_spend_ledger_refuses_a_negative_or_non_finite_settlement(tmp_path: Path,
                                                                      bad: float) -> None:
    ks = _day_switch(tmp_path)
    admission = ks.admit()
    ks.record_spend(admission, 0.5)
    with pytest.raises(ValueError, match="spend must be a finite number >= 0"):
        ks.record_spend(admission, bad)
    assert ks.usage()["spend_usd"] == 0.5


@pytest.mark.child_process
def test_four_processes_under_a_daily_ceiling_pay_exactly_what_it_allows(tmp_path: Path) -> None:
    """Four processes, $1.00 a day, $0.10 a step: ten steps are paid for, whoever ran them."""
    ledger = str(tmp_path / "day.sqlite")
    procs = [_child(_SPENDER, ledger) for _ in range(4)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(o["steps"] for o in outs) == 10 and round(sum(o["cost"] for o in outs), 6) == 1.0
    assert KillSwitch(ledger=ledger, max_spend_per_day_usd=1.0).usage() == {
        "runs": sum(o["admitted"] for o in outs), "spend_usd": 1.0, "reserved_usd": 0.0}
