"""Regressions for the defects measured against the v1 stop controls (issue 15, "Why").

Each test reproduces one measured defect with a few lines of Python, as a newcomer would; every
one of them failed on the v1 controller.
"""

from __future__ import annotations

import multiprocessing
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.control import (
    Budget,
    Calibration,
    DailySpendCeiling,
    Escalate,
    ExternalStop,
    Finish,
    Guard,
    IdempotencyLedger,
    KillSwitch,
    LabelledRun,
    MaxSteps,
    MaxTokens,
    RunController,
    RunCost,
    RunState,
    SideEffectRule,
    StopCondition,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolCallLimit,
    ToolResult,
    Turn,
    UnmeteredUsage,
)
from runner.control._types import Checkpoint, Stop
from tests.control.conftest import merge, script, tools


def ok(state: RunState, out: Any) -> bool:
    return True


# -- 1. the stopping rule is judged before the empty-result check ---------------------------------
def test_rule_that_holds_wins_over_empty_results() -> None:
    """Predicates all hold, yet the last three tools returned None / {}: the run is goal_met."""
    def fold(state: RunState, call: ToolCall, result: ToolResult) -> None:
        state.data["calls"] = state.data.get("calls", 0) + 1

    rule = StoppingRule("enough", {"three_calls": lambda s: s.data.get("calls", 0) >= 3},
                        output=lambda s: s.data["calls"])
    ctl = RunController(Budget(max_steps=10, max_tokens=1000), rules=[rule], fold=fold)
    calls = [ToolCall("a", {"i": 1}), ToolCall("b", {"i": 2}), ToolCall("c", {"i": 3})]
    result = ctl.run("t", script(*calls), tools({"a": ToolResult.success({}),
                                                 "b": ToolResult.success({}),
                                                 "c": ToolResult.success({})}))
    assert result.reason is StopReason.GOAL_MET
    assert result.output == 3


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


# -- 3. a time budget that cancels work in flight ---------------------------------------------------
@pytest.fixture
def release() -> Iterator[threading.Event]:
    ev = threading.Event()
    yield ev
    ev.set()  # let the abandoned worker thread finish


def test_hung_sync_tool_is_cancelled_by_the_run_deadline(release: threading.Event) -> None:
    def hang(call: ToolCall) -> ToolResult:
        release.wait()
        return ToolResult.success({"late": True})

    ctl = RunController(Budget(max_steps=5, max_tokens=1000, max_seconds=0.3), validate=ok)
    result = ctl.run("t", script(ToolCall("hang")), hang)
    assert result.reason is StopReason.TIME_BUDGET
    assert result.stop.kind == "MaxTime"
    assert result.handoff is not None and "time" in result.handoff.stop_detail
    assert result.handoff.question.startswith("The run ran out of time")


def test_hung_async_tool_is_cancelled_by_a_per_tool_timeout() -> None:
    async def execute(call: ToolCall) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    ctl = RunController(Budget(max_steps=5, max_tokens=1000, tool_timeout_s=0.2), validate=ok)

    async def main() -> Any:
        return await ctl.arun("t", script(ToolCall("slow", {"q": 1})), execute)

    result = anyio.run(main)
    assert result.reason is StopReason.TIME_BUDGET
    assert result.stop.kind == "ToolTimeout"
    assert result.handoff is not None


def test_remaining_budget_is_passed_to_decide() -> None:
    seen: list[Any] = []

    def decide(state: RunState) -> Turn:
        seen.append(state.remaining)
        return Turn(ToolCall("t", {"n": len(seen)}), tokens=10, cost_usd=0.01)

    ctl = RunController(Budget(max_steps=3, max_tokens=100, max_cost_usd=1.0, max_seconds=60),
                        validate=ok)
    ctl.run("t", decide, tools({"t": ToolResult.success({"x": 1})}))
    assert [r.steps for r in seen] == [3, 2, 1]
    assert [r.tokens for r in seen] == [100, 90, 80]
    assert seen[1].cost_usd == pytest.approx(0.99)
    assert all(r.seconds is not None and 0 < r.seconds <= 60 for r in seen)


# -- 4. the kill switch bites mid-run; concurrent runs cannot overshoot a daily ceiling ------------
def test_stop_flag_raised_mid_run_stops_it(tmp_path: Path) -> None:
    flag = tmp_path / "STOP"

    def decide(state: RunState) -> ToolCall:
        if state.step == 1:
            flag.touch()  # an operator raises the flag while the run is at step 2
        return ToolCall("t", {"n": state.step})

    ctl = RunController(Budget(max_steps=10, max_tokens=1000), validate=ok,
                        kill_switch=KillSwitch(disable_file=flag))
    result = ctl.run("t", decide, tools({"t": ToolResult.success({"x": 1})}))
    assert result.reason is StopReason.POLICY_BLOCK
    assert result.stop.kind == "KillSwitchStop"
    assert result.steps == 2
    assert result.handoff is not None


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


# -- 5. exactly one typed stop, even when user code fails ------------------------------------------
def test_exception_in_decide_is_a_typed_stop() -> None:
    def decide(state: RunState) -> ToolCall:
        raise KeyError("model client broke")

    result = RunController(Budget(max_steps=3, max_tokens=100), validate=ok).run(
        "t", decide, tools({}))
    assert result.reason is StopReason.INTERNAL_ERROR
    assert "decide raised KeyError" in result.stop.detail
    assert result.handoff is not None


def test_exception_in_a_guard_rule_is_a_typed_stop() -> None:
    def rule(call: ToolCall, state: RunState) -> None:
        raise RuntimeError("policy service down")

    guard = Guard(allow={"t"}, rules=(rule,))
    result = RunController(Budget(max_steps=3, max_tokens=100), guard=guard, validate=ok).run(
        "t", script(ToolCall("t")), tools({"t": ToolResult.success(1)}))
    assert result.reason is StopReason.INTERNAL_ERROR
    assert "RuntimeError" in result.stop.detail


def test_validate_returning_a_number_is_a_clear_contract_error() -> None:
    result = RunController(Budget(max_steps=3, max_tokens=100), validate=lambda s, o: 5).run(
        "t", script(Finish("x")), tools({}))  # type: ignore[arg-type,return-value]
    assert result.reason is StopReason.INTERNAL_ERROR
    assert result.stop.detail == "validate must return bool or PredicateReport, got int"


def test_validate_returning_none_is_called_once_with_a_clear_error() -> None:
    calls: list[int] = []

    def validate(state: RunState, out: Any) -> None:
        calls.append(1)

    result = RunController(Budget(max_steps=3, max_tokens=100), validate=validate).run(  # type: ignore[arg-type]
        "t", script(Finish("x")), tools({}))
    assert calls == [1]
    assert result.reason is StopReason.INTERNAL_ERROR
    assert result.stop.detail == "validate must return bool or PredicateReport, got NoneType"


def test_ctrl_c_is_a_typed_stop_with_a_handoff() -> None:
    def execute(call: ToolCall) -> ToolResult:
        raise KeyboardInterrupt

    result = RunController(Budget(max_steps=3, max_tokens=100), validate=ok).run(
        "t", script(ToolCall("t")), execute)
    assert result.reason is StopReason.INTERNAL_ERROR
    assert result.stop.kind == "Interrupted"
    assert result.handoff is not None


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


# -- 7. combinators: documented semantics, or refused at construction ------------------------------
def test_and_over_conditions_that_fire_at_different_points_is_refused() -> None:
    with pytest.raises(ValueError, match="never fire at the same checkpoint"):
        MaxSteps(2) & ToolCallLimit(1)


def test_and_over_conditions_of_the_same_point_fires() -> None:
    cond = MaxSteps(2) & MaxTokens(5)
    ctl = RunController(Budget(max_steps=10, max_tokens=1000), validate=lambda s, o: False,
                        stop_when=cond)
    result = ctl.run("t", script(Turn(ToolCall("t", {"a": 1}), tokens=3),
                                 Turn(ToolCall("t", {"a": 2}), tokens=3)),
                     tools({"t": ToolResult.success({"v": 1})}))
    assert result.reason is StopReason.STEP_BUDGET and len(result.stop.causes) == 2


def test_stop_when_returning_goal_met_is_a_typed_stop_not_a_crash() -> None:
    class Done(StopCondition):
        name = "done"

        def check(self, point: Checkpoint) -> Stop | None:
            return self._stop(StopReason.GOAL_MET, point, "claims done")

    result = RunController(Budget(max_steps=3, max_tokens=100), validate=ok,
                           stop_when=Done()).run("t", script(Finish("x")), tools({}))
    assert result.reason is StopReason.INTERNAL_ERROR
    assert "goal_met" in result.stop.detail


def test_external_stop_is_refused_as_stop_when() -> None:
    with pytest.raises(TypeError, match="stop_when must be a StopCondition"):
        RunController(Budget(max_steps=3, max_tokens=100), validate=ok,
                      stop_when=ExternalStop("x"))  # type: ignore[arg-type]


# -- 8. predicates, progress, idempotency across runs, calibration -------------------------------
def test_truthy_predicate_counts_as_satisfied() -> None:
    rule = StoppingRule("r", {"has_id": lambda s: s.data.get("shipment_id")},  # type: ignore[dict-item]
                        output=lambda s: s.data["shipment_id"])
    ctl = RunController(Budget(max_steps=5, max_tokens=100), rules=[rule], fold=merge)
    result = ctl.run("t", script(ToolCall("lookup")),
                     tools({"lookup": ToolResult.success({"shipment_id": "SH-1"})}))
    assert result.reason is StopReason.GOAL_MET and result.output == "SH-1"


def test_results_wrapper_with_nothing_in_it_is_no_progress() -> None:
    n = iter(range(100))
    ctl = RunController(Budget(max_steps=20, max_tokens=1000), validate=ok)
    result = ctl.run("t", lambda s: ToolCall("search", {"q": next(n)}),
                     tools({"search": ToolResult.success({"results": []})}))
    assert result.reason is StopReason.NO_PROGRESS
    assert result.steps < 20


def test_idempotency_keys_carry_across_runs(tmp_path: Path) -> None:
    charged: list[str] = []

    def pay(call: ToolCall) -> ToolResult:
        charged.append(str(call.idempotency_key))
        return ToolResult.success({"paid": True})

    ledger = IdempotencyLedger(tmp_path / "idem.sqlite")
    guard = Guard(allow={"pay"}, side_effects={"pay": SideEffectRule()})
    for _ in range(2):  # a retried run
        ctl = RunController(Budget(max_steps=4, max_tokens=100), guard=guard,
                            validate=lambda s, o: s.data.get("paid") is True, fold=merge,
                            idempotency=ledger)
        result = ctl.run("t", script(ToolCall("pay", {"amount": 3}, idempotency_key="k1"),
                                     Finish("ok")), tools({"pay": pay}))
        assert result.reason is StopReason.GOAL_MET
    assert charged == ["k1"]


def test_calibration_refuses_a_single_labelled_run() -> None:
    full, early = RunCost(7, 0.07, 14.0), RunCost(4, 0.04, 8.0)
    with pytest.raises(ValueError, match="at least 5 labelled runs"):
        Calibration.measure([LabelledRun("r0", 0.9, True, full, early)], model_version="m",
                            target_error_rate=0.2)


def test_escalate_still_needs_human() -> None:  # unchanged behaviour, guarded while refactoring
    result = RunController(Budget(max_steps=3, max_tokens=100), validate=ok).run(
        "t", script(Escalate("which?")), tools({}))
    assert result.reason is StopReason.NEEDS_HUMAN and result.handoff is not None


# -- targeted tests for the nine controller bugs of the issue (see tests/control/mutants) --------
def test_guard_refuses_before_the_tool_runs() -> None:  # M2
    ran: list[str] = []

    def execute(call: ToolCall) -> ToolResult:
        ran.append(call.tool)
        return ToolResult.success({"refunded": True})

    guard = Guard(allow={"refund"}, side_effects={"refund": SideEffectRule(
        amount_arg="amount", max_amount=100)})
    result = RunController(Budget(max_steps=3, max_tokens=100), guard=guard, validate=ok).run(
        "t", script(ToolCall("refund", {"amount": 500}, idempotency_key="k")), execute)
    assert result.reason is StopReason.POLICY_BLOCK and ran == []


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


def test_failure_streak_is_counted_per_tool() -> None:  # M8
    seen: dict[str, int] = {}

    def execute(call: ToolCall) -> ToolResult:
        seen[call.tool] = seen.get(call.tool, 0) + 1
        if seen[call.tool] == 1:
            return ToolResult.failure("503")
        return ToolResult.success({call.tool: 1})

    calls = [ToolCall("a"), ToolCall("b"), ToolCall("a", {"r": 1}), ToolCall("b", {"r": 1})]
    result = RunController(Budget(max_steps=9, max_tokens=100), fold=merge,
                           validate=lambda s, o: "a" in s.data and "b" in s.data).run(
        "t", script(*calls, Finish("done")), execute)
    assert result.reason is StopReason.GOAL_MET and result.steps == 5


def test_a_rule_still_missing_refuses_a_validated_finish() -> None:  # M9
    rule = StoppingRule("resolution", {"shipment": lambda s: "shipment_id" in s.data,
                                       "eligibility": lambda s: "eligible" in s.data})
    result = RunController(Budget(max_steps=4, max_tokens=100), rules=[rule], fold=merge,
                           validate=ok).run(
        "t", script(ToolCall("get"), Finish({"shipment_id": "SH-1"})),
        tools({"get": ToolResult.success({"shipment_id": "SH-1"})}))
    assert result.reason is not StopReason.GOAL_MET
    assert result.reports["resolution"].missing == ("eligibility",)
