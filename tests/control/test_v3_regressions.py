"""Regressions of stop controls v3 (issue 27): a side effect at most once across overlapping
retries, a daily ceiling hard by default, exact money boundaries, every exit typed, and the
loose ends. Each test failed on the code before the fix."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.control import (
    Budget,
    DailySpendCeiling,
    EvalCase,
    EvalCaseError,
    Finish,
    Guard,
    IdempotencyLedger,
    KillSwitch,
    RunController,
    RunState,
    SideEffectRule,
    Stop,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
    Turn,
    UnmeteredUsage,
    capture_case,
    run_case,
)
from tests.control.conftest import script, tools

REPO = Path(__file__).resolve().parents[2]
KEY = "order-5512"
PAY = Guard(allow={"pay"}, side_effects={"pay": SideEffectRule()})


def _paid(state: RunState, call: ToolCall, result: ToolResult) -> None:
    state.data.update(result.data or {})


def _payer(state: RunState) -> ToolCall | Finish:
    if not state.data.get("paid"):
        return ToolCall("pay", {"amount": 30}, idempotency_key=KEY)
    return Finish("paid")


def _pay_controller(ledger: IdempotencyLedger, **budget: Any) -> RunController:
    return RunController(Budget(max_steps=4, max_tokens=1000, **budget), guard=PAY, fold=_paid,
                         validate=lambda state, out: bool(state.data.get("paid")),
                         idempotency=ledger)


class _Watched(IdempotencyLedger):
    """The real ledger; it also tells the test when an attempt found the key in flight."""

    def __init__(self, path: Path, waiting: threading.Event) -> None:
        super().__init__(path)
        self.waiting = waiting

    def claim(self, key: str, call: bytes, run_id: str,
              owner: str) -> Any:
        outcome = super().claim(key, call, run_id, owner)
        if outcome[0] == "in_flight":
            self.waiting.set()
        return outcome


def _until(cond: Callable[[], bool], what: str, limit_s: float = 60.0) -> None:
    """Wait for something another thread or process does (bounded; no timing is asserted)."""
    end = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def _retry_while_in_flight(ledger_path: Path, first_done: Callable[[], bool],
                           release: Callable[[], None]) -> Any:
    """Run the retry (attempt B) in a thread; release the first attempt only once B has seen
    the key in flight, or B has already finished (as it did before the fix: it paid again)."""
    waiting = threading.Event()
    out: list[Any] = []
    retry = threading.Thread(target=lambda: out.append(
        _pay_controller(_Watched(ledger_path, waiting)).run("retry", _payer, _record_b)))
    retry.start()
    _until(lambda: waiting.is_set() or not retry.is_alive(), "the retry to wait or finish")
    release()
    retry.join(60)
    _until(first_done, "the first attempt to finish")
    return out[0]


_B_PAID: list[int] = []


def _record_b(call: ToolCall) -> ToolResult:
    _B_PAID.append(call.args["amount"])
    return ToolResult.success({"paid": True})


# -- 1. at most once: a key is claimed before the call runs ------------------------------------
def test_a_retry_while_the_first_attempt_is_in_flight_waits_and_pays_once(tmp_path: Path) -> None:
    ledger = tmp_path / "keys.sqlite"
    _B_PAID.clear()
    started, go = threading.Event(), threading.Event()
    paid_a: list[int] = []

    def slow_pay(call: ToolCall) -> ToolResult:
        paid_a.append(call.args["amount"])
        started.set()
        go.wait(60)  # a slow payment provider: still in flight when the retry comes
        return ToolResult.success({"paid": True})

    first: list[Any] = []
    a = threading.Thread(target=lambda: first.append(
        _pay_controller(IdempotencyLedger(ledger)).run("pay", _payer, slow_pay)))
    a.start()
    _until(started.is_set, "the first attempt's call")
    b = _retry_while_in_flight(ledger, lambda: not a.is_alive(), go.set)
    a.join(60)
    assert paid_a == [30] and _B_PAID == []  # charged once
    assert first[0].completed and b.completed
    assert [r.kind for r in b.trace] == ["deduplicated"]  # the retry got the first's result
    assert IdempotencyLedger(ledger).claims() == []  # nothing left in flight


def _pay_in_child(ledger: str, paid: str, go: str) -> bool:
    def pay(call: ToolCall) -> ToolResult:
        with open(paid, "a", encoding="utf-8") as f:
            f.write("paid\n")
        end = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < end:
            time.sleep(0.01)
        return ToolResult.success({"paid": True})

    return _pay_controller(IdempotencyLedger(ledger)).run("pay", _payer, pay).completed


def test_a_retry_from_another_process_waits_for_the_first_and_pays_once_processes(
        tmp_path: Path) -> None:
    ledger, paid, go = tmp_path / "keys.sqlite", tmp_path / "paid.txt", tmp_path / "go"
    _B_PAID.clear()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        first = pool.apply_async(_pay_in_child, (str(ledger), str(paid), str(go)))
        _until(paid.exists, "the first process's call")
        b = _retry_while_in_flight(ledger, first.ready, go.touch)
        assert first.get(60) is True
    assert paid.read_text("utf-8").splitlines() + [str(x) for x in _B_PAID] == ["paid"]
    assert b.completed and [r.kind for r in b.trace] == ["deduplicated"]


def test_a_retry_after_the_first_process_died_mid_call_needs_a_human_processes(
        tmp_path: Path) -> None:
    ledger, paid = tmp_path / "keys.sqlite", tmp_path / "paid.txt"
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=_pay_in_child, args=(str(ledger), str(paid), str(tmp_path / "never")))
    child.start()
    _until(paid.exists, "the first process's call")
    os.kill(child.pid or 0, signal.SIGKILL)  # the process dies mid-call: did it pay?
    child.join(60)
    _B_PAID.clear()
    b = _pay_controller(IdempotencyLedger(ledger)).run("retry", _payer, _record_b)
    assert b.reason is StopReason.NEEDS_HUMAN and b.stop.kind == "UnknownOutcome"
    assert _B_PAID == []  # not paid a second time
    assert "outcome is unknown" in b.stop.detail and f"process {child.pid}" in b.stop.detail
    assert b.handoff is not None and "take effect" in b.handoff.render()
    # a person checks with the payment provider: it did pay; the retry gets that result
    IdempotencyLedger(ledger).resolve(KEY, ToolResult.success({"paid": True}))
    done = b.resume(answer="it was paid")
    assert done.completed and _B_PAID == [] and done.trace[-1].kind == "deduplicated"


def test_a_call_cut_off_at_its_timeout_leaves_its_key_unknown(tmp_path: Path) -> None:
    ledger = IdempotencyLedger(tmp_path / "keys.sqlite")

    async def hangs(call: ToolCall) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError

    ctl = _pay_controller(ledger, tool_timeout_s=0.05)
    cut = anyio.run(ctl.arun, "pay", _payer, hangs)
    assert cut.reason is StopReason.TIME_BUDGET
    assert [c.unknown for c in ledger.claims()] == [True]
    _B_PAID.clear()
    retry = _pay_controller(ledger).run("retry", _payer, _record_b)
    assert retry.reason is StopReason.NEEDS_HUMAN and _B_PAID == []
    ledger.resolve(KEY)  # a person found it did not happen: the key is free again
    assert retry.resume().completed and _B_PAID == [30]
    with pytest.raises(Exception, match="no claim of 'order-5512' to resolve"):
        ledger.resolve(KEY)


def test_a_failed_attempt_frees_its_key_for_a_retry(tmp_path: Path) -> None:
    ledger = IdempotencyLedger(tmp_path / "keys.sqlite")
    ctl = RunController(Budget(max_steps=3, max_tokens=1000), guard=PAY, fold=_paid,
                        validate=lambda s, o: bool(s.data.get("paid")), idempotency=ledger)
    failed = ctl.run("pay", _payer, lambda call: ToolResult.failure("card declined", fatal=True))
    assert failed.reason is StopReason.TOOL_ERROR and ledger.claims() == []
    _B_PAID.clear()
    assert ctl.run("retry", _payer, _record_b).completed and _B_PAID == [30]


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


def _day_run(ledger: str, n: int, reserve: float | None) -> tuple[int, float]:
    ks = KillSwitch(ledger=ledger, max_spend_per_day_usd=2.7, step_reserve_usd=reserve)
    ctl = RunController(Budget(max_steps=4, max_cost_usd=0.9), validate=lambda s, o: True,
                        kill_switch=ks)
    decide = script(Turn(ToolCall("t", {"n": n}), cost_usd=0.3),
                    Turn(ToolCall("t", {"n": n + 1}), cost_usd=0.3), Turn(Finish("done"), cost_usd=0.3))
    try:
        result = ctl.run("t", decide, tools({"t": ToolResult.success({"x": n})}))
    except DailySpendCeiling:
        return 0, 0.0
    return result.steps, result.cost_usd


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


# -- 4. every exit typed -------------------------------------------------------------------------
_CHILD = """
import asyncio, json, os, signal, sys, threading
from runner.control import Budget, KillSwitch, RunController, ToolCall, ToolResult, Turn
ks = KillSwitch(ledger=sys.argv[1], max_spend_per_day_usd=5.0, step_reserve_usd=0.5)
ctl = RunController(Budget(max_steps=5, max_cost_usd=5.0, max_seconds=60),
                    validate=lambda s, o: True, kill_switch=ks)
release = threading.Event()
def execute(call):
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))
    release.wait(30)
    return ToolResult.success({})
decide = lambda s: Turn(ToolCall("slow"), cost_usd=0.25)
got = []
if sys.argv[3] == "run":
    res = ctl.run("t", decide, execute)
else:
    async def main():
        return await ctl.arun("t", decide, execute, on_stop=got.append)
    try:
        res = asyncio.run(main())
    except KeyboardInterrupt:
        res = got[0]
release.set()
print(json.dumps({"reason": res.reason, "kind": res.stop.kind, "detail": res.stop.detail,
                  "handoff": res.handoff is not None, "usage": ks.usage()}))
"""


@pytest.mark.child_process
@pytest.mark.parametrize("how", ["run", "arun"])
@pytest.mark.parametrize(("sig", "detail"), [("SIGINT", None), ("SIGTERM", "terminated by SIGTERM")])
def test_a_signal_under_a_deadline_ends_the_run_typed_and_settled(
        tmp_path: Path, how: str, sig: str, detail: str | None) -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "day.sqlite"), sig, how],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert (out["reason"], out["kind"], out["handoff"]) == ("internal_error", "Interrupted", True)
    if detail is not None:
        assert out["detail"] == detail
    elif how == "run":
        assert out["detail"] == "interrupted by Ctrl-C"
    # the lease is settled and the step's spend recorded
    assert out["usage"] == {"runs": 1, "spend_usd": 0.25, "reserved_usd": 0.0}


@pytest.mark.parametrize("timed", [False, True])
def test_a_crashing_validate_is_an_internal_error_naming_it(timed: bool) -> None:
    def validate(state: RunState, out: Any) -> bool:
        raise KeyError("revenue")

    ctl = RunController(Budget(max_steps=3, max_tokens=100, max_seconds=30 if timed else None),
                        validate=validate)
    res = ctl.run("t", script(Finish(1)), tools({}))
    assert (res.reason, res.stop.kind, res.stop.detail) == (
        StopReason.INTERNAL_ERROR, "UserCodeError", "validate raised KeyError: 'revenue'")


@pytest.mark.parametrize("timed", [False, True])
def test_run_refuses_every_async_callable_with_a_type_error(timed: bool) -> None:
    async def execute(call: ToolCall) -> ToolResult:
        return ToolResult.success({})

    async def validate(state: RunState, out: Any) -> bool:
        return True

    budget = Budget(max_steps=3, max_tokens=100, max_seconds=30 if timed else None)
    with pytest.raises(TypeError, match="execute is async"):
        RunController(budget, validate=lambda s, o: True).run("t", script(ToolCall("x")), execute)
    with pytest.raises(TypeError, match="validate is async"):
        RunController(budget, validate=validate).run("t", script(Finish(1)), tools({}))


# -- 5. papercuts and loose ends -----------------------------------------------------------------
def test_a_guard_rules_stop_is_limited_like_its_tuple() -> None:
    from runner.control import FinishGate

    claim = Guard(allow={"x"}, rules=(lambda c, s: Stop(StopReason.STEP_BUDGET, FinishGate(), "no"),))
    with pytest.raises(ValueError, match="policy_block or needs_human, not step_budget"):
        claim.judge(ToolCall("x"), RunState("r", "t"))


def test_budget_from_task_names_its_own_parameters() -> None:
    with pytest.raises(ValueError) as e:
        Budget.from_task(expected_steps=4)
    assert str(e.value) == ("Budget.from_task needs tokens_per_step or cost_per_step_usd "
                            "(a ceiling on spend)")
    with pytest.raises(ValueError, match="tokens_per_step must be >= 1"):
        Budget.from_task(expected_steps=4, tokens_per_step=0)


def test_run_with_a_deadline_inside_an_event_loop_says_to_use_arun() -> None:
    ctl = RunController(Budget(max_steps=3, max_tokens=100, max_seconds=5),
                        validate=lambda s, o: True)

    async def inside() -> None:
        ctl.run("t", script(Finish(1)), tools({}))

    with pytest.raises(RuntimeError) as e:
        asyncio.run(inside())
    assert str(e.value) == ("run() with a deadline cannot be called inside a running event "
                            "loop: use `await controller.arun(...)` there")


def test_the_case_reader_checks_the_types_of_amount_arg_and_idempotency_arg() -> None:
    for field, value in (("amount_arg", 5), ("idempotency_arg", ["k"])):
        case = {"format": "ect.stop-eval/1", "id": "c", "task": "t", "expect_stop": "goal_met",
                "guard": {"allow": ["pay"], "side_effects": {"pay": {field: value}}},
                "agent": {"turns": [{"finish": 1}]}, "finish_check": {"verdicts": [True]}}
        with pytest.raises(EvalCaseError) as e:
            EvalCase.from_json(case, "c.json")
        assert str(e.value) == f"c.json: $.guard.side_effects.pay.{field}: must be a string"


def _replayed(record: dict[str, Any]) -> Any:
    return run_case(EvalCase.from_json(capture_case(record)))


def test_capture_replays_a_tool_timeout() -> None:
    async def hangs(call: ToolCall) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError

    ctl = RunController(Budget(max_steps=4, max_tokens=100, tool_timeout_s=0.05),
                        validate=lambda s, o: True)
    res = anyio.run(ctl.arun, "t", script(ToolCall("fast"), ToolCall("slow")),
                    lambda call: hangs(call) if call.tool == "slow" else ToolResult.success({"v": 1}))
    assert res.stop.kind == "ToolTimeout"
    replay = _replayed(res.to_json())
    assert replay.passed and (replay.observed, replay.stop_kind) == ("time_budget", "ToolTimeout")


@pytest.mark.parametrize("slow", ["decide", "tool"])
def test_capture_replays_a_run_whose_time_budget_ran_out(slow: str) -> None:
    release = threading.Event()

    def decide(state: RunState) -> ToolCall:
        if slow == "decide" and state.step == 1:
            release.wait(20)  # the second model call never answers in time
        return ToolCall("t", {"n": state.step})

    def execute(call: ToolCall) -> ToolResult:
        if slow == "tool" and call.args["n"] == 1:
            release.wait(20)
        return ToolResult.success({"n": call.args["n"]})

    ctl = RunController(Budget(max_steps=4, max_tokens=100, max_seconds=0.3),
                        validate=lambda s, o: True)
    res = ctl.run("t", decide, execute)
    release.set()
    assert res.stop.kind == "MaxTime"
    replay = _replayed(res.to_json())
    assert replay.passed and (replay.observed, replay.stop_kind) == ("time_budget", "MaxTime")


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
