"""Each stop condition: names, descriptions, details, steps, phases and boundaries, combinators
(AllOf, AnyOf) and the tool-failure streak. Each exact assertion pins something a mutant of
runner/control/_conditions.py changed without any other test noticing (tests/control/mutation.py)."""

from __future__ import annotations

import pytest

from runner.control import (
    AllOf,
    AnyOf,
    Budget,
    Checkpoint,
    DailySpendCap,
    Escalate,
    EscalationRequested,
    ExternalStop,
    Finish,
    FinishGate,
    Invalid,
    MaxCost,
    MaxSteps,
    MaxTime,
    MaxTokens,
    NoProgressDetector,
    Phase,
    RepeatedAction,
    RepeatedEmptyResult,
    RunController,
    RunState,
    StopCondition,
    StopReason,
    ToolCall,
    ToolCallLimit,
    ToolFailure,
    ToolResult,
    ToolTimeout,
    Turn,
)
from tests.control.conftest import merge, script, tools

R = StopReason


B, A, T = Phase.BEFORE_MODEL, Phase.ON_ACTION, Phase.AFTER_TOOL


def st(**kw: object) -> RunState:
    return RunState("r", "t", **kw)  # type: ignore[arg-type]


def test_names_and_descriptions() -> None:
    assert MaxSteps(3).name == "max_steps=3"
    assert MaxTokens(7).name == "max_tokens=7"
    assert MaxCost(0.5).name == "max_cost=0.5"
    assert MaxCost(2, label="budget").name == "budget=2"
    assert MaxTime(1.5).name == "max_seconds=1.5"
    assert ToolCallLimit(2, "s").name == "tool_limit[s]=2"
    assert ToolCallLimit(4).name == "tool_limit[*]=4"
    assert RepeatedAction(4).name == "repeated_action=4"
    assert RepeatedEmptyResult(5).name == "repeated_empty_result=5"
    assert ToolFailure(3).name == "tool_failure=3"
    assert ToolTimeout("s", 2.0).name == "tool_timeout[s]=2"
    assert EscalationRequested().name == "escalate_action"
    assert DailySpendCap().name == "daily_spend_remaining"
    assert FinishGate().name == "finish_check"
    assert ExternalStop("judge").name == "judge"
    assert NoProgressDetector().name == "no_progress"
    any_of = MaxSteps(1) | MaxTokens(2)
    assert any_of.name == "any_of"
    assert any_of.describe() == {"type": "AnyOf", "name": "any_of", "members": [
        {"type": "MaxSteps", "name": "max_steps=1"}, {"type": "MaxTokens", "name": "max_tokens=2"}]}
    all_of = MaxSteps(1) & MaxTokens(2)
    assert all_of.name == "all_of"
    assert all_of.describe() == {"type": "AllOf", "name": "all_of", "members": [
        {"type": "MaxSteps", "name": "max_steps=1"}, {"type": "MaxTokens", "name": "max_tokens=2"}]}


def test_phases_declared_by_each_condition() -> None:
    assert MaxSteps(1).phases == {B}
    assert ToolCallLimit(1).phases == {A}
    assert RepeatedAction().phases == {A}
    assert RepeatedEmptyResult().phases == {T}
    assert ToolFailure().phases == {T}
    assert EscalationRequested().phases == {A}
    assert MaxTokens(1).phases == {B, A, T}
    assert (MaxSteps(1) | ToolFailure()).phases == {B, T}
    assert (MaxTokens(1) & MaxSteps(1)).phases == {B}
    assert NoProgressDetector().phases == {A, T}


def test_allof_refusals_name_the_phases() -> None:
    with pytest.raises(ValueError) as e:
        AllOf(MaxSteps(2), ToolCallLimit(1))
    assert str(e.value) == ("AllOf members never fire at the same checkpoint: max_steps=2 "
                            "(before_model), tool_limit[*]=1 (on_action); combine them with | or "
                            "check them separately")
    with pytest.raises(ValueError, match=r"^AllOf needs at least one member$"):
        AllOf()
    with pytest.raises(TypeError, match=r"^AllOf members must be StopConditions, got int$"):
        AllOf(MaxSteps(1), 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^AnyOf members must be StopConditions, got str$"):
        AnyOf("x")  # type: ignore[arg-type]


def test_allof_flattens_only_its_own_kind() -> None:
    inner_any = MaxSteps(1) | MaxTokens(1)
    nested = AllOf(AllOf(MaxTokens(1), MaxCost(1)), inner_any)
    assert [type(m).__name__ for m in nested.members] == ["MaxTokens", "MaxCost", "AnyOf"]
    assert [type(m).__name__ for m in AnyOf(AnyOf(MaxSteps(1)), AllOf(MaxSteps(2))).members] == [
        "MaxSteps", "AllOf"]


def test_allof_stop_carries_the_first_members_fields_and_every_cause() -> None:
    state = st(step=4, tokens=10, cost_usd=3.0)
    point = Checkpoint(B, state)
    both = MaxTokens(5) & MaxCost(1.0)
    stop = both.check(point)
    assert stop is not None
    assert stop.reason is R.TOKEN_BUDGET and type(stop.condition) is MaxTokens
    assert stop.detail == "used 10 tokens of a 5-token budget" and stop.step == 4
    assert [c.detail for c in stop.causes] == ["used 10 tokens of a 5-token budget",
                                               "spent $3.0000 of a $1.0000 cost ceiling"]
    assert stop.question is None
    relabelled = AllOf(MaxTokens(5), MaxCost(1.0), reason=R.STEP_BUDGET).check(point)
    assert relabelled is not None and relabelled.reason is R.STEP_BUDGET
    assert type(relabelled.condition) is AllOf and relabelled.step == 4
    assert relabelled.detail == "used 10 tokens of a 5-token budget"
    assert len(relabelled.causes) == 2 and relabelled.question is None
    # one member silent: no stop
    assert (MaxTokens(50) & MaxCost(1.0)).check(point) is None
    # the question of the first member is kept
    esc = AllOf(EscalationRequested(), MaxTokens(1)).check(
        Checkpoint(A, st(step=2, tokens=9), Escalate("why?")))
    assert esc is not None and esc.question == "why?" and esc.reason is R.NEEDS_HUMAN
    relabelled_q = AllOf(EscalationRequested(), MaxTokens(1), reason=R.POLICY_BLOCK).check(
        Checkpoint(A, st(step=2, tokens=9), Escalate("why?")))
    assert relabelled_q is not None and relabelled_q.question == "why?"


def test_combinators_pass_observe_to_every_member() -> None:
    state = st()
    call = ToolCall("t", {"a": 1})
    ra, rb = RepeatedAction(3), RepeatedAction(2)
    for combo in (AllOf(ra, rb), AnyOf(ra, rb)):
        combo.observe(Checkpoint(A, state, call, call))
    assert list(state.scratch(ra).values()) == [2] and list(state.scratch(rb).values()) == [2]


def test_token_and_cost_boundaries_at_each_phase() -> None:
    at = st(tokens=5, cost_usd=1.0, step=2)
    assert MaxTokens(5).check(Checkpoint(B, at)) is not None  # no model call at the limit
    assert MaxTokens(5).check(Checkpoint(A, at)) is None  # reaching it on a call is allowed
    over = st(tokens=6, cost_usd=1.5, step=3)
    stop = MaxTokens(5).check(Checkpoint(A, over))
    assert stop is not None and stop.detail == "used 6 tokens of a 5-token budget" and stop.step == 3
    assert MaxCost(1.0).check(Checkpoint(B, at)) is not None
    assert MaxCost(1.0).check(Checkpoint(T, at)) is None
    stop = MaxCost(1.0).check(Checkpoint(T, over))
    assert stop is not None and stop.detail == "spent $1.5000 of a $1.0000 cost ceiling"
    assert stop.reason is R.TOKEN_BUDGET and stop.step == 3
    left = st(cost_usd=0.7, daily_remaining_usd=0.5)
    stop = DailySpendCap().check(Checkpoint(A, left))
    assert stop is not None and stop.detail == "spent $0.7000 of a $0.5000 share of today's spend ceiling"
    assert DailySpendCap().check(Checkpoint(A, st(cost_usd=9.0))) is None  # no ceiling


def test_invalid_limits_are_refused_with_their_names() -> None:
    for bad, msg in ((lambda: MaxSteps(0), "MaxSteps.limit must be >= 1"),
                     (lambda: MaxTokens(0), "MaxTokens.limit must be >= 1"),
                     (lambda: MaxCost(0), "MaxCost.limit_usd must be > 0"),
                     (lambda: MaxTime(0), "MaxTime.limit_s must be > 0"),
                     (lambda: ToolCallLimit(-1), "ToolCallLimit.limit must be >= 0"),
                     (lambda: RepeatedAction(1), "RepeatedAction.repeats must be >= 2"),
                     (lambda: RepeatedEmptyResult(1), "RepeatedEmptyResult.count must be >= 2"),
                     (lambda: ToolFailure(0), "ToolFailure.consecutive must be >= 1")):
        with pytest.raises(ValueError) as e:
            bad()
        assert str(e.value) == msg
    MaxSteps(1), MaxTokens(1), MaxTime(0.001), ToolCallLimit(0), RepeatedAction(2)
    RepeatedEmptyResult(2), ToolFailure(1)


def test_time_condition_needs_a_started_state_and_reports_the_budget() -> None:
    clock = [0.0]
    state = st(step=1)
    assert MaxTime(5).check(Checkpoint(B, state)) is None  # not started by a controller
    state._limits = (Budget(max_steps=3, max_tokens=9, max_seconds=5), lambda: clock[0])
    assert MaxTime(5).check(Checkpoint(B, state)) is None
    clock[0] = 4.999
    assert MaxTime(5).check(Checkpoint(T, state)) is None
    clock[0] = 5.0
    stop = MaxTime(5).check(Checkpoint(T, state))
    assert stop is not None and stop.reason is R.TIME_BUDGET
    assert stop.detail == "used the whole 5-second time budget" and stop.step == 1
    late = MaxTime(5).expired(Checkpoint(B, state), "in search")
    assert late.detail == "the 5-second time budget ran out in search" and late.reason is R.TIME_BUDGET
    no_deadline = st()
    no_deadline._limits = (Budget(max_steps=3, max_tokens=9), lambda: 1e9)
    assert MaxTime(5).check(Checkpoint(B, no_deadline)) is None


def test_tool_call_limit_details_and_scope() -> None:
    state = st(step=2, tool_calls=3, calls_by_tool={"s": 2, "u": 1}, failed_by_tool={"s": 1})
    call = ToolCall("s", {"q": 1})
    assert ToolCallLimit(2, "s").check(Checkpoint(A, state, call, call)) is None  # 1 success
    stop = ToolCallLimit(1, "s").check(Checkpoint(A, state, call, call))
    assert stop is not None and stop.step == 2 and stop.reason is R.TOOL_LIMIT
    assert stop.detail == "s: would exceed the limit of 1 successful calls of s"
    stop = ToolCallLimit(3).check(Checkpoint(A, state, call, call))
    assert stop is not None and stop.detail == "s: would exceed the limit of 3 tool calls in total"
    assert ToolCallLimit(4).check(Checkpoint(A, state, call, call)) is None
    assert ToolCallLimit(0, "u").check(Checkpoint(A, state, call, call)) is None  # other tool
    assert ToolCallLimit(0).check(Checkpoint(B, state, call, call)) is None  # wrong phase
    assert ToolCallLimit(0).check(Checkpoint(A, state, Finish(1))) is None  # not a call


def test_repeated_action_details_for_each_kind_of_action() -> None:
    cond = RepeatedAction(2)
    for action, what in ((ToolCall("s", {"q": 1}), 's({"q":1})'),
                         (Finish({"a": 1}), "the same finish"),
                         (Invalid("no json"), "the same invalid reply")):
        state = st(step=5)
        point = Checkpoint(A, state, action, action if isinstance(action, ToolCall) else None)
        assert cond.check(point) is None
        cond.observe(point)
        stop = cond.check(point)
        assert stop is not None and stop.detail == f"{what} proposed 2 times with no change"
        assert stop.step == 5 and stop.reason is R.NO_PROGRESS
    assert cond.check(Checkpoint(A, st(), Escalate("q"))) is None
    assert cond.check(Checkpoint(B, st(), ToolCall("s"))) is None
    # a finish whose output is not JSON is fingerprinted by its repr
    odd = Finish(object)
    state = st()
    p = Checkpoint(A, state, odd)
    cond.observe(p)
    assert cond.check(p) is not None


def test_empty_results_streak_is_per_identical_result() -> None:
    cond = RepeatedEmptyResult(2)
    state = st(step=3)
    empty_a, empty_b = ToolResult.success([]), ToolResult.success({})
    call = ToolCall("s")
    p_a = Checkpoint(T, state, None, call, empty_a)
    assert cond.check(p_a) is None
    cond.observe(p_a)
    p_b = Checkpoint(T, state, None, call, empty_b)
    assert cond.check(p_b) is None  # a different empty result starts a new streak
    cond.observe(p_b)
    stop = cond.check(p_b)
    assert stop is not None and stop.detail == "the same empty result 2 times in a row"
    assert stop.step == 3
    cond.observe(Checkpoint(T, state, None, call, ToolResult.success([1])))
    assert cond.check(p_b) is None  # a real result resets the streak
    assert cond.check(Checkpoint(A, state, None, call, empty_a)) is None
    assert cond.check(Checkpoint(T, state, None, call, ToolResult.failure("x"))) is None
    # results that are not JSON are compared by repr
    weird = ToolResult.success(None)
    p_w = Checkpoint(T, st(), None, call, weird)
    cond.observe(p_w)
    assert cond.check(p_w) is not None


def test_tool_failure_details() -> None:
    call = ToolCall("s")
    fatal = ToolResult.failure("boom", fatal=True)
    stop = ToolFailure(3).check(Checkpoint(T, st(step=2), None, call, fatal))
    assert stop is not None and stop.detail == "s failed fatally: boom" and stop.step == 2
    no_msg = ToolResult(ok=False, fatal=True)
    stop = ToolFailure().check(Checkpoint(T, st(), None, call, no_msg))
    assert stop is not None and stop.detail == "s failed fatally: unknown error"
    cond, state = ToolFailure(2), st(step=4)
    soft = ToolResult.failure("503")
    p = Checkpoint(T, state, None, call, soft)
    assert cond.check(p) is None
    cond.observe(p)
    stop = cond.check(p)
    assert stop is not None and stop.detail == "s failed 2 times in a row: 503" and stop.step == 4
    assert ToolFailure(1).check(Checkpoint(T, st(), None, call, ToolResult(ok=False))) is not None
    one = ToolFailure(1).check(Checkpoint(T, st(), None, call, ToolResult(ok=False)))
    assert one is not None and one.detail == "s failed 1 times in a row: unknown error"
    cond.observe(Checkpoint(T, state, None, call, ToolResult.success(1)))
    assert cond.check(p) is None  # a success resets it
    assert ToolFailure(1).check(Checkpoint(A, st(), None, call, soft)) is None


def test_escalation_only_on_an_escalate_action() -> None:
    stop = EscalationRequested().check(Checkpoint(A, st(step=6), Escalate("which source?")))
    assert stop is not None and stop.detail == "the agent escalated" and stop.step == 6
    assert stop.question == "which source?"
    assert EscalationRequested().check(Checkpoint(B, st(), Escalate("q"))) is None
    assert EscalationRequested().check(Checkpoint(A, st(), Finish(1))) is None


def test_user_condition_helper_builds_typed_stops() -> None:
    class Mine(StopCondition):
        name = "mine"

        def check(self, point: Checkpoint):  # type: ignore[no-untyped-def]
            return self._stop(R.POLICY_BLOCK, point, "no", question="ok?")

    stop = Mine().check(Checkpoint(B, st(step=9)))
    assert stop is not None and stop.step == 9 and stop.question == "ok?" and stop.kind == "Mine"
    assert Mine().observe(Checkpoint(B, st())) is None


def test_stalled_state_counts_results_that_left_the_state_unchanged() -> None:
    from runner.control import StalledState

    assert StalledState(2).results == 2
    with pytest.raises(ValueError) as e:
        StalledState(1)
    assert str(e.value) == "StalledState.results must be >= 2"
    cond, state, call = StalledState(2), st(step=7), ToolCall("s")
    res = ToolResult.success({"x": 1})
    point = Checkpoint(T, state, None, call, res)
    assert cond.check(Checkpoint(A, state, None, call, res)) is None  # wrong phase
    assert cond.check(Checkpoint(T, state, None, call, None)) is None  # no result
    cond.observe(Checkpoint(A, state, None, call, res))
    assert state.scratch(cond) == {}
    assert cond.check(point) is None  # the first result is news
    cond.observe(point)
    assert cond.check(point) is None  # one unchanged result: streak 1 of 2
    cond.observe(point)
    stop = cond.check(point)
    assert stop is not None and stop.step == 7 and stop.reason is R.NO_PROGRESS
    assert stop.detail == "2 tool results in a row left the run state unchanged"
    state.data["y"] = 2  # the state changed: the streak starts again
    assert cond.check(point) is None
    cond.observe(point)
    assert cond.check(point) is None


def test_stalled_state_compares_states_that_are_not_json() -> None:
    from runner.control import StalledState

    cond, state, call = StalledState(2), st(), ToolCall("s")
    point = Checkpoint(T, state, None, call, ToolResult.success(1))
    for i in range(4):  # a value that is not JSON, changing every step: never stalled
        state.data["obj"] = type(f"T{i}", (), {})
        state.data["a"] = 1
        assert cond.check(point) is None
        cond.observe(point)
    cond.observe(point)
    assert cond.check(point) is not None  # unchanged now


def test_a_finish_check_that_raises_ends_the_run_naming_it() -> None:
    from runner.control import Budget, Finish, RunController

    def boom(state: RunState, out: object) -> bool:
        raise ValueError("bad value\nmore")

    def silent(state: RunState, out: object) -> bool:
        raise ValueError

    for validate, detail in ((boom, "validate raised ValueError: bad value"),
                             (silent, "validate raised ValueError")):
        ctl = RunController(Budget(max_steps=3, max_tokens=10), validate=validate)
        state = ctl.start("t")
        ctl.check_before_model(state)
        stop = ctl.on_finish(state, Finish(1))
        assert stop is not None and stop.reason == "internal_error" and stop.detail == detail
        assert stop.condition.name == "user_code[validate]" and state.trace == []
        assert ctl.check_before_model(state) is stop


# -- exact refusals and progress measured on the folded state (pinned against mutants) ------------
def test_allof_refusals_name_each_member_and_its_checkpoints() -> None:
    from runner.control import MaxTokens, ToolCallLimit

    with pytest.raises(ValueError) as e:
        AllOf(MaxSteps(2), reason=StopReason.GOAL_MET)
    assert str(e.value) == "AllOf cannot end a run with goal_met (only a checked finish can)"
    with pytest.raises(ValueError) as n:
        AllOf(MaxSteps(2), ToolCallLimit(1), MaxTokens(5))
    assert str(n.value) == (
        "AllOf members never fire at the same checkpoint: max_steps=2 (before_model), "
        "tool_limit[*]=1 (on_action), max_tokens=5 (after_tool/before_model/on_action); "
        "combine them with | or check them separately")


def test_a_repeated_call_is_named_with_its_arguments_cut_at_sixty_characters() -> None:
    from runner.control import RepeatedAction, RunState, ToolCall

    state = RunState("r", "t")
    cond = RepeatedAction(repeats=2)
    call = ToolCall("search", {"q": "x" * 80})
    point = Checkpoint(Phase.ON_ACTION, state, action=call)
    cond.observe(point)
    stop = cond.check(point)
    assert stop is not None
    args = '{"q":"' + "x" * 53 + "…"
    assert len(args) == 60
    assert stop.detail == f"search({args}) proposed 2 times with no change"


def test_the_state_digest_of_non_json_state_ignores_insertion_order() -> None:
    from runner.control import RunState
    from runner.control._conditions import _state_digest

    a, b = RunState("r", "t"), RunState("r", "t")
    a.data.update({"x": {1}, "y": {1}, 3: {2}})
    b.data.update({3: {2}, "y": {1}, "x": {1}})
    assert _state_digest(a) == _state_digest(b)
    b.data["x"] = {2}
    assert _state_digest(a) != _state_digest(b)


def test_stalled_state_judges_only_tool_results() -> None:
    from runner.control import RunState, StalledState, ToolCall, ToolResult

    state = RunState("r", "t")
    cond = StalledState(results=2)
    call, res = ToolCall("get"), ToolResult.success(1)
    after = Checkpoint(Phase.AFTER_TOOL, state, action=call, call=call, result=res)
    for _ in range(2):
        cond.observe(after)
    # the first result set the state, the second left it unchanged: a third unchanged result
    # makes two in a row and stops the run...
    stop = cond.check(after)
    assert stop is not None and stop.detail == "2 tool results in a row left the run state unchanged"
    # ...but nothing else is judged: not an action, not a checkpoint without a result
    assert cond.check(Checkpoint(Phase.ON_ACTION, state, action=call, call=call, result=res)) is None
    assert cond.check(Checkpoint(Phase.AFTER_TOOL, state, action=call, call=call)) is None


# -- construction-time refusals -------------------------------------------------------------------
def test_allof_cannot_claim_goal_met() -> None:
    with pytest.raises(ValueError, match="goal_met"):
        AllOf(MaxSteps(2), reason=StopReason.GOAL_MET)


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
