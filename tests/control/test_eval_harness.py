"""The eval harness's own plumbing, pinned by what a user sees: which scripted result each call
gets and when a delay bites, what a grounded finish check tells the agent, what reaches your own
``decide``, the problems a faulty controller is reported with, and what ``capture_case`` writes
for the rarer records (timed budgets, structured tasks, trimmed records, keys on the last call).
Written for the survivors of the mutation run over the eval modules (tests/control/mutation.py)."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest

from runner.control import (
    Budget,
    CaseResult,
    Escalate,
    EvalCase,
    EvalCaseError,
    Finish,
    Guard,
    Invalid,
    RunController,
    RunState,
    SideEffectRule,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
    capture_case,
    run_case,
)
from runner.control._errors import NoFinalOutput, UnmeteredUsage
from tests.control.conftest import merge, script, tools


def case(**kw: Any) -> dict[str, Any]:
    return {"format": "ect.stop-eval/1", "id": "c", "task": "t", "expect_stop": "goal_met",
            "finish_check": {"verdicts": [True]},
            "agent": {"turns": [{"finish": 1}]}, **kw}


def load(**kw: Any) -> EvalCase:
    return EvalCase.from_json(case(**kw))


# -- scripted tools -------------------------------------------------------------------------

def test_an_unknown_tool_fails_with_its_name() -> None:
    res = run_case(load(expect_stop="tool_error",
                        agent={"turns": [{"call": {"tool": "nope"}}]}))
    assert (res.passed, res.stop_detail) == (True, "nope failed 2 times in a row: no such tool: nope")


def test_scripted_results_are_served_in_order_and_the_last_repeats() -> None:
    # what the agent sees in the folded state before each decision, calling ``get`` four times
    # (different arguments each time) against three scripted results
    seen: list[dict[str, Any]] = []

    def decide(state: RunState) -> Any:
        seen.append(dict(state.data))
        return ToolCall("get", {"i": state.step}) if state.step < 4 else Finish("done")

    results = [{"data": {"n": 1}}, {"data": {"n": 2}}, {"data": {"n": 3}}]
    res = run_case(load(tools={"get": {"results": results}}, expect_tools=["get"] * 4),
                   decide=decide)
    assert res.passed, res.failure_line()
    assert seen == [{}, {"n": 1}, {"n": 2}, {"n": 3}, {"n": 3}]


def test_each_call_waits_its_own_scripted_delay() -> None:
    # the first call is quick, the second takes 2 s: the 0.05 s tool timeout cancels it
    slow = {"get": {"results": [{"data": {"a": 1}}, {"data": {"b": 2}, "delay_s": 2}]}}
    res = run_case(load(expect_stop="time_budget", expect_kind="ToolTimeout", expect_steps=2,
                        expect_tools=["get"], tools=slow,
                        budget={"max_steps": 5, "max_tokens": 100, "tool_timeout_s": 0.05},
                        agent={"turns": [{"call": {"tool": "get", "args": {"i": 1}}},
                                         {"call": {"tool": "get", "args": {"i": 2}}}]}))
    assert res.passed, res.failure_line()
    assert res.stop_detail == "get ran past its 0.05-second timeout and was cancelled"
    # the delay follows the call count: with the slow result first, the first call times out
    first = {"get": {"results": [{"data": {"b": 2}, "delay_s": 2}, {"data": {"a": 1}}]}}
    res = run_case(load(expect_stop="time_budget", expect_steps=1, expect_tools=[], tools=first,
                        budget={"max_steps": 5, "max_tokens": 100, "tool_timeout_s": 0.05},
                        agent={"turns": [{"call": {"tool": "get"}}]}))
    assert res.passed, res.failure_line()


# -- finish checks ----------------------------------------------------------------------------

def test_a_grounded_finish_check_tells_the_agent_which_keys_are_not_backed() -> None:
    directives: list[str] = []
    plays = [Finish("text"), Finish({"v": 1}), ToolCall("get"), Finish({"v": 1, "w": 3}),
             Finish({"w": 2}), Finish({"v": 1, "w": 2})]

    def decide(state: RunState) -> Any:
        directives.append(state.directive.text if state.directive is not None else "")
        return plays[state.step]

    res = run_case(load(finish_check={"require": ["v", "w"]}, expect_steps=6,
                        tools={"get": {"results": [{"data": {"v": 1, "w": 2}}]}}), decide=decide)
    assert res.passed, res.failure_line()
    miss = "Not done yet. Still missing: "
    assert directives == [
        "",
        f"Your finish was not accepted: the output is not an object. {miss}v, w.",
        f"Your finish was not accepted: not backed by a tool result: v, w. {miss}v, w.",
        "",  # a tool call clears the directive
        f"Your finish was not accepted: not backed by a tool result: w. {miss}w.",
        f"Your finish was not accepted: not backed by a tool result: v. {miss}v.",
    ]


def test_a_grounded_finish_adds_nothing_when_only_a_rule_is_missing() -> None:
    directives: list[str] = []
    plays = [ToolCall("get"), Finish({"v": 1}), ToolCall("more"), Finish({"v": 1})]

    def decide(state: RunState) -> Any:
        directives.append(state.directive.text if state.directive is not None else "")
        return plays[state.step]

    res = run_case(load(finish_check={"require": ["v"]}, expect_steps=4,
                        rules=[{"name": "r", "require": ["u"]}],
                        tools={"get": {"results": [{"data": {"v": 1}}]},
                               "more": {"results": [{"data": {"u": 0}}]}}), decide=decide)
    assert res.passed, res.failure_line()
    assert directives[2] == "Your finish was not accepted. Not done yet. Still missing: u."


def test_a_recorded_accepting_verdict_repeats_after_a_rule_rejected_the_finish() -> None:
    # the finish check said yes, a rule still missed v; the next finish gets the last verdict
    res = run_case(load(finish_check={"verdicts": [True]}, expect_steps=3,
                        rules=[{"name": "r", "require": ["v"]}],
                        tools={"get": {"results": [{"data": {"v": 1}}]}},
                        agent={"turns": [{"finish": 1}, {"call": {"tool": "get"}},
                                         {"finish": 2}]}))
    assert res.passed, res.failure_line()
    assert res.stop_detail == "the finish passed every check"


@pytest.mark.parametrize(("field", "value", "message"), [
    ("max_seconds", -1, "$.budget.max_seconds: must be >= 0"),
    ("tool_timeout_s", "1", "$.budget.tool_timeout_s: must be a number"),
])
def test_a_time_limit_that_is_not_a_positive_number_is_named(field: str, value: Any,
                                                             message: str) -> None:
    with pytest.raises(EvalCaseError) as e:
        load(budget={"max_steps": 3, "max_tokens": 9, field: value})
    assert str(e.value) == f"<case>: {message}"


# -- your own agent -------------------------------------------------------------------------

def test_your_agent_sees_the_case_id_as_run_id_and_the_case_task() -> None:
    seen: list[tuple[str, Any]] = []

    def decide(state: RunState) -> Any:
        seen.append((state.run_id, state.task))
        return Finish(1)

    c = EvalCase.from_json(case(id="refund-42", task="Refund order 42"))
    assert run_case(c, decide=decide).passed
    assert seen == [("refund-42", "Refund order 42")]


def test_only_the_unmetered_usage_warning_is_silenced() -> None:
    def decide(state: RunState) -> Any:  # a plain action: no usage reported (UnmeteredUsage)
        warnings.warn("your agent's own warning", UserWarning, stacklevel=1)
        return Finish(1)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_case(load(), decide=decide).passed
    assert [(w.category, str(w.message)) for w in caught] == [
        (UserWarning, "your agent's own warning")]
    assert not any(issubclass(w.category, UnmeteredUsage) for w in caught)


# -- what a case reports ----------------------------------------------------------------------

def test_an_output_check_on_a_run_that_never_finished() -> None:
    res = run_case(load(expect_output={"equals": 1}, budget={"max_steps": 1, "max_tokens": 9},
                        agent={"turns": [{"call": {"tool": "get"}}]},
                        tools={"get": {"results": [{"data": {}}]}}))
    assert res.to_json()["output_ok"] is False
    assert res.output_detail == "no output: the run stopped with step_budget"
    assert res.failure_line() == ("FAIL c: stopped with step_budget (MaxSteps: used all 1 steps "
                                  "without a validated result), expected goal_met")


def test_a_case_without_an_output_check_has_an_empty_output_detail() -> None:
    assert run_case(load()) == CaseResult("c", "<case>", StopReason.GOAL_MET, StopReason.GOAL_MET,
                                          "FinishGate", "the finish passed every check", None, "")


def test_the_wrong_kind_of_stop_and_every_forbidden_tool_are_named() -> None:
    res = run_case(load(expect_stop="step_budget", expect_kind="MaxTime",
                        expect_not_run=["a", "b"], budget={"max_steps": 2, "max_tokens": 9},
                        tools={"a": {"results": [{"data": {}}]}, "b": {"results": [{"data": {}}]}},
                        agent={"turns": [{"call": {"tool": "a"}}, {"call": {"tool": "b"}}]}))
    assert res.problems == ("executed a, b, which must not run", "stopped by MaxSteps, expected MaxTime")


@dataclasses.dataclass
class _Stopped:
    kind: str = "MaxSteps"
    detail: str = "used all 1 steps"


class _Leaky:
    """A run result as a faulty controller could return it: stopped, yet with an output."""

    completed = False
    reason = StopReason.STEP_BUDGET
    steps = 1
    handoff = None
    stop = _Stopped()

    @property
    def output(self) -> Any:
        return {"answer": 42}

    def to_json(self) -> dict[str, Any]:
        return {"output": {"answer": 42}}


class _Sealed(_Leaky):
    @property
    def output(self) -> Any:
        raise NoFinalOutput("no output")

    def to_json(self) -> dict[str, Any]:
        return {}


class _Faulty(RunController):
    def __init__(self, result: Any) -> None:
        super().__init__(Budget(max_steps=1, max_tokens=9, max_seconds=1), validate=lambda s, o: True)
        self.result = result

    async def arun(self, *args: Any, **kw: Any) -> Any:
        return self.result


def test_a_controller_that_leaks_an_output_on_a_non_goal_stop_fails_the_case() -> None:
    c = dataclasses.replace(load(expect_stop="step_budget"), controller=_Faulty(_Leaky()))
    res = run_case(c)
    assert res.problems == ('a step_budget stop carried an output ({"answer":42})',
                            "a step_budget stop's record carries an output",
                            "a step_budget stop has no handoff package")
    assert not res.passed
    res = run_case(dataclasses.replace(c, controller=_Faulty(_Sealed())))
    assert res.problems == ("a step_budget stop has no handoff package",)


# -- capture_case -----------------------------------------------------------------------------

def record(budget: Budget | None = None, task: Any = "Find v", **run: Any) -> dict[str, Any]:
    ctl = RunController(budget or Budget(max_steps=4, max_tokens=100), fold=merge,
                        validate=lambda s, o: o == {"v": 1})
    decide = run.pop("decide", script(Turn(ToolCall("get", {"q": 1}), tokens=3),
                                      Turn(Finish({"v": 1}), tokens=2)))
    execute = tools({"get": ToolResult.success({"v": 1})})
    return ctl.run(task, decide, execute, run_id="r-1").to_json()


def test_capture_of_a_timed_run_keeps_its_time_limits() -> None:
    rec = record(Budget(max_steps=4, max_tokens=100, max_seconds=30, tool_timeout_s=2))
    c = capture_case(rec)
    assert c["budget"] == {"max_steps": 4, "max_tokens": 100, "max_seconds": 30, "tool_timeout_s": 2,
                           "tool_limits": {"default": 8, "per_tool": {}, "side_effect_default": 1}}
    assert run_case(EvalCase.from_json(c)).passed


def test_capture_of_a_structured_task_keeps_300_characters() -> None:
    c = capture_case(record(task={"ask": "x" * 400}))
    assert c["task"] == '{"ask":"' + "x" * 291 + "…"
    assert len(c["task"]) == 300


def test_capture_of_a_trimmed_record_fills_in_what_is_only_descriptive() -> None:
    rec = record(decide=script(Turn(ToolCall("get", {"q": 1}), tokens=3),
                               Turn(Invalid("bad"), tokens=1),
                               Turn(Finish({"v": 1}), tokens=2)))
    for t in rec["trace"]:
        t.pop("note")
    del rec["stop"]["detail"], rec["stop"]["condition"], rec["controls"]["budget"]["tool_limits"]
    c = capture_case(rec, expect="goal_met")
    assert c["description"] == "captured from run r-1, which stopped goal_met: "
    assert c["budget"] == {"max_steps": 4, "max_tokens": 100, "tool_limits": {}}
    assert c["agent"]["turns"][1] == {"invalid": "", "tokens": 1}
    # without the stop's condition the accepting verdict is unknown: none is replayed
    assert c["finish_check"] == {"verdicts": [False]}


def test_capture_replays_no_verdict_it_did_not_see() -> None:
    # goal_met by a stop_early rule, never by a checked finish: the replay accepts no finish
    rule = StoppingRule("known", {"v": lambda s: "v" in s.data}, output=lambda s: s.data["v"])
    ctl = RunController(Budget(max_steps=4, max_tokens=100), fold=merge, rules=[rule],
                        validate=lambda s, o: True)
    rec = ctl.run("t", script(ToolCall("get", {})), tools({"get": ToolResult.success({"v": 1})}),
                  run_id="r-2").to_json()
    assert rec["stop"]["reason"] == "goal_met"
    c = capture_case(rec)
    assert c["finish_check"] == {"verdicts": [False]}
    # so an agent that finishes at once instead is refused when the case is replayed
    res = run_case(EvalCase.from_json(c), decide=lambda s: Finish(1))
    assert res.observed is StopReason.NO_PROGRESS


def test_capture_keeps_the_idempotency_key_of_the_last_call() -> None:
    # the refund runs at the last step (then the step budget ends the run); its key was passed
    # as ToolCall.idempotency_key, which the trace does not keep but the last action does
    guard = Guard(allow={"refund"}, side_effects={"refund": SideEffectRule()})
    ctl = RunController(Budget(max_steps=1, max_tokens=100), guard=guard, fold=merge,
                        validate=lambda s, o: True)
    rec = ctl.run("t", script(ToolCall("refund", {"amount": 3}, idempotency_key="k1")),
                  tools({"refund": ToolResult.success({})}), run_id="r-3").to_json()
    assert (rec["stop"]["reason"], rec["tool_calls"]) == ("step_budget", 1)
    c = capture_case(rec)
    assert c["agent"]["turns"] == [
        {"call": {"tool": "refund", "args": {"amount": 3}, "idempotency_key": "k1"}}]
    res = run_case(EvalCase.from_json(c))  # without the key: policy_block, refund never runs
    assert res.passed, res.failure_line()


def test_capture_names_the_record_when_what_it_would_write_cannot_load() -> None:
    rec = record(Budget(max_steps=20_000, max_tokens=100))
    with pytest.raises(EvalCaseError) as e:
        capture_case(rec, source="run.json")
    assert str(e.value) == "run.json: $.budget.max_steps: must be <= 10000"


def test_capture_refuses_a_record_whose_usage_does_not_match_its_steps() -> None:
    rec = record()
    rec["usage"] = rec["usage"][:1]
    with pytest.raises(EvalCaseError) as e:
        capture_case(rec, source="run.json")
    assert str(e.value) == "run.json: $.usage: must hold one [tokens, cost_usd] pair per step (2)"


# -- reading a case ---------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "message"), [
    ({"budget": []}, "$.budget: must be an object"),
    ({"budget": {"max_tokens": 9}}, "$.budget: missing field 'max_steps'"),
    ({"guard": {"side_effects": {}}}, "$.guard: missing field 'allow'"),
    ({"tool_failure": {"streak": 2}}, "$.tool_failure: unknown field 'streak'"),
    ({"finish_check": [True]}, "$.finish_check: must be an object"),
    ({"rules": [{"name": "r", "require": "v"}]}, "$.rules[0].require: must be a list of non-empty strings"),
    ({"budget": {"max_steps": 3, "max_tokens": 9, "tool_limits": {"total": "2"}}},
     "$.budget.tool_limits.total: must be an integer"),
    ({"agent": {"turns": [{"raise": "boom"}, {"finish": 1, "bogus": 1}]}},
     "$.agent.turns[1]: unknown field 'bogus'"),
])
def test_a_malformed_section_is_named_by_its_path(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(EvalCaseError) as e:
        load(**fields)
    assert str(e.value) == f"<case>: {message}"


def test_the_step_ceiling_itself_is_allowed_and_a_total_tool_limit_is_read() -> None:
    c = load(budget={"max_steps": 10_000, "max_tokens": 9, "tool_limits": {"total": 2}})
    assert (c.controller.budget.max_steps, c.controller.budget.tool_limits.total) == (10_000, 2)


def test_turns_take_usage_and_an_escalation_needs_no_findings() -> None:
    c = load(expect_stop="needs_human",
             agent={"turns": [{"call": {"tool": "get", "idempotency_key": "k"}},
                              {"escalate": "which order?", "tokens": 5, "cost_usd": 0.5},
                              {"escalate": "really?", "found": ["order 7"]}]})
    assert c.turns == (Turn(ToolCall("get", idempotency_key="k")),
                       Turn(Escalate("which order?"), 5, 0.5),
                       Turn(Escalate("really?", ("order 7",))))


def test_a_rule_without_stop_early_waits_for_a_finish() -> None:
    res = run_case(load(rules=[{"name": "r", "require": ["v"]}], expect_steps=3,
                        tools={"get": {"results": [{"data": {"v": 1}}]},
                               "log": {"results": [{"data": {}}]}},
                        agent={"turns": [{"call": {"tool": "get"}}, {"call": {"tool": "log"}},
                                         {"finish": 1}]}))
    assert res.passed, res.failure_line()


@pytest.mark.parametrize(("fields", "message"), [
    ({"rules": [{"name": "r", "require": ["v"]}, {"name": "r", "require": ["w"]}]},
     "$: stopping rule names must be unique"),
    # these two escaped as a bare ValueError naming neither the file nor the field
    ({"budget": {"max_steps": 3, "max_cost_usd": 0}}, "$.budget.max_cost_usd: must be > 0"),
    ({"guard": {"allow": ["pay"], "side_effects": {"pay": {"max_amount": 3}}}},
     "$.guard.side_effects.pay: SideEffectRule: an amount limit needs amount_arg"),
])
def test_controls_the_controller_refuses_are_named_in_the_case(fields: dict[str, Any],
                                                                message: str) -> None:
    with pytest.raises(EvalCaseError) as e:
        load(**fields)
    assert str(e.value) == f"<case>: {message}"


def test_the_case_sets_the_no_progress_and_tool_failure_thresholds() -> None:
    same = {"turns": [{"call": {"tool": "get"}}]}
    res = run_case(load(expect_stop="no_progress", expect_steps=2, no_progress={"repeats": 2},
                        tools={"get": {"results": [{"data": {"n": 1}}]}}, agent=same))
    assert res.passed, res.failure_line()
    res = run_case(load(expect_stop="tool_error", expect_steps=1, tool_failure={"consecutive": 1},
                        tools={"get": {"results": [{"ok": False}]}}, agent=same))
    assert res.passed, res.failure_line()


@pytest.mark.parametrize(("fields", "message"), [
    ({"expect_stop": "done"}, "$.expect_stop: must be one of goal_met, step_budget, token_budget, "
     "tool_limit, no_progress, needs_human, tool_error, policy_block, time_budget, internal_error"),
    ({"expect_output": [1]}, "$.expect_output: must be an object"),
    ({"agent": [{"finish": 1}]}, "$.agent: must be an object"),
    ({"expect_tools": [""]}, "$.expect_tools: must be a list of non-empty strings"),
    ({"expect_tools": "get"}, "$.expect_tools: must be a list"),
    ({"expect_steps": True}, "$.expect_steps: must be an integer"),
    ({"tools": {"get": {"results": [{"ok": 1}]}}}, "$.tools.get.results[0].ok: must be a boolean"),
])
def test_a_malformed_top_level_field_is_named(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(EvalCaseError) as e:
        load(**fields)
    assert str(e.value) == f"<case>: {message}"


def test_a_case_that_imports_its_agent_has_no_scripted_turns_and_keeps_its_json() -> None:
    obj = case(agent={"import": "runner.control.evals.agents:follows_directive"},
               expect_stop="tool_error", expect_tools=[])
    c = EvalCase.from_json(obj)
    assert (c.turns, c.agent_import, c.raw, c.expect_tools) == (
        (), "runner.control.evals.agents:follows_directive", obj, ())
    res = run_case(c)  # its first call is a tool the case does not script
    assert res.stop_detail == "get_shipment failed 2 times in a row: no such tool: get_shipment"
    assert res.problems == ("ran tools ['get_shipment', 'get_shipment'], expected []",)
