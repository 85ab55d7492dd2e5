"""Helpers shared by the control tests of paying once across retries (threads and processes)
and of spending a day's ceiling exactly."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.control import (
    Budget,
    DailySpendCeiling,
    EvalCase,
    Finish,
    Guard,
    IdempotencyLedger,
    KillSwitch,
    RunController,
    RunState,
    SideEffectRule,
    ToolCall,
    ToolResult,
    Turn,
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


def _pay_in_child(ledger: str, paid: str, go: str) -> bool:
    def pay(call: ToolCall) -> ToolResult:
        with open(paid, "a", encoding="utf-8") as f:
            f.write("paid\n")
        end = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < end:
            time.sleep(0.01)
        return ToolResult.success({"paid": True})

    return _pay_controller(IdempotencyLedger(ledger)).run("pay", _payer, pay).completed


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


def _replayed(record: dict[str, Any]) -> Any:
    return run_case(EvalCase.from_json(capture_case(record)))
