"""Helpers shared by the control tests that pay, spend and stop from other processes: a payer
child, a daily-ceiling kill switch, hung and stoppable children, usage values decide may not
report."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.control import (
    Budget,
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
)

REPO = Path(__file__).resolve().parents[2]


KEY = "order-5512"


PAY = Guard(allow={"pay"}, side_effects={"pay": SideEffectRule()})


def _fold(state: RunState, call: ToolCall, result: ToolResult) -> None:
    if isinstance(result.data, dict):
        state.data.update(result.data)


def _payer(state: RunState) -> Turn:
    if not state.data.get("paid"):
        return Turn(ToolCall("pay", {"amount": 30}, idempotency_key=KEY), tokens=10)
    return Turn(Finish("paid"), tokens=10)


def _pay_controller(ledger: IdempotencyLedger, **budget: Any) -> RunController:
    return RunController(Budget(max_steps=4, max_tokens=1000, **budget), guard=PAY, fold=_fold,
                         validate=lambda state, out: bool(state.data.get("paid")),
                         idempotency=ledger)


def _until(cond: Callable[[], bool], what: str, limit_s: float = 60.0) -> None:
    """Wait for something another thread or process does (bounded; no timing is asserted)."""
    end = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def _child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


# A payer in its own process: it writes a line to the paid file before the tool returns (the
# side effect), then returns, raises, or hangs, as told.
_PAYER = """
import json, sys, time
from runner.control import (Budget, Finish, Guard, IdempotencyLedger, RunController,
                            SideEffectRule, ToolCall, ToolResult, Turn)
ledger, paid, mode = sys.argv[1], sys.argv[2], sys.argv[3]
def pay(call):
    with open(paid, "a", encoding="utf-8") as f:
        f.write("paid\\n")
    if mode == "raises":
        raise TimeoutError("the provider's reply timed out")
    if mode == "hangs":
        time.sleep(120)
    txn = 2**60 if mode == "bigint" else __import__("datetime").datetime(2026, 3, 14)
    return ToolResult.success({"paid": True, "txn": txn})
def payer(state):
    if not state.data.get("paid"):
        return Turn(ToolCall("pay", {"amount": 30}, idempotency_key="order-5512"), tokens=10)
    return Turn(Finish("paid"), tokens=10)
ctl = RunController(Budget(max_steps=4, max_tokens=1000, max_seconds=60),
                    guard=Guard(allow={"pay"}, side_effects={"pay": SideEffectRule()}),
                    fold=lambda s, c, r: s.data.update(r.data if isinstance(r.data, dict) else {}),
                    validate=lambda s, o: bool(s.data.get("paid")),
                    idempotency=IdempotencyLedger(ledger))
res = ctl.run("pay", payer, pay)
print(json.dumps({"reason": res.reason, "kind": res.stop.kind, "detail": res.stop.detail,
                  "trace": [r.kind for r in res.trace]}))
"""


def _pay_in_process(ledger: Path, paid: Path, mode: str) -> dict[str, Any]:
    proc = _child(_PAYER, str(ledger), str(paid), mode)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


# -- 2. every exit typed, whatever user code does ----------------------------------------------
def _day_switch(tmp_path: Path, **kw: Any) -> KillSwitch:
    return KillSwitch(ledger=tmp_path / "day.sqlite", max_spend_per_day_usd=10.0,
                      step_reserve_usd=1.0, **kw)


_BAD_TURNS = [
    ({"tokens": -5}, "decide returned Turn.tokens=-5: it must be a whole number >= 0"),
    ({"tokens": 2.5}, "decide returned Turn.tokens=2.5: it must be a whole number >= 0"),
    ({"tokens": "5"}, "decide returned Turn.tokens='5': it must be a whole number >= 0"),
    ({"cost_usd": math.nan}, "decide returned Turn.cost_usd=nan: it must be a finite number >= 0"),
    ({"cost_usd": math.inf}, "decide returned Turn.cost_usd=inf: it must be a finite number >= 0"),
    ({"cost_usd": -0.1}, "decide returned Turn.cost_usd=-0.1: it must be a finite number >= 0"),
    ({"cost_usd": "0.1"}, "decide returned Turn.cost_usd='0.1': it must be a finite number >= 0"),
]


# -- 4. a deadline frees the process -----------------------------------------------------------
_HUNG = """
import json, os, signal, sys, threading, time
from runner.control import Budget, RunController, ToolCall, ToolResult, Turn
how = sys.argv[1]
def execute(call):
    print("in tool", flush=True)
    time.sleep(120)
    return ToolResult.success({})
ctl = RunController(Budget(max_steps=5, max_tokens=1000, max_seconds=0.5 if how == "deadline" else 60),
                    validate=lambda s, o: True)
if how == "arun":
    import anyio
    res = anyio.run(ctl.arun, "t", lambda s: Turn(ToolCall("slow"), tokens=1), execute)
else:
    res = ctl.run("t", lambda s: Turn(ToolCall("slow"), tokens=1), execute)
print(json.dumps({"reason": res.reason, "detail": res.stop.detail}), flush=True)
"""


# -- promises about processes, run across processes --------------------------------------------
_SPENDER = """
import json, sys
from runner.control import Budget, DailySpendCeiling, KillSwitch, RunController, ToolCall, ToolLimits, ToolResult, Turn
ks = KillSwitch(ledger=sys.argv[1], max_spend_per_day_usd=1.0, step_reserve_usd=0.1)
ctl = RunController(Budget(max_steps=20, max_cost_usd=5.0, tool_limits=ToolLimits(default=20)),
                    validate=lambda s, o: False, kill_switch=ks)
try:
    res = ctl.run("t", lambda s: Turn(ToolCall("t", {"n": s.step}), cost_usd=0.1),
                  lambda call: ToolResult.success({"x": call.args["n"]}))
    print(json.dumps({"steps": res.steps, "cost": res.cost_usd, "admitted": True}))
except DailySpendCeiling:  # the day was spent before this process started
    print(json.dumps({"steps": 0, "cost": 0.0, "admitted": False}))
"""


_STOPPABLE = """
import json, os, sys, time
from runner.control import Budget, KillSwitch, RunController, ToolCall, ToolLimits, ToolResult, Turn
stop_file, started = sys.argv[1], sys.argv[2]
def execute(call):
    open(started, "w").close()
    time.sleep(0.05)
    return ToolResult.success({"n": call.args["n"]})
ctl = RunController(Budget(max_steps=10_000, max_tokens=10**9, tool_limits=ToolLimits(default=10_000)),
                    validate=lambda s, o: False, kill_switch=KillSwitch(disable_file=stop_file))
res = ctl.run("t", lambda s: Turn(ToolCall("t", {"n": s.step}), tokens=1), execute)
print(json.dumps({"reason": res.reason, "kind": res.stop.kind, "handoff": res.handoff is not None}))
"""
