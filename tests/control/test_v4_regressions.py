"""Regressions of stop controls v4 (issue 38): at most once for every result, every exit typed
whatever user code does, liveness of claims, and a deadline that frees the process. Each test
failed on the code before the fix; where the promise is about processes, the test runs them."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.control import (
    Budget,
    CostAlert,
    Finish,
    Guard,
    IdempotencyLedger,
    KillSwitch,
    LedgerError,
    RunController,
    RunState,
    SideEffectRule,
    StopReason,
    ToolCall,
    ToolLimits,
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


# -- 1. at most once for every result ----------------------------------------------------------
@pytest.mark.child_process
@pytest.mark.parametrize("mode", ["bigint", "datetime"])
def test_a_result_that_is_not_json_still_pays_once_across_processes(tmp_path: Path,
                                                                      mode: str) -> None:
    """Defect 1: the result's body was not recorded and the claim was deleted, so the same run
    repeated on the same ledger paid a second time."""
    ledger, paid = tmp_path / "keys.sqlite", tmp_path / "paid.txt"
    first = _pay_in_process(ledger, paid, mode)
    second = _pay_in_process(ledger, paid, mode)
    assert paid.read_text("utf-8").splitlines() == ["paid"]  # charged once
    assert first["reason"] == "goal_met" and first["trace"] == ["tool"]
    assert (second["reason"], second["kind"], second["trace"]) == (
        "needs_human", "ResultNotStored", [])  # the tool did not run again
    assert second["detail"].startswith(
        "pay with idempotency key 'order-5512' already happened, but its result could not be "
        "stored (dict: {")
    recorded = IdempotencyLedger(ledger).get(KEY)
    assert recorded is not None and recorded[1].ok
    assert set(recorded[1].data) == {"result_not_storable"}


@pytest.mark.child_process
def test_a_tool_that_raises_after_paying_leaves_its_key_unknown_across_processes(
        tmp_path: Path) -> None:
    """Defect 8c: a TimeoutError from the tool after the charge went through freed the key, so
    a retry paid again; the controller's own timeout already marked such a key unknown."""
    ledger, paid = tmp_path / "keys.sqlite", tmp_path / "paid.txt"
    first = _pay_in_process(ledger, paid, "raises")
    assert (first["reason"], first["detail"]) == (
        "tool_error", "pay failed fatally: TimeoutError: the provider's reply timed out")
    assert [c.unknown for c in IdempotencyLedger(ledger).claims()] == [True]
    second = _pay_in_process(ledger, paid, "bigint")
    assert (second["reason"], second["kind"]) == ("needs_human", "UnknownOutcome")
    assert paid.read_text("utf-8").splitlines() == ["paid"]


def test_a_tool_returning_a_failure_still_frees_its_key(tmp_path: Path) -> None:
    """The tool says it did not happen (a returned failure): the key is free for a retry."""
    ledger = IdempotencyLedger(tmp_path / "keys.sqlite")
    ctl = _pay_controller(ledger)
    failed = ctl.run("pay", _payer, lambda call: ToolResult.failure("declined", fatal=True))
    assert failed.reason is StopReason.TOOL_ERROR and ledger.claims() == []


# -- 2. every exit typed, whatever user code does ----------------------------------------------
def _day_switch(tmp_path: Path, **kw: Any) -> KillSwitch:
    return KillSwitch(ledger=tmp_path / "day.sqlite", max_spend_per_day_usd=10.0,
                      step_reserve_usd=1.0, **kw)


def test_a_raising_cost_alert_ends_the_run_typed_and_settled(tmp_path: Path) -> None:
    """Defect 2: on_cost_alert was called outside the typed-stop handling: its exception left
    run() with no stop reason and no handoff."""
    def pager(alert: CostAlert) -> None:
        raise RuntimeError("pager is down")

    ks = _day_switch(tmp_path, cost_alert_usd=0.15, on_cost_alert=pager)
    ctl = RunController(Budget(max_steps=5, max_cost_usd=5.0), validate=lambda s, o: True,
                        kill_switch=ks)
    res = ctl.run("t", lambda s: Turn(ToolCall("t", {"n": s.step}), cost_usd=0.10),
                  lambda call: ToolResult.success({"x": 1}))
    assert (res.reason, res.stop.kind, res.stop.detail) == (
        StopReason.INTERNAL_ERROR, "UserCodeError", "on_cost_alert raised RuntimeError: pager is down")
    assert res.handoff is not None and res.steps == 2
    assert ks.usage() == {"runs": 1, "spend_usd": 0.2, "reserved_usd": 0.0}


@pytest.mark.parametrize("where", ["after_tool", "charge"])
def test_a_raising_cost_alert_in_the_step_api_ends_the_run_typed(where: str) -> None:
    def pager(alert: CostAlert) -> None:
        raise RuntimeError("pager is down")

    ks = KillSwitch(cost_alert_usd=0.15, on_cost_alert=pager)
    ctl = RunController(Budget(max_steps=5, max_cost_usd=5.0), validate=lambda s, o: True,
                        kill_switch=ks)
    state = ctl.start("t")
    ctl.check_before_model(state)
    ctl.on_action(state, Turn(ToolCall("t"), cost_usd=0.10))
    if where == "after_tool":
        stop = ctl.on_tool_result(state, ToolCall("t"), ToolResult.success(1, cost_usd=0.10))
    else:
        stop = ctl.charge(state, cost_usd=0.10)
    assert stop is not None and stop.kind == "UserCodeError"
    assert stop.detail == "on_cost_alert raised RuntimeError: pager is down"


_BAD_TURNS = [
    ({"tokens": -5}, "decide returned Turn.tokens=-5: it must be a whole number >= 0"),
    ({"tokens": 2.5}, "decide returned Turn.tokens=2.5: it must be a whole number >= 0"),
    ({"tokens": "5"}, "decide returned Turn.tokens='5': it must be a whole number >= 0"),
    ({"cost_usd": math.nan}, "decide returned Turn.cost_usd=nan: it must be a finite number >= 0"),
    ({"cost_usd": math.inf}, "decide returned Turn.cost_usd=inf: it must be a finite number >= 0"),
    ({"cost_usd": -0.1}, "decide returned Turn.cost_usd=-0.1: it must be a finite number >= 0"),
    ({"cost_usd": "0.1"}, "decide returned Turn.cost_usd='0.1': it must be a finite number >= 0"),
]


@pytest.mark.parametrize("timed", [False, True])
@pytest.mark.parametrize(("bad", "detail"), _BAD_TURNS)
def test_an_invalid_usage_value_from_decide_ends_typed_naming_the_field(
        tmp_path: Path, bad: dict[str, Any], detail: str, timed: bool) -> None:
    """Defect 3: Turn(tokens=-5), cost_usd=NaN or inf escaped run() as ValueError or
    OverflowError; the value is refused (never counted) and the run ends internal_error."""
    ks = _day_switch(tmp_path)
    ctl = RunController(Budget(max_steps=5, max_cost_usd=5.0, max_seconds=60 if timed else None),
                        validate=lambda s, o: True, kill_switch=ks)
    usage = {"tokens": 10, "cost_usd": 0.25, **bad}
    res = ctl.run("t", lambda s: Turn(Finish(1), **usage) if s.step else  # type: ignore[arg-type]
                  Turn(ToolCall("t"), tokens=10, cost_usd=0.25),
                  lambda call: ToolResult.success({"x": 1}))
    assert (res.reason, res.stop.kind, res.stop.detail) == (
        StopReason.INTERNAL_ERROR, "ContractViolation", detail)
    assert res.stop.condition.name == "contract[decide]" and res.handoff is not None
    refused_cost = "cost_usd" in bad
    assert res.cost_usd == (0.25 if refused_cost else 0.5)  # the valid figure is counted
    assert res.tokens == (10 if "tokens" in bad else 20)
    assert ks.usage() == {"runs": 1, "spend_usd": res.cost_usd, "reserved_usd": 0.0}


@pytest.mark.parametrize("cost", [math.nan, math.inf, -0.1, "0.1"])
def test_an_invalid_tool_cost_ends_typed_and_is_never_credited(tmp_path: Path,
                                                               cost: Any) -> None:
    """Defects 3 and 4: a tool result with cost NaN raised out of run(); a negative tool cost
    bought budget back ($2.00 spent under a $0.30 ceiling, $0.00 recorded for the day)."""
    ks = _day_switch(tmp_path)
    ctl = RunController(Budget(max_steps=20, max_cost_usd=0.30,
                               tool_limits=ToolLimits(default=20)),
                        validate=lambda s, o: False, kill_switch=ks)
    res = ctl.run("t", lambda s: Turn(ToolCall("t", {"n": s.step}), cost_usd=0.10),
                  lambda call: ToolResult(True, {"x": 1}, cost_usd=cost))
    assert (res.reason, res.stop.kind, res.steps, res.cost_usd) == (
        StopReason.INTERNAL_ERROR, "ContractViolation", 1, 0.1)
    assert res.stop.detail == (f"execute returned ToolResult.cost_usd={cost!r}: it must be a "
                               "finite number >= 0")
    assert ks.usage() == {"runs": 1, "spend_usd": 0.1, "reserved_usd": 0.0}
    assert [r.kind for r in res.trace] == ["tool"]  # the call's outcome is still recorded


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_the_spend_ledger_refuses_a_negative_or_non_finite_settlement(tmp_path: Path,
                                                                      bad: float) -> None:
    ks = _day_switch(tmp_path)
    admission = ks.admit()
    ks.record_spend(admission, 0.5)
    with pytest.raises(ValueError, match="spend must be a finite number >= 0"):
        ks.record_spend(admission, bad)
    assert ks.usage()["spend_usd"] == 0.5


@pytest.mark.parametrize("bad", [{"tokens": 1.5}, {"cost_usd": math.nan}, {"cost_usd": math.inf}])
def test_the_step_apis_own_usage_arguments_must_be_finite_numbers(bad: dict[str, Any]) -> None:
    ctl = RunController(Budget(max_steps=5, max_cost_usd=5.0), validate=lambda s, o: True)
    state = ctl.start("t")
    with pytest.raises(ValueError, match="tokens must be a whole number and cost_usd a finite"):
        ctl.charge(state, **bad)
    with pytest.raises(ValueError, match="tokens must be a whole number and cost_usd a finite"):
        ctl.on_action(state, Finish(1), **bad)
    assert (state.step, state.tokens, state.cost_usd) == (0, 0, 0.0)


def test_a_misused_async_execute_frees_its_claim(tmp_path: Path) -> None:
    """Defect 5: run() with a plain execute returning a coroutine raised TypeError and left the
    claim in flight: a retry then waited until its deadline (or the claim's hour)."""
    ledger = IdempotencyLedger(tmp_path / "keys.sqlite")

    async def later() -> ToolResult:
        return ToolResult.success({"paid": True})

    with pytest.raises(TypeError, match="execute returned an awaitable"):
        _pay_controller(ledger).run("pay", _payer, lambda call: later())
    assert ledger.claims() == []
    paid: list[int] = []
    retry = _pay_controller(ledger, max_seconds=30).run(
        "retry", _payer, lambda call: paid.append(1) or ToolResult.success({"paid": True}))  # type: ignore[func-returns-value]
    assert retry.completed and paid == [1]


# -- 3. liveness of claims ---------------------------------------------------------------------
@pytest.mark.child_process
def test_a_killed_but_unreaped_owner_is_dead_across_processes(tmp_path: Path) -> None:
    """Defect 6: os.kill(pid, 0) succeeds on a zombie, so a retry waited for a dead owner."""
    ledger, paid = tmp_path / "keys.sqlite", tmp_path / "paid.txt"
    owner = _child(_PAYER, str(ledger), str(paid), "hangs")
    try:
        _until(paid.exists, "the owner's call")
        os.kill(owner.pid, signal.SIGKILL)  # killed, and not reaped: a zombie
        _until(lambda: Path(f"/proc/{owner.pid}/stat").read_text().rpartition(")")[2].split()[0]
               == "Z", "the owner to become a zombie")
        retry = _pay_controller(IdempotencyLedger(ledger), max_seconds=60).run(
            "retry", _payer, lambda call: ToolResult.success({"paid": True}))
    finally:
        owner.kill()
        owner.communicate(timeout=60)
    assert (retry.reason, retry.stop.kind) == (StopReason.NEEDS_HUMAN, "UnknownOutcome")
    assert f"process {owner.pid}" in retry.stop.detail


def test_a_reused_pid_is_not_mistaken_for_the_owner(tmp_path: Path) -> None:
    """The owner's start time is recorded with the claim: a live process with the same pid but
    another start time (the pid was reused) is not the owner."""
    path = tmp_path / "keys.sqlite"
    ledger = IdempotencyLedger(path)
    assert ledger.claim(KEY, b"call", "r-1", "a") == ("claimed", None)
    with sqlite3.connect(path) as con:
        (proc,) = con.execute("SELECT proc FROM claims").fetchone()
        assert proc.endswith(":" + Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        con.execute("UPDATE claims SET proc = ?", (proc + "0",))  # another process's start time
    assert ledger.claim(KEY, b"call", "r-2", "b")[0] == "unknown"


def test_a_ledger_of_the_second_format_gains_the_owner_identity(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("INSERT INTO meta VALUES ('format', 'ect.idempotency-ledger/2')")
        con.execute("CREATE TABLE keys (key TEXT PRIMARY KEY, call BLOB NOT NULL, result BLOB "
                    "NOT NULL, run_id TEXT NOT NULL, created REAL NOT NULL)")
        con.execute("CREATE TABLE claims (key TEXT PRIMARY KEY, call BLOB NOT NULL, owner TEXT "
                    "NOT NULL, run_id TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, "
                    "expires REAL NOT NULL, unknown INTEGER NOT NULL)")
        con.execute("INSERT INTO claims VALUES ('old', x'63', 'o', 'r-0', ?, ?, ?, 0)",
                    (__import__("socket").gethostname(), os.getpid(), time.time() + 3600))
    ledger = IdempotencyLedger(path)
    assert ledger.claim("old", b"c", "r-1", "b")[0] == "in_flight"  # no identity: pid alone
    assert ledger.claim("new", b"c", "r-1", "b") == ("claimed", None)
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (
            "ect.idempotency-ledger/3",)


@pytest.mark.child_process
def test_resolve_refuses_a_claim_in_flight_under_a_live_owner_across_processes(
        tmp_path: Path) -> None:
    """Defect 8b: resolve(key) freed a claim whose owner was still paying; the retry paid too."""
    ledger, paid = tmp_path / "keys.sqlite", tmp_path / "paid.txt"
    owner = _child(_PAYER, str(ledger), str(paid), "hangs")
    try:
        _until(paid.exists, "the owner's call")
        with pytest.raises(LedgerError, match="still in flight under a live owner"):
            IdempotencyLedger(ledger).resolve(KEY)
        assert [c.unknown for c in IdempotencyLedger(ledger).claims()] == [False]
        IdempotencyLedger(ledger).resolve(KEY, force=True)  # a person says it stopped
        assert IdempotencyLedger(ledger).claims() == []
    finally:
        owner.kill()
        owner.communicate(timeout=60)


@pytest.mark.child_process
def test_the_kill_switch_is_read_while_waiting_for_a_claim_across_processes(
        tmp_path: Path) -> None:
    """Defect 8a: a STOP file did not end a run waiting for another process's claim; it ran
    on until its deadline (time_budget)."""
    ledger, paid, stop_file = tmp_path / "keys.sqlite", tmp_path / "paid.txt", tmp_path / "STOP"
    owner = _child(_PAYER, str(ledger), str(paid), "hangs")
    waiting = threading.Event()

    class Watched(IdempotencyLedger):
        def claim(self, *args: Any) -> Any:
            out = super().claim(*args)
            if out[0] == "in_flight":
                waiting.set()
            return out

    try:
        _until(paid.exists, "the owner's call")
        ctl = RunController(Budget(max_steps=4, max_tokens=1000, max_seconds=30), guard=PAY,
                            fold=_fold, validate=lambda s, o: True,
                            kill_switch=KillSwitch(disable_file=stop_file),
                            idempotency=Watched(ledger))
        toucher = threading.Thread(target=lambda: (waiting.wait(60), stop_file.touch()))
        toucher.start()
        retry = ctl.run("retry", _payer, lambda call: ToolResult.success({"paid": True}))
        toucher.join(60)
    finally:
        owner.kill()
        owner.communicate(timeout=60)
    assert (retry.reason, retry.stop.kind) == (StopReason.POLICY_BLOCK, "KillSwitchStop")


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


@pytest.mark.child_process
@pytest.mark.parametrize(("how", "reason"), [("deadline", "time_budget"),
                                              ("sigterm", "internal_error"),
                                              ("sigint", "internal_error")])
def test_a_hung_sync_tool_does_not_keep_the_process_alive_after_the_run_ends(
        how: str, reason: str) -> None:
    """Defect 7: after a deadline (or SIGTERM / Ctrl-C under one) stopped the run, the process
    lived until the hung tool returned: anyio's worker thread is not a daemon. The tool sleeps
    120 s; the process must exit long before (the bound is generous; no timing is asserted
    beyond "before the tool would have returned")."""
    began = time.monotonic()
    proc = _child(_HUNG, how)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "in tool"
    if how != "deadline":
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the process outlived its run by more than 90 s") from None
    assert time.monotonic() - began < 110  # before the tool would have returned
    assert proc.returncode == 0, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1])["reason"] == reason


def test_a_sync_tool_under_a_deadline_runs_in_a_daemon_thread() -> None:
    seen: list[bool] = []

    def execute(call: ToolCall) -> ToolResult:
        seen.append(threading.current_thread().daemon)
        return ToolResult.success({"x": 1})

    ctl = RunController(Budget(max_steps=2, max_tokens=1000, max_seconds=60),
                        validate=lambda s, o: True)
    ctl.run("t", lambda s: Turn(ToolCall("t") if not s.step else Finish(1), tokens=1), execute)
    anyio.run(ctl.arun, "t", lambda s: Turn(ToolCall("t") if not s.step else Finish(1),
                                            tokens=1), execute)
    assert seen == [True, True]


def test_a_daemon_worker_passes_exceptions_and_context_back() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("caller")
    ctl = RunController(Budget(max_steps=3, max_tokens=1000, max_seconds=60),
                        validate=lambda s, o: var.get() == "caller")

    def execute(call: ToolCall) -> ToolResult:
        raise KeyError("boom")

    res = ctl.run("t", lambda s: Turn(ToolCall("t"), tokens=1), execute)
    assert (res.reason, res.stop.detail) == (StopReason.TOOL_ERROR,
                                             "t failed fatally: KeyError: 'boom'")
    ok = ctl.run("t", lambda s: Turn(Finish(1), tokens=1), execute)
    assert ok.completed  # validate ran in the worker with the caller's context


@pytest.mark.parametrize("at", ["before_model", "finish"])
def test_a_rule_evaluator_returning_a_wrong_type_ends_typed_naming_the_rule(at: str) -> None:
    """A rule's evaluate returning neither bool nor report raised TypeError out of run()."""
    from runner.control import StoppingRule

    rule = StoppingRule("grounded", evaluate=lambda s: 5 if (at == "before_model"
                                                             or s.proposal is not None) else True)
    ctl = RunController(Budget(max_steps=3, max_tokens=100), rules=[rule])
    res = ctl.run("t", lambda s: Turn(Finish(1), tokens=1), lambda call: None)
    assert (res.reason, res.stop.kind, res.stop.detail) == (
        StopReason.INTERNAL_ERROR, "UserCodeError",
        "grounded.evaluate raised TypeError: a check must return bool or PredicateReport, got int")
    assert res.handoff is not None


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


@pytest.mark.child_process
def test_a_stop_file_touched_by_another_process_ends_a_running_run(tmp_path: Path) -> None:
    stop_file, started = tmp_path / "STOP", tmp_path / "started"
    proc = _child(_STOPPABLE, str(stop_file), str(started))
    try:
        _until(started.exists, "the run's first tool call")
        stop_file.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1]) == {
        "reason": "policy_block", "kind": "KillSwitchStop", "handoff": True}
