"""The step-by-step API an engine such as the ECT closed loop drives itself."""

from __future__ import annotations

import anyio
import pytest

from runner.canonical import canonical_bytes
from runner.control import (
    Budget,
    Escalate,
    Finish,
    Guard,
    PredicateReport,
    RunController,
    RunState,
    SideEffectRule,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
    VerdictKind,
)
from tests.control.conftest import merge

SLOTS = ("revenue", "region")


def coverage(state: RunState) -> PredicateReport:
    """Like the ECT verifier: which required slots have receipts in the ledger."""
    have = tuple(s for s in SLOTS if s in state.data)
    return PredicateReport(satisfied=have, missing=tuple(s for s in SLOTS if s not in have))


async def judge(state: RunState, certificate: dict) -> PredicateReport:
    """An async termination pipeline (e.g. a verifier or critic call)."""
    await anyio.sleep(0)
    bad = tuple(s for s in SLOTS
                if certificate.get(s) is None or certificate.get(s) != state.data.get(s))
    if certificate.get("conflict"):
        return PredicateReport(escalate="Two receipts disagree on revenue: which is right?")
    return PredicateReport(satisfied=tuple(s for s in SLOTS if s not in bad), missing=bad)


def engine_controller() -> RunController:
    # the ECT closed loop's budget: 4 decisions and 3 additional tool calls
    return RunController(
        Budget(max_steps=4, max_tokens=50_000, tool_limits=ToolLimits(total=3)),
        guard=Guard(allow={"get_metric", "get_parent", "record_note"},
                    side_effects={"record_note": SideEffectRule()}),
        rules=[StoppingRule("coverage", evaluate=coverage)],
        fold=merge,
    )


async def drive(c: RunController, planner: list, results: dict) -> tuple:
    state = c.start({"task_id": "t-1"})
    directives = []
    while True:
        if c.check_before_model(state) is not None:
            break
        directives.append(state.directive.missing if state.directive else ())
        verdict = c.on_action(state, planner[state.step], tokens=100)
        if verdict.kind is VerdictKind.EXECUTE:
            c.on_tool_result(state, verdict.call, results[verdict.call.tool])
        elif verdict.kind is VerdictKind.CHECK_FINISH:
            report = await judge(state, verdict.finish.output)
            c.on_finish(state, verdict.finish, report=report)
        elif verdict.kind is VerdictKind.STOP:
            break
    return c.result(state), directives


RESULTS = {"get_metric": ToolResult.success({"revenue": 10}),
           "get_parent": ToolResult.success({"region": "north"})}


def test_engine_loop_goal_after_directive() -> None:
    planner = [Finish({"revenue": 10}), ToolCall("get_metric", {"e": 1}),
               ToolCall("get_parent", {"e": 1}), Finish({"revenue": 10, "region": "north"})]
    res, directives = anyio.run(drive, engine_controller(), planner, RESULTS)
    assert res.reason is StopReason.GOAL_MET and res.steps == 4 and res.tool_calls == 2
    # missing slots reach the planner, refreshed after each result is folded in
    assert directives == [("revenue", "region"), ("revenue", "region"), ("region",), ()]
    assert res.trace[0].kind == "finish_rejected"


def test_engine_loop_needs_human_from_the_judge() -> None:
    planner = [ToolCall("get_metric", {"e": 1}), Finish({"conflict": True})]
    res, _ = anyio.run(drive, engine_controller(), planner, RESULTS)
    assert res.reason is StopReason.NEEDS_HUMAN
    assert res.handoff.question == "Two receipts disagree on revenue: which is right?"


def test_engine_loop_tool_budget() -> None:
    planner = [ToolCall("get_metric", {"e": i}) for i in range(4)]
    res, _ = anyio.run(drive, engine_controller(), planner, RESULTS)
    assert res.reason is StopReason.TOOL_LIMIT and res.tool_calls == 3


def test_halt_for_a_caller_decided_reason() -> None:
    c = engine_controller()
    state = c.start("t")
    assert c.check_before_model(state) is None
    stop = c.halt(state, "no_progress", "the critic called the agent stuck", name="critic")
    assert stop.reason is StopReason.NO_PROGRESS and stop.condition.name == "critic"
    res = c.result(state)
    assert res.reason is StopReason.NO_PROGRESS and res.handoff is not None
    assert c.check_before_model(state) is stop  # the one stop, again
    with pytest.raises(RuntimeError, match="already stopped"):
        c.on_action(state, Finish(1))
    with pytest.raises(ValueError):
        c.halt(c.start("t"), StopReason.GOAL_MET, "no")


def test_result_before_stop_and_misuse() -> None:
    c = engine_controller()
    state = c.start("t")
    with pytest.raises(RuntimeError, match="has not stopped"):
        c.result(state)
    with pytest.raises(TypeError):
        c.on_action(state, "not an action")  # type: ignore[arg-type]


def test_async_arun_with_async_callables() -> None:
    calls = []

    async def decide(state: RunState) -> object:
        return [ToolCall("get_metric", {}), ToolCall("get_parent", {}),
                Finish({"revenue": 10, "region": "north"})][state.step]

    async def execute(call: ToolCall) -> ToolResult:
        calls.append(call.tool)
        return RESULTS[call.tool]

    c = RunController(Budget(max_steps=5, max_tokens=99), validate=judge, fold=merge)
    res = anyio.run(c.arun, "t", decide, execute)
    assert res.reason is StopReason.GOAL_MET and calls == ["get_metric", "get_parent"]
    # a sync run refuses async callables rather than silently skipping them
    with pytest.raises(TypeError, match="arun"):
        c.run("t", decide, execute)  # type: ignore[arg-type]


def test_run_needs_a_finish_check() -> None:
    c = RunController(Budget(max_steps=2, max_tokens=9))
    with pytest.raises(ValueError, match="finish check"):
        c.run("t", lambda s: Escalate("q"), lambda call: ToolResult())


def test_run_ids_are_deterministic() -> None:
    c = RunController(Budget(max_steps=1, max_tokens=9), validate=lambda s, o: True)
    a = c.run("t", lambda s: ToolCall("x", {}), lambda call: ToolResult.success(1))
    b = c.run("t", lambda s: ToolCall("x", {}), lambda call: ToolResult.success(1))
    assert (a.run_id, b.run_id) == ("run-1", "run-2")
    same = [c.run("t", lambda s: ToolCall("x", {}), lambda call: ToolResult.success(1),
                  run_id="r").to_json() for _ in range(2)]
    assert canonical_bytes(same[0]) == canonical_bytes(same[1])


def test_a_finish_check_that_raises_is_an_internal_error_naming_validate() -> None:
    def broken(state: RunState, output: object) -> bool:
        raise KeyError("revenue")

    c = RunController(Budget(max_steps=2, max_tokens=9), validate=broken)
    res = c.run("t", lambda s: Finish({"x": s.step}), lambda call: ToolResult())
    assert res.reason is StopReason.INTERNAL_ERROR and res.stop.kind == "UserCodeError"
    assert res.stop.detail == "validate raised KeyError: 'revenue'" and res.steps == 1


def test_rejected_finish_missing_list_reaches_the_next_directive() -> None:
    seen = []

    async def decide(state: RunState) -> object:
        seen.append(state.directive)
        return [Finish({"revenue": 3}), ToolCall("get_metric", {}),
                Finish({"revenue": 10, "region": "north"})][state.step]

    c = RunController(Budget(max_steps=3, max_tokens=99), validate=judge, fold=merge)
    res = anyio.run(c.arun, "t", decide, lambda call: RESULTS[call.tool])
    assert res.reason is StopReason.STEP_BUDGET  # region never found; the budget ends it
    assert seen[0] is None
    assert seen[1].missing == ("revenue", "region")
    assert seen[1].text == ("Your finish was not accepted. "
                            "Not done yet. Still missing: revenue, region.")
    assert seen[2] is None
