"""Idempotency: a side-effect call runs at most once, across retries, controllers and processes
(the shared ledger's claims, unknown outcomes, results that are not JSON, dead owners)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.control import (
    Budget,
    Finish,
    Guard,
    IdempotencyLedger,
    RunController,
    SideEffectRule,
    StopReason,
    ToolCall,
    ToolResult,
)
from tests.control.conftest import merge, script, tools
from tests.control.helpers_pay_retry import (
    _B_PAID,
    KEY,
    PAY,
    _paid,
    _pay_controller,
    _pay_in_child,
    _payer,
    _record_b,
    _retry_while_in_flight,
    _until,
)
from tests.control.helpers_refunds import refund_controller


def test_a_retried_run_reuses_the_shared_ledger_across_controllers(tmp_path: Path) -> None:
    ledger = IdempotencyLedger(tmp_path / "idem.sqlite")
    paid: list[int] = []

    def execute(call: ToolCall) -> ToolResult:
        paid.append(1)
        return ToolResult.success({"refunded": True})

    decide = script(ToolCall("refund", {"amount": 50}, idempotency_key="r-9"), Finish("done"))
    assert refund_controller(ledger).run("t", decide, execute).completed
    again = refund_controller(ledger).run("t", decide, execute)
    assert again.completed and paid == [1]
    assert again.trace[0].kind == "deduplicated"
    # the same key with other arguments is refused, across runs too
    other = script(ToolCall("refund", {"amount": 60}, idempotency_key="r-9"))
    assert refund_controller(ledger).run("t", other, execute).reason is StopReason.POLICY_BLOCK


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
