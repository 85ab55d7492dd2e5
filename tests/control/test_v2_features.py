"""Stop controls v2: resumable needs_human, facts with freshness, run records and capture,
evals of the user's own agent, outside cancellation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from runner.canonical import canonical_bytes
from runner.cli import cli
from runner.control import (
    AllOf,
    Budget,
    EvalCase,
    EvalCaseError,
    Finish,
    Guard,
    IdempotencyLedger,
    MaxSteps,
    RunController,
    RunResult,
    RunState,
    SideEffectRule,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
    capture_case,
    load_cases,
    run_case,
    run_evals,
)
from tests.control.conftest import merge, script, tools


# -- resumable needs_human ------------------------------------------------------------------------
def refunder(state: RunState) -> ToolCall | Finish:
    """Refunds until the refund is in the state, then finishes."""
    if state.data.get("refunded") is not True:
        return ToolCall("refund", {"amount": 250}, idempotency_key="r-1")
    return Finish("done")


def refund_controller(ledger: IdempotencyLedger | None = None) -> RunController:
    guard = Guard(allow={"refund"}, side_effects={"refund": SideEffectRule(
        amount_arg="amount", max_amount=1000, escalate_above=100)})
    return RunController(Budget(max_steps=6, max_tokens=1000), guard=guard, fold=merge,
                         validate=lambda s, o: s.data.get("refunded") is True, idempotency=ledger)


def test_needs_human_resumes_after_approval_and_never_repeats_the_side_effect(tmp_path: Path) -> None:
    paid: list[int] = []

    def execute(call: ToolCall) -> ToolResult:
        paid.append(call.args["amount"])
        return ToolResult.success({"refunded": True})

    first = refund_controller().run("refund 250", refunder, execute)
    assert first.reason is StopReason.NEEDS_HUMAN and first.resumable and paid == []
    assert first.handoff is not None and "Approve refund" in first.handoff.question

    second = first.resume(approvals={"refund"}, answer="approved by finance")
    assert second.reason is StopReason.GOAL_MET and paid == [250]
    assert second.steps == 3  # the budget carried on: the blocked step counts
    assert not second.resumable
    with pytest.raises(ValueError, match="only a needs_human"):
        second.resume(approvals={"refund"})


def test_resume_of_an_async_run(tmp_path: Path) -> None:
    async def execute(call: ToolCall) -> ToolResult:
        return ToolResult.success({"refunded": True})

    async def main() -> RunResult[Any]:
        first = await refund_controller().arun("refund", refunder, execute)
        assert first.reason is StopReason.NEEDS_HUMAN
        return await first.resume(approvals={"refund"})  # type: ignore[no-any-return]

    assert anyio.run(main).reason is StopReason.GOAL_MET


def test_approval_never_lifts_the_maximum() -> None:
    decide = script(ToolCall("refund", {"amount": 5000}, idempotency_key="r-1"))
    first = refund_controller().run("refund", decide, tools({}))
    assert first.reason is StopReason.POLICY_BLOCK and not first.resumable


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


# -- facts with freshness -------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_fact_expires_and_a_write_tool_invalidates_it() -> None:
    clock = Clock()
    ctl = RunController(Budget(max_steps=9, max_tokens=100), clock=clock, validate=lambda s, o: True,
                        guard=Guard(allow={"get_stock", "reserve"},
                                    side_effects={"reserve": SideEffectRule()}))
    state = ctl.start("t")
    state.set_fact("stock", 5, ttl_s=30)
    state.set_fact("price", 9)  # voided by any write tool
    state.set_fact("sku", "A-1", invalidated_by=set())  # never voided by a tool
    assert state.fact("stock") == 5
    clock.now = 31.0
    assert state.fact("stock") is None and state.fact("stock", "stale") == "stale"
    assert ctl.check_before_model(state) is None
    v = ctl.on_action(state, ToolCall("reserve", {"n": 1}, idempotency_key="k"))
    ctl.on_tool_result(state, v.call, ToolResult.success({"ok": True}))  # type: ignore[arg-type]
    assert state.fact("price") is None and state.fact("sku") == "A-1"


def test_stale_fact_cannot_satisfy_a_rule() -> None:
    clock = Clock()

    def fold(state: RunState, call: ToolCall, result: ToolResult) -> None:
        if call.tool == "check":
            state.set_fact("eligible", True, ttl_s=10)
        clock.now += 20  # every tool call takes 20 s: the fact is stale by the next step

    rule = StoppingRule("r", {"eligible": lambda s: s.fact("eligible") is True})
    ctl = RunController(Budget(max_steps=4, max_tokens=100), rules=[rule], fold=fold, clock=clock)
    result = ctl.run("t", script(ToolCall("check"), ToolCall("other"), Finish("x")),
                     tools({"check": ToolResult.success(1), "other": ToolResult.success(2)}))
    assert result.reason is not StopReason.GOAL_MET
    assert result.reports["r"].missing == ("eligible",)


# -- construction-time refusals -------------------------------------------------------------------
def test_allof_cannot_claim_goal_met() -> None:
    with pytest.raises(ValueError, match="goal_met"):
        AllOf(MaxSteps(2), reason=StopReason.GOAL_MET)


# -- outside cancellation -------------------------------------------------------------------------
def test_outside_cancellation_delivers_a_typed_result_then_propagates() -> None:
    seen: list[RunResult[Any]] = []
    started = anyio.Event()

    async def execute(call: ToolCall) -> ToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    ctl = RunController(Budget(max_steps=3, max_tokens=100), validate=lambda s, o: True)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            async def go() -> None:
                await ctl.arun("t", script(ToolCall("t")), execute, on_stop=seen.append)

            tg.start_soon(go)
            await started.wait()
            tg.cancel_scope.cancel()

    anyio.run(main)
    (result,) = seen
    assert result.reason is StopReason.INTERNAL_ERROR and result.stop.kind == "Interrupted"
    assert result.stop.detail == "cancelled from outside"
    assert result.stop.condition.name == "interrupted[cancelled]"
    assert result.handoff is not None and result.handoff.question == (
        "The run was interrupted: resume it from the handoff, or close it?")


# -- run records, capture, evals of the user's own agent -------------------------------------------
def failing_run() -> RunResult[Any]:
    ctl = RunController(Budget(max_steps=5, max_tokens=1000), fold=merge,
                        validate=lambda s, o: isinstance(o, dict) and o.get("v") == s.data.get("v"))
    decide = script(Turn(ToolCall("get", {"q": 1}), tokens=7), Turn(Finish({"v": 2}), tokens=5))
    return ctl.run("What is v?", decide, tools({"get": ToolResult.success({"v": 1})}),
                   run_id="r-42")


def test_run_record_keeps_what_a_replay_and_the_rule_need() -> None:
    record = failing_run().to_json()
    assert record["format"] == "ect.run-record/1" and "output" not in record
    assert record["task"] == "What is v?" and record["steps"] == 4  # the third same finish
    assert record["usage"] == [[7, 0.0], [5, 0.0], [5, 0.0], [5, 0.0]]
    assert record["data"] == {"v": 1}
    assert record["controls"]["budget"]["max_steps"] == 5
    assert record["last_action"] == {"finish": {"v": 2}}
    canonical_bytes(record)  # plain JSON


def test_capture_replays_the_run_and_can_expect_the_right_stop(tmp_path: Path) -> None:
    record = failing_run().to_json()
    case_obj = capture_case(record)
    case = EvalCase.from_json(case_obj, "captured")
    replay = run_case(case)
    assert replay.passed, replay.failure_line()
    assert replay.observed is StopReason.NO_PROGRESS
    # pinned to what should have happened, the captured case fails until the agent is fixed
    wanted = EvalCase.from_json(capture_case(record, expect="goal_met"), "captured")
    assert not run_case(wanted).passed
    with pytest.raises(EvalCaseError, match=r"ect\.run-record/1"):
        capture_case({"format": "other"})


def test_cli_capture_writes_a_case_that_ect_evals_run_accepts(tmp_path: Path) -> None:
    rec = tmp_path / "run.json"
    rec.write_bytes(canonical_bytes(failing_run().to_json()))
    out = tmp_path / "cases" / "case.json"
    out.parent.mkdir()
    res = CliRunner().invoke(cli, ["evals", "capture", str(rec), "-o", str(out), "--id", "v_case"])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["id"] == "v_case"
    res = CliRunner().invoke(cli, ["evals", "run", str(out.parent)])
    assert res.exit_code == 0 and res.output.strip().endswith("1 passed, 0 failed")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "x"}')
    res = CliRunner().invoke(cli, ["evals", "capture", str(bad)])
    assert res.exit_code == 2 and res.output.startswith("ect: ") and "\n" == res.output[-1]


def never_stops(state: RunState) -> ToolCall:
    """A user's agent that keeps searching with new arguments and never finishes."""
    return ToolCall("search", {"page": state.step})


def test_evals_run_the_users_own_agent(tmp_path: Path) -> None:
    report = run_evals(decide=never_stops)
    assert not report.ok  # this agent cannot meet the goal_met cases
    res = CliRunner().invoke(cli, ["evals", "run", "--agent",
                                   "tests.control.test_v2_features:never_stops"])
    assert res.exit_code == 1 and "FAIL goal_met_lookup_then_finish" in res.output
    res = CliRunner().invoke(cli, ["evals", "run", "--agent", "tests.nowhere:agent"])
    assert res.exit_code == 2 and res.output.startswith("ect: cannot import agent")


def test_eval_reports_steps_tools_and_side_effects(tmp_path: Path) -> None:
    case = {
        "format": "ect.stop-eval/1", "id": "strict", "task": "t", "expect_stop": "goal_met",
        "expect_steps": 3, "expect_tools": ["get", "get"], "expect_not_run": ["get"],
        "finish_check": {"require": ["v"]},
        "tools": {"get": {"results": [{"data": {"v": 1}}]}},
        "agent": {"turns": [{"call": {"tool": "get"}}, {"finish": {"v": 1}}]},
    }
    result = run_case(EvalCase.from_json(case))
    assert not result.passed
    assert result.problems == ("took 2 steps, expected 3", "ran tools ['get'], expected ['get', 'get']",
                               "executed get, which must not run")


def test_bundled_suite_covers_time_budget_and_internal_error() -> None:
    kinds = {c.expect_stop for c in load_cases()}
    assert {StopReason.TIME_BUDGET, StopReason.INTERNAL_ERROR} <= kinds


# -- progress as change in the folded state ------------------------------------------------------
def test_results_that_teach_the_run_nothing_are_no_progress() -> None:
    from runner.control import NoProgressDetector, StalledState

    n = iter(range(100))  # every call is new, every result non-empty, yet nothing new is learnt
    ctl = RunController(Budget(max_steps=20, max_tokens=1000), validate=lambda s, o: True,
                        fold=merge, no_progress=NoProgressDetector(stalled=3))
    result = ctl.run("t", lambda s: ToolCall("search", {"page": next(n)}),
                     tools({"search": ToolResult.success({"hits": ["doc-1"]})}))
    assert result.reason is StopReason.NO_PROGRESS and type(result.stop.condition) is StalledState
    assert result.tool_calls == 4  # the first result taught something; three more did not
    assert result.stop.detail == "3 tool results in a row left the run state unchanged"
    learning = iter(range(100))
    ctl2 = RunController(Budget(max_steps=6, max_tokens=1000), validate=lambda s, o: True,
                         fold=merge, no_progress=NoProgressDetector(stalled=3))
    moving = ctl2.run("t", lambda s: ToolCall("search", {"page": next(learning)}),
                      lambda c: ToolResult.success({"hits": [c.args["page"]]}))
    assert moving.reason is StopReason.STEP_BUDGET
    with pytest.raises(ValueError, match=r"StalledState\.results must be >= 2"):
        StalledState(1)


def test_resume_feeds_the_answer_to_the_model_and_names_a_run_it_cannot_resume() -> None:
    notes: list[tuple[str, ...]] = []

    def decide(state: RunState) -> ToolCall | Finish:
        notes.append(state.directive.notes if state.directive is not None else ())
        return refunder(state)

    first = refund_controller().run("refund 250", decide, tools(
        {"refund": ToolResult.success({"refunded": True})}), run_id="r-9")
    second = first.resume(approvals={"refund"}, answer="approved by finance")
    assert second.reason is StopReason.GOAL_MET
    assert "A person answered: approved by finance" in notes[1]
    with pytest.raises(ValueError) as e:
        second.resume()
    assert str(e.value) == ("run r-9 ended goal_met: only a needs_human result of run()/arun() "
                            "can be resumed")
