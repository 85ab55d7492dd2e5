"""RunController's drivers: the same run through every driver (``run``, ``arun``, each with and
without a deadline), the exact stop a person reads for each way a run can end, the step API's
verdicts, the kill switch and ledgers mid-run (first written for what mutation testing found
unpinned)."""

from __future__ import annotations

import inspect
import os
import threading
import warnings
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.control import (
    Budget,
    Checkpoint,
    DailySpendCeiling,
    Escalate,
    Finish,
    Guard,
    IdempotencyLedger,
    Invalid,
    KillSwitch,
    NoProgressDetector,
    PredicateReport,
    RunController,
    RunResult,
    RunState,
    SideEffectRule,
    Stop,
    StopCondition,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolFailure,
    ToolLimits,
    ToolResult,
    Turn,
    UnmeteredUsage,
    Verdict,
    VerdictKind,
)
from tests.control.conftest import merge, script, tools

R = StopReason
QUESTION = "User code failed or broke its contract: fix it, then retry the run?"
OK = ToolResult.success({})

# (driver, deadline): run() and arun(), each untimed and with a deadline that never passes (a
# timed run drives the loop in anyio with sync callables in a worker thread)
DRIVERS = [("run", False), ("run", True), ("arun", False), ("arun", True)]


def budget(timed: bool, **kw: Any) -> Budget:
    base: dict[str, Any] = {"max_steps": 5, "max_tokens": 1000}
    if timed:
        base["max_seconds"] = 60
    return Budget(**{**base, **kw})


def drive(how: str, c: RunController, decide: Any, execute: Any, **kw: Any) -> RunResult[Any]:
    if how == "run":
        return c.run("t", decide, execute, **kw)
    out: RunResult[Any] = anyio.run(partial(c.arun, "t", decide, execute, **kw))
    return out


# -- every driver: how user code failing or breaking its contract ends the run --------------------
@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_decide_returning_a_non_action_ends_with_a_typed_contract_stop(how: str, timed: bool) -> None:
    c = RunController(budget(timed), validate=lambda s, o: True)
    res = drive(how, c, script(ToolCall("get"), 5), tools({"get": OK}))  # type: ignore[arg-type]
    assert res.stop.to_json() == {
        "reason": "internal_error", "condition": {"type": "ContractViolation",
                                                  "name": "contract[decide]"},
        "detail": "decide must return an Action or Turn, got int", "step": 1, "question": QUESTION}
    assert res.tool_calls == 1 and res.handoff is not None


@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_validate_returning_none_ends_with_a_typed_contract_stop(how: str, timed: bool) -> None:
    c = RunController(budget(timed), validate=lambda s, o: None)  # type: ignore[arg-type,return-value]
    res = drive(how, c, script(ToolCall("get"), Finish(1)), tools({"get": OK}))
    assert res.stop.to_json() == {
        "reason": "internal_error", "condition": {"type": "ContractViolation",
                                                  "name": "contract[validate]"},
        "detail": "validate must return bool or PredicateReport, got NoneType", "step": 2,
        "question": QUESTION}


@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_a_crashing_tool_is_a_fatal_tool_error_named_by_its_first_line(how: str, timed: bool) -> None:
    def boom(call: ToolCall) -> ToolResult:
        raise OSError("disk gone\nmore")

    c = RunController(budget(timed), validate=lambda s, o: True)
    res = drive(how, c, script(ToolCall("x")), boom)
    assert (res.reason, res.stop.detail, res.tool_calls) == (R.TOOL_ERROR, "x failed fatally: OSError: disk gone", 1)


@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_a_raising_finish_check_ends_the_run_naming_it(how: str, timed: bool) -> None:
    def check(state: RunState, output: object) -> bool:
        if output == 1:
            raise ValueError("no\nmore")
        return True

    c = RunController(budget(timed), validate=check)
    res = drive(how, c, script(Finish(1), Finish(2)), tools({}))
    assert (res.reason, res.stop.kind, res.stop.detail, res.steps) == (
        R.INTERNAL_ERROR, "UserCodeError", "validate raised ValueError: no", 1)
    assert res.trace == () and res.handoff is not None


@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_a_run_checked_by_rules_alone_accepts_a_finish_the_rules_pass(how: str, timed: bool) -> None:
    rule = StoppingRule("r", {"found": lambda s: "v" in s.data})
    c = RunController(budget(timed), rules=[rule], fold=merge)
    res = drive(how, c, script(Finish(0), ToolCall("get"), Finish(1)), tools({"get": ToolResult.success({"v": 1})}))
    assert (res.reason, res.output, res.steps) == (R.GOAL_MET, 1, 3)
    assert res.stop.detail == "the finish passed every check"
    assert [r.note for r in res.trace if r.kind == "finish_rejected"] == ["missing found"]


@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_the_validator_sees_the_finish_it_checks_as_the_proposal(how: str, timed: bool) -> None:
    seen: list[object] = []

    def check(state: RunState, output: object) -> bool:
        seen.append(state.proposal)
        return output == {"v": 1}

    c = RunController(budget(timed), validate=check)
    res = drive(how, c, script(Finish({"v": 0}), Finish({"v": 1})), tools({}))
    assert res.completed and seen == [{"v": 0}, {"v": 1}]


@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_ctrl_c_in_decide_or_a_tool_ends_the_run_interrupted(how: str, timed: bool) -> None:
    def ctrl_c(*args: object) -> Any:
        raise KeyboardInterrupt

    c = RunController(budget(timed), validate=lambda s, o: True)
    for decide, execute, steps in ((ctrl_c, tools({}), 0), (script(ToolCall("x")), ctrl_c, 1)):
        res = drive(how, c, decide, execute)
        assert res.stop.to_json() == {
            "reason": "internal_error", "condition": {"type": "Interrupted", "name": "interrupted[ctrl-c]"},
            "detail": "interrupted by Ctrl-C", "step": steps,
            "question": "The run was interrupted: resume it from the handoff, or close it?"}


async def _arun_here(c: RunController) -> RunResult[Any]:
    return await c.arun("t", lambda s: Finish(s.step), tools({}), run_id="r-1")


@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_plain_actions_under_a_ceiling_are_counted_unmetered_and_warned_once_at_the_caller(
        how: str, timed: bool) -> None:
    for limits in ({"max_tokens": 1000}, {"max_tokens": None, "max_cost_usd": 1.0}):
        c = RunController(budget(timed, **limits), validate=lambda s, o: s.step >= 3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if how == "run":
                res = c.run("t", lambda s: Finish(s.step), tools({}), run_id="r-1")
            else:
                res = anyio.run(_arun_here, c)
        assert res.completed and res.unmetered_steps == 3
        assert [(w.category, str(w.message)) for w in caught] == [(UnmeteredUsage, (
            "run r-1: decide returned a plain action, so no token usage or cost was counted "
            "against the budget; return Turn(action, tokens=..., cost_usd=...) to meter it"))]
        # where it points: a timed run() calls decide from anyio's own frames, and under mutmut
        # its trampolines add frames of their own
        if not (how == "run" and timed) and "MUTANT_UNDER_TEST" not in os.environ:
            assert caught[0].filename == __file__


@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_metered_turns_are_not_counted_unmetered(how: str, timed: bool) -> None:
    c = RunController(budget(timed), validate=lambda s, o: s.step >= 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = drive(how, c, script(Turn(Finish(1), tokens=5)), tools({}))
    assert res.completed and res.unmetered_steps == 0 and res.tokens == 10


@pytest.mark.parametrize(("how", "timed"), DRIVERS)
def test_run_data_seeds_the_state_decide_reads(how: str, timed: bool) -> None:
    c = RunController(budget(timed), validate=lambda s, o: o == 7)
    res = drive(how, c, lambda s: Finish(s.data["v"]), tools({}), data={"v": 7})
    assert res.completed and res.output == 7 and res.data == {"v": 7}


# -- deadlines: what was under way when the time ran out -------------------------------------------
async def _forever(*args: object) -> Any:
    await anyio.sleep(30)


def _timed(**kw: Any) -> RunController:
    return RunController(Budget(max_steps=5, max_tokens=1000, max_seconds=0.2), **kw)


def _now(action: Any) -> Callable[[RunState], Awaitable[Any]]:
    """An async decide returning ``action`` at once (no worker thread to wait for)."""
    async def decide(state: RunState) -> Any:
        return action

    return decide


def _hangs(*args: Any) -> Any:
    """A synchronous callable that never answers within the test (it is abandoned)."""
    threading.Event().wait(20)


@pytest.mark.parametrize(("decide", "execute", "validate", "doing"), [
    (_forever, tools({}), lambda s, o: True, "waiting for decide"),
    (_now(ToolCall("search")), _forever, lambda s, o: True, "in search"),
    (_now(Finish(1)), tools({}), _forever, "in validate"),
    (_hangs, tools({}), lambda s, o: True, "waiting for decide"),
    (script(ToolCall("search")), _hangs, lambda s, o: True, "in search"),
    (script(Finish(1)), tools({}), _hangs, "in validate"),
])
def test_the_time_budget_names_what_it_cancelled(decide: Any, execute: Any, validate: Any,
                                                 doing: str) -> None:
    sync = not any(inspect.iscoroutinefunction(f) for f in (decide, execute, validate))
    for how in ("run", "arun") if sync else ("arun",):  # run() refuses async callables
        res = drive(how, _timed(validate=validate), decide, execute)
        assert res.stop.to_json() == {
            "reason": "time_budget", "condition": {"type": "MaxTime", "name": "max_seconds=0.2"},
            "detail": f"the 0.2-second time budget ran out {doing}", "step": res.steps}


def test_a_tool_past_its_own_timeout_is_cancelled_and_named() -> None:
    c = RunController(Budget(max_steps=5, max_tokens=1000, tool_timeouts={"slow": 0.05}),
                      validate=lambda s, o: True)
    fast_calls: list[str] = []

    async def execute(call: ToolCall) -> ToolResult:
        fast_calls.append(call.tool)
        if call.tool == "slow":
            await anyio.sleep(2)
        return OK

    res = anyio.run(partial(c.arun, "t", script(ToolCall("fast"), ToolCall("slow")), execute))
    assert res.stop.to_json() == {
        "reason": "time_budget", "condition": {"type": "ToolTimeout", "name": "tool_timeout[slow]=0.05"},
        "detail": "slow ran past its 0.05-second timeout and was cancelled", "step": 2}
    assert fast_calls == ["fast", "slow"] and res.tool_calls == 1


# -- resuming: an arun result resumes asynchronously, with or without a deadline -------------------
@pytest.mark.parametrize("timed", [False, True])
def test_an_arun_result_resumes_asynchronously_and_keeps_its_deadline(timed: bool) -> None:
    threads: list[bool] = []

    def decide(state: RunState) -> Escalate | Finish:
        threads.append(threading.current_thread() is threading.main_thread())
        return Escalate("go on?") if state.step == 0 else Finish(state.step)

    async def main() -> tuple[RunResult[Any], RunResult[Any]]:
        c = RunController(budget(timed), validate=lambda s, o: True)
        first = await c.arun("t", decide, tools({}))
        again = first.resume(answer="yes")
        assert isinstance(again, Awaitable)
        return first, await again

    first, second = anyio.run(main)
    assert (first.reason, second.reason, second.output) == (R.NEEDS_HUMAN, R.GOAL_MET, 1)
    assert threads == [not timed, not timed]  # a deadline runs sync code in a worker thread



# -- the constructor and run(): misuse is refused with a message that says what to do ------------
def test_the_constructor_refuses_what_cannot_work_and_says_why() -> None:
    from runner.control import ExternalStop

    b = Budget(max_steps=3, max_tokens=10)
    cases: list[tuple[Callable[[], object], type[Exception], str]] = [
        (lambda: RunController(object()), TypeError, "RunController needs a Budget"),  # type: ignore[arg-type]
        (lambda: RunController(b, stop_when=ExternalStop("x")), TypeError,  # type: ignore[arg-type]
         "stop_when must be a StopCondition, got ExternalStop "
         "(use controller.halt() for a stop you decide yourself)"),
        (lambda: RunController(b, rules=[object()]), TypeError,  # type: ignore[list-item]
         "rules must be StoppingRule instances"),
        (lambda: RunController(b, rules=[StoppingRule("r", {"a": bool}), StoppingRule("r", {"b": bool})]),
         ValueError, "stopping rule names must be unique"),
        (lambda: RunController(b).run("t", script(Finish(1)), tools({})), ValueError,
         "a run needs a finish check: pass validate= or rules="),
    ]
    for make, kind, message in cases:
        with pytest.raises(kind) as e:
            make()
        assert str(e.value) == message


def test_the_tool_failure_setting_decides_when_failures_end_the_run() -> None:
    down = tools({"x": ToolResult.failure("down")})
    strict = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: True,
                           tool_failure=ToolFailure(consecutive=1))
    res = strict.run("t", script(ToolCall("x")), down)
    assert (res.reason, res.stop.detail, res.tool_calls) == (R.TOOL_ERROR, "x failed 1 times in a row: down", 1)
    lenient = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: True)
    assert lenient.run("t", script(ToolCall("x")), down).tool_calls == 2  # the default: 2 in a row


def test_failed_calls_do_not_use_up_a_tools_call_limit() -> None:
    outcomes = iter([ToolResult.failure("busy"), ToolResult.failure("busy"), OK, OK])
    c = RunController(Budget(max_steps=9, max_tokens=100, tool_limits=ToolLimits(per_tool={"t": 1})),
                      validate=lambda s, o: False, tool_failure=ToolFailure(consecutive=5))
    res = c.run("t", lambda s: ToolCall("t", {"n": s.step}), lambda call: next(outcomes))
    assert (res.reason, res.steps, res.tool_calls) == (R.TOOL_LIMIT, 4, 3)  # two retries, one success
    assert res.stop.detail == "t: would exceed the limit of 1 successful calls of t"


# -- the kill switch and the daily ceiling, mid-run ------------------------------------------------
KS_QUESTION = "The kill switch is engaged: release it and resume, or close the run?"


def test_the_kill_switch_flag_stops_the_run_before_the_next_model_call(tmp_path: Path) -> None:
    flag = tmp_path / "STOP"
    c = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: True,
                      kill_switch=KillSwitch(disable_file=flag))

    def execute(call: ToolCall) -> ToolResult:
        flag.touch()
        return OK

    res = c.run("t", script(ToolCall("x"), Finish(1)), execute)
    assert res.stop.to_json() == {
        "reason": "policy_block", "condition": {"type": "KillSwitchStop", "name": "kill_switch"},
        "detail": f"kill switch engaged: {flag} exists", "step": 1, "question": KS_QUESTION}


def test_the_kill_switch_flag_raised_during_a_model_call_stops_its_action(tmp_path: Path) -> None:
    flag = tmp_path / "STOP"
    ran: list[str] = []
    c = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: True,
                      kill_switch=KillSwitch(disable_file=flag))

    def decide(state: RunState) -> ToolCall:
        if state.step == 1:
            flag.touch()
        return ToolCall("x", {"n": state.step})

    res = c.run("t", decide, lambda call: ran.append(call.tool) or OK)  # type: ignore[func-returns-value]
    assert ran == ["x"] and res.tool_calls == 1
    assert res.stop.to_json() == {
        "reason": "policy_block", "condition": {"type": "KillSwitchStop", "name": "kill_switch"},
        "detail": f"kill switch engaged: {flag} exists", "step": 2, "question": KS_QUESTION}


def test_a_turn_that_overruns_the_days_ceiling_ends_the_run_before_its_action(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "spend.db", max_spend_per_day_usd=1.0)
    ran: list[str] = []
    c = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: True, kill_switch=ks)
    res = c.run("t", script(Turn(ToolCall("x"), cost_usd=1.5)),
                lambda call: ran.append(call.tool) or OK)  # type: ignore[func-returns-value]
    assert ran == [] and res.stop.to_json() == {
        "reason": "token_budget", "condition": {"type": "DailySpendCap", "name": "daily_spend_remaining"},
        "detail": "spent $1.5000 of a $1.0000 share of today's spend ceiling", "step": 1}
    assert ks.usage()["spend_usd"] == 1.5


def test_each_step_reserves_its_spend_and_is_refused_when_the_day_cannot_cover_it(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "spend.db", max_spend_per_day_usd=1.0, step_reserve_usd=0.4)
    seen: list[float | None] = []
    c = RunController(Budget(max_steps=9, max_tokens=100), validate=lambda s, o: False, kill_switch=ks)

    def decide(state: RunState) -> Turn:
        seen.append(state.daily_remaining_usd)
        return Turn(ToolCall("x", {"n": state.step}), cost_usd=0.3)

    res = c.run("t", decide, lambda call: ToolResult.success(dict(call.args)))
    assert seen == [0.4, 0.7, 1.0]  # spent so far plus this step's lease
    assert (res.reason, res.stop.detail, res.stop.step) == (
        R.TOKEN_BUDGET, "today's spend ceiling leaves $0.1000; a step reserves $0.4000", 3)
    assert res.stop.condition.name == "daily_spend_remaining"
    assert ks.usage() == {"runs": 1, "spend_usd": 0.9, "reserved_usd": 0.0}  # every lease released


def test_without_a_step_reserve_a_step_reserves_all_the_day_leaves(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "spend.db", max_spend_per_day_usd=1.0)
    c = RunController(Budget(max_steps=9, max_tokens=100), validate=lambda s, o: False, kill_switch=ks)
    reserved: list[float] = []

    def decide(state: RunState) -> Turn:
        reserved.append(ks.usage()["reserved_usd"])
        with pytest.raises(DailySpendCeiling):  # nothing is left for another run meanwhile
            ks.admit()
        return Turn(ToolCall("x", {"n": state.step}), cost_usd=0.5)

    res = c.run("t", decide, tools({"x": OK}))
    assert reserved == [1.0, 0.5]  # never zero: what the day leaves (a token budget bounds no cost)
    assert (res.reason, res.stop.detail, res.stop.step) == (
        R.TOKEN_BUDGET, "today's spend ceiling leaves $0.0000; a step needs some", 2)
    assert ks.usage() == {"runs": 1, "spend_usd": 1.0, "reserved_usd": 0.0}


def test_a_fresh_run_sees_what_the_day_leaves_it(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "spend.db", max_spend_per_day_usd=1.0)
    ks.record_spend(ks.admit(), 0.25)
    c = RunController(Budget(max_steps=3, max_tokens=100), validate=lambda s, o: True, kill_switch=ks)
    state = c.start("t")
    assert state.daily_remaining_usd == 0.75
    assert state.remaining is not None and state.remaining.cost_usd == 0.75


def test_a_free_run_releases_its_step_leases(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "spend.db", max_spend_per_day_usd=1.0, step_reserve_usd=0.4)
    c = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: s.step >= 2, kill_switch=ks)
    res = c.run("t", lambda s: Finish(s.step), tools({}))
    assert res.completed and ks.usage() == {"runs": 1, "spend_usd": 0.0, "reserved_usd": 0.0}


def _break(path: Path) -> None:
    """Overwrite a ledger file with junk."""
    path.write_bytes(b"this is not a database" * 64)


def test_a_spend_ledger_that_breaks_mid_run_fails_closed(tmp_path: Path) -> None:
    path = tmp_path / "spend.db"
    ks = KillSwitch(ledger=path, max_spend_per_day_usd=1.0)
    c = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: True, kill_switch=ks)
    def execute(call: ToolCall) -> ToolResult:
        _break(path)
        return OK

    res = c.run("t", script(ToolCall("x"), Finish(1)), execute)
    assert res.stop.to_json()["condition"] == {"type": "UserCodeError", "name": "user_code[kill_switch.ledger]"}
    assert res.reason is R.INTERNAL_ERROR and res.stop.step == 1
    assert res.stop.detail.startswith(f"ledger {path} is not a usable SQLite ")
    assert res.stop.detail.endswith(": file is not a database")


SIDE = Guard(allow={"pay"}, side_effects={"pay": SideEffectRule()})


def test_an_idempotency_ledger_that_cannot_be_read_or_written_fails_closed(tmp_path: Path) -> None:
    unreadable = tmp_path / "before.db"
    _break(unreadable)
    c = RunController(Budget(max_steps=5, max_tokens=100), guard=SIDE, validate=lambda s, o: True,
                      idempotency=IdempotencyLedger(unreadable))
    paid: list[str] = []
    res = c.run("t", script(ToolCall("pay", idempotency_key="k")),
                lambda call: paid.append(call.tool) or OK)  # type: ignore[func-returns-value]
    assert paid == [] and res.stop.condition.name == "user_code[idempotency.ledger]"
    assert res.stop.detail.startswith(f"ledger {unreadable} is not a usable SQLite ")

    later = tmp_path / "after.db"

    def pay(call: ToolCall) -> ToolResult:
        paid.append(call.tool)
        _break(later)  # the ledger breaks while the side effect runs
        return OK

    c2 = RunController(Budget(max_steps=5, max_tokens=100), guard=SIDE, validate=lambda s, o: True,
                       idempotency=IdempotencyLedger(later))
    res2 = c2.run("t", script(ToolCall("pay", idempotency_key="k")), pay)
    assert paid == ["pay"] and res2.tool_calls == 1
    assert res2.stop.to_json()["condition"] == {"type": "UserCodeError", "name": "user_code[idempotency.ledger]"}
    assert res2.stop.detail.startswith(f"ledger {later} is not a usable SQLite ")
    assert res2.stop.detail.endswith(": file is not a database")


# -- the step API: what each verdict carries ----------------------------------------------------
def started(c: RunController) -> RunState:
    state = c.start("t")
    assert c.check_before_model(state) is None
    return state


def test_step_api_verdicts_carry_the_call_they_judged() -> None:
    guard = Guard(allow={"get", "pay"}, side_effects={"pay": SideEffectRule()})
    c = RunController(Budget(max_steps=9, max_tokens=100, tool_limits=ToolLimits(per_tool={"get": 1})),
                      guard=guard, validate=lambda s, o: True)
    blocked = ToolCall("rm")
    state = started(c)
    v = c.on_action(state, blocked)
    assert v == Verdict(VerdictKind.STOP, call=blocked, stop=state.stop)
    assert state.stop is not None and state.stop.detail == "rm is not on the allow-list"

    state = started(c)
    get = ToolCall("get")
    assert c.on_action(state, get) == Verdict(VerdictKind.EXECUTE, call=get)
    c.on_tool_result(state, get, OK)
    c.check_before_model(state)
    again = ToolCall("get", {"page": 2})
    v = c.on_action(state, again)
    assert v == Verdict(VerdictKind.STOP, call=again, stop=state.stop) and v.stop is not None
    assert v.stop.reason is R.TOOL_LIMIT

    state = started(c)
    pay = ToolCall("pay", {"amount": 5}, idempotency_key="k-1")
    assert c.on_action(state, pay).kind is VerdictKind.EXECUTE
    c.on_tool_result(state, pay, ToolResult.success({"paid": 5}))
    c.check_before_model(state)
    assert c.on_action(state, pay) == Verdict(VerdictKind.DEDUPLICATED, call=pay,
                                              result=ToolResult.success({"paid": 5}))
    assert state.trace[-1].kind == "deduplicated"
    assert state.trace[-1].note == "idempotency key 'k-1' already executed"


def test_step_api_a_finish_is_handed_back_for_checking_as_the_proposal() -> None:
    c = RunController(Budget(max_steps=9, max_tokens=100), validate=lambda s, o: True)
    state = started(c)
    finish = Finish({"v": 1})
    assert c.on_action(state, finish) == Verdict(VerdictKind.CHECK_FINISH, finish=finish)
    assert state.proposal == {"v": 1}  # a caller's own (async) check reads it


def test_step_api_an_invalid_reply_continues_and_is_fed_back() -> None:
    c = RunController(Budget(max_steps=9, max_tokens=100), validate=lambda s, o: True)
    state = started(c)
    assert c.on_action(state, Invalid("no JSON")) == Verdict(VerdictKind.CONTINUE)
    assert state.stop is None and state.trace[-1].note == "no JSON"
    c.check_before_model(state)
    assert state.directive is not None
    assert state.directive.notes == ("Your last reply was not a valid action: no JSON.",)


def test_step_api_user_code_failing_on_an_action_is_a_stop_verdict() -> None:
    def rule(call: ToolCall, state: RunState) -> None:
        raise ValueError("nope\nmore")

    c = RunController(Budget(max_steps=9, max_tokens=100), guard=Guard(allow={"x"}, rules=(rule,)),
                      validate=lambda s, o: True)
    state = started(c)
    v = c.on_action(state, ToolCall("x"))
    assert v.kind is VerdictKind.STOP and v.stop is state.stop and v.stop is not None
    assert v.stop.to_json() == {
        "reason": "internal_error", "condition": {"type": "UserCodeError", "name": "user_code[guard]"},
        "detail": "guard raised ValueError: nope", "step": 1, "question": QUESTION}


def test_step_api_usage_must_not_be_negative() -> None:
    c = RunController(Budget(max_steps=9, max_tokens=100), validate=lambda s, o: True)
    for bad in ({"tokens": -1}, {"cost_usd": -0.5}):
        with pytest.raises(ValueError) as e:
            c.on_action(started(c), Finish(1), **bad)
        assert str(e.value) == "tokens and cost must be >= 0"


def test_step_api_a_plain_tool_value_is_a_successful_result() -> None:
    c = RunController(Budget(max_steps=9, max_tokens=100), validate=lambda s, o: True, fold=merge)
    state = started(c)
    call = ToolCall("get")
    c.on_action(state, call)
    assert c.on_tool_result(state, call, {"v": 1}) is None
    assert state.trace[-1].result == ToolResult.success({"v": 1}) and state.data == {"v": 1}


class _Sink(StopCondition):
    """A stop_when that fires with ``reason`` on the action kinds it is given."""

    def __init__(self, reason: StopReason, on: type) -> None:
        self.reason, self.on = reason, on

    @property
    def name(self) -> str:
        return "sink"

    def check(self, point: Checkpoint) -> Stop | None:
        if isinstance(point.action, self.on):
            return self._stop(self.reason, point, "sink fired")
        return None


def test_stop_when_can_end_the_run_on_a_finish_before_it_is_checked() -> None:
    checked: list[object] = []
    c = RunController(Budget(max_steps=9, max_tokens=100), stop_when=_Sink(R.NEEDS_HUMAN, Finish),
                      validate=lambda s, o: checked.append(o) or True)  # type: ignore[func-returns-value]
    state = started(c)
    v = c.on_action(state, Finish(1))
    assert v == Verdict(VerdictKind.STOP, stop=state.stop) and checked == []
    assert state.stop is not None and (state.stop.reason, state.stop.detail) == (R.NEEDS_HUMAN, "sink fired")


# -- the exact stop when user code inside the controls fails ------------------------------------
def user_stop(res: RunResult[Any], name: str, detail: str, step: int) -> None:
    assert res.stop.to_json() == {
        "reason": "internal_error", "condition": {"type": "UserCodeError", "name": name},
        "detail": detail, "step": step, "question": QUESTION}


def test_failing_user_conditions_are_named_in_the_stop() -> None:
    class Raising(_Sink):
        def check(self, point: Checkpoint) -> Stop | None:
            raise RuntimeError("boom")

    class BadObserver(_Sink):
        def observe(self, point: Checkpoint) -> None:
            raise RuntimeError("boom")

    def key(state: RunState) -> Any:
        raise KeyError("x")

    b = Budget(max_steps=5, max_tokens=100)
    run = partial(RunController.run, task="t", decide=script(ToolCall("x")), execute=tools({"x": OK}))
    user_stop(run(RunController(b, validate=lambda s, o: True, stop_when=Raising(R.NO_PROGRESS, Finish))),
              "user_code[stop_when]", "stop_when raised RuntimeError: boom", 0)
    user_stop(run(RunController(b, validate=lambda s, o: True, stop_when=BadObserver(R.NO_PROGRESS, Finish))),
              "user_code[sink.observe]", "sink.observe raised RuntimeError: boom", 0)
    user_stop(run(RunController(b, validate=lambda s, o: True, no_progress=NoProgressDetector(state_key=key))),
              "user_code[no_progress]", "no_progress raised KeyError: 'x'", 1)


def test_a_fold_sees_each_call_and_a_failing_fold_is_named() -> None:
    folded: list[tuple[str, object]] = []

    def fold(state: RunState, call: ToolCall, result: ToolResult) -> None:
        folded.append((call.tool, result.data))
        if len(folded) == 2:
            raise ValueError("bad fold")

    c = RunController(Budget(max_steps=5, max_tokens=100), guard=SIDE, fold=fold, validate=lambda s, o: True)
    pay = ToolCall("pay", {"a": 1}, idempotency_key="k")
    res = c.run("t", script(pay, pay), tools({"pay": ToolResult.success({"paid": 1})}))
    assert folded == [("pay", {"paid": 1}), ("pay", {"paid": 1})]  # the deduplicated call folds too
    user_stop(res, "user_code[fold]", "fold raised ValueError: bad fold", 2)
    assert res.tool_calls == 1


def test_a_condition_claiming_goal_met_is_a_typed_contract_stop() -> None:
    def claim(call: ToolCall, state: RunState) -> Stop:
        return Stop(R.GOAL_MET, SIDE, "done, trust me")

    class Eager(ToolFailure):
        def check(self, point: Checkpoint) -> Stop | None:
            return self._stop(R.GOAL_MET, point, "done, trust me")

    ran: list[str] = []
    guarded = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: True,
                            guard=Guard(allow={"x"}, rules=(claim,)))
    res = guarded.run("t", script(ToolCall("x")), lambda call: ran.append(call.tool) or OK)  # type: ignore[func-returns-value]
    assert ran == [] and res.stop.to_json() == {  # a Stop is limited as a (reason, detail) is
        "reason": "internal_error", "condition": {"type": "UserCodeError", "name": "user_code[guard]"},
        "detail": "guard raised ValueError: a guard rule may only return policy_block or "
                  "needs_human, not goal_met",
        "step": 1, "question": QUESTION}
    eager = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: True,
                          tool_failure=Eager())
    res = eager.run("t", script(ToolCall("x")), tools({"x": OK}))
    assert (res.reason, res.stop.condition.name, res.tool_calls) == (R.INTERNAL_ERROR, "contract[tool_failure=2]", 1)


# -- stopping rules judged on the folded state ---------------------------------------------------
def test_an_early_stop_rule_names_itself_and_the_step() -> None:
    rule = StoppingRule("found", {"v": lambda s: "v" in s.data}, output=lambda s: s.data["v"])
    c = RunController(Budget(max_steps=5, max_tokens=100), rules=[rule], fold=merge)
    res = c.run("t", script(ToolCall("a"), ToolCall("b")),
                tools({"a": ToolResult.success({"w": 0}), "b": ToolResult.success({"v": 7})}))
    assert (res.output, res.stop.detail, res.stop.step) == (7, "every predicate of found holds", 2)


def test_a_rule_output_that_fails_is_named() -> None:
    def output(state: RunState) -> object:
        raise ValueError("no output")

    rule = StoppingRule("found", {"v": lambda s: "v" in s.data}, output=output)
    c = RunController(Budget(max_steps=5, max_tokens=100), rules=[rule], fold=merge)
    res = c.run("t", script(ToolCall("b")), tools({"b": ToolResult.success({"v": 7})}))
    user_stop(res, "user_code[found.output]", "found.output raised ValueError: no output", 1)


def test_a_rule_asking_for_a_human_after_a_tool_names_the_step() -> None:
    def judge(state: RunState) -> PredicateReport:
        if state.tool_calls < 2:
            return PredicateReport(missing=("v",))
        return PredicateReport(escalate="Which source is right?", detail="sources disagree")

    c = RunController(Budget(max_steps=5, max_tokens=100), rules=[StoppingRule("critic", evaluate=judge)])
    res = c.run("t", lambda s: ToolCall("get", {"n": s.step}), tools({"get": OK}))
    assert res.stop.to_json() == {
        "reason": "needs_human", "condition": {"type": "StoppingRule", "name": "critic"},
        "detail": "sources disagree", "step": 2, "question": "Which source is right?"}


def test_with_rules_a_failing_tool_still_ends_the_run() -> None:
    rule = StoppingRule("r", {"v": lambda s: "v" in s.data})
    c = RunController(Budget(max_steps=5, max_tokens=100), rules=[rule])
    res = c.run("t", script(ToolCall("x")), tools({"x": ToolResult.failure("gone", fatal=True)}))
    assert (res.reason, res.stop.detail, res.steps) == (R.TOOL_ERROR, "x failed fatally: gone", 1)


# -- the run record -------------------------------------------------------------------------------
def test_the_run_record_keeps_the_last_action_in_case_shape() -> None:
    c = RunController(Budget(max_steps=1, max_tokens=100), guard=SIDE, validate=lambda s, o: True)
    cases: list[tuple[Any, dict[str, Any]]] = [
        (ToolCall("pay", {"a": 1}, idempotency_key="k-1"),
         {"call": {"tool": "pay", "args": {"a": 1}, "idempotency_key": "k-1"}}),
        (Escalate("which?", found=("a", "b")), {"escalate": "which?", "found": ["a", "b"]}),
        (Invalid("no JSON"), {"invalid": "no JSON"}),
    ]
    for action, shape in cases:
        res = c.run("t", script(action), tools({"pay": OK}))
        assert res.to_json()["last_action"] == shape


def test_the_run_record_keeps_a_task_that_is_not_json_as_its_repr() -> None:
    class Task:
        def __repr__(self) -> str:
            return "Task(42)"

    c = RunController(Budget(max_steps=1, max_tokens=100), validate=lambda s, o: True)
    assert c.run(Task(), script(Finish(1)), tools({})).to_json()["task"] == "Task(42)"


def test_the_run_record_names_the_stalled_state_setting() -> None:
    c = RunController(Budget(max_steps=1, max_tokens=100), validate=lambda s, o: True,
                      no_progress=NoProgressDetector(stalled=4))
    res = c.run("t", script(Finish(1)), tools({}))
    assert res.to_json()["controls"]["no_progress"] == {"repeats": 3, "empty_results": 3, "stalled": 4}


def test_dollar_figures_are_counted_in_micro_dollars() -> None:
    c = RunController(Budget(max_steps=5, max_tokens=100), validate=lambda s, o: s.step >= 3)
    res = c.run("t", lambda s: Turn(Finish(s.step), cost_usd=(0.1, 0.2, 4e-7)[s.step]), tools({}))
    assert res.cost_usd == 0.3  # not 0.30000000000000004
    assert res.to_json()["usage"] == [[0, 0.1], [0, 0.2], [0, 0.0]]
    tiny = c.run("t", lambda s: Turn(Finish(s.step), cost_usd=6e-7), tools({}))
    assert tiny.cost_usd == 3e-6  # each step's 0.6 micro-dollars counts as one


# -- run() given async callables: each says which callable needs arun() --------------------------
AWAITABLE = "returned an awaitable: use `await controller.arun(...)`"


def test_run_names_the_async_callable_that_needs_arun() -> None:
    async def async_decide(state: RunState) -> Finish:
        return Finish(1)

    async def async_execute(call: ToolCall) -> ToolResult:
        return OK

    async def async_validate(state: RunState, output: object) -> bool:
        return True

    for timed in (False, True):  # one behaviour, deadline or not: refused before the run starts
        c = RunController(budget(timed), validate=lambda s, o: True)
        for decide, execute, what in ((async_decide, tools({}), "decide"),
                                      (script(ToolCall("x")), async_execute, "execute")):
            with pytest.raises(TypeError) as e:
                c.run("t", decide, execute)
            assert str(e.value) == f"{what} is async: use `await controller.arun(...)`"
        checked = RunController(budget(timed), validate=async_validate)
        with pytest.raises(TypeError) as e:
            checked.run("t", script(Finish(1)), tools({}))
        assert str(e.value) == "validate is async: use `await controller.arun(...)`"
        # a plain function that returns an awaitable is refused when it returns it
        with pytest.raises(TypeError) as e:
            c.run("t", script(ToolCall("x")), lambda call: async_execute(call))
        assert str(e.value) == f"execute {AWAITABLE}"


# -- resuming keeps the driver's kind: run() resumes synchronously, arun() asynchronously --------
def _asks_twice(state: RunState) -> Escalate | Finish:
    return Escalate(f"go on? ({state.step})") if state.step < 2 else Finish(state.step)


@pytest.mark.parametrize("timed", [False, True])
def test_a_run_result_resumes_synchronously_every_time(timed: bool) -> None:
    c = RunController(budget(timed), validate=lambda s, o: True)
    first = c.run("t", _asks_twice, tools({}))
    second = first.resume(answer="yes")
    assert isinstance(second, RunResult) and second.reason is R.NEEDS_HUMAN
    third = second.resume(answer="yes")
    assert isinstance(third, RunResult) and (third.reason, third.output) == (R.GOAL_MET, 2)


@pytest.mark.parametrize("timed", [False, True])
def test_an_arun_result_resumes_asynchronously_every_time(timed: bool) -> None:
    async def main() -> RunResult[Any]:
        c = RunController(budget(timed), validate=lambda s, o: True)
        first = await c.arun("t", _asks_twice, tools({}))
        second = first.resume(answer="yes")
        assert isinstance(second, Awaitable)
        second = await second
        assert second.reason is R.NEEDS_HUMAN
        third = second.resume(answer="yes")
        assert isinstance(third, Awaitable)
        out: RunResult[Any] = await third
        return out

    third = anyio.run(main)
    assert (third.reason, third.output) == (R.GOAL_MET, 2)
