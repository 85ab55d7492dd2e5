"""Stop-reason evals: did the run end the right way?

Each case is a JSON file (format ``ect.stop-eval/1``) carrying the controls to apply, a scripted
agent (a list of turns: tool calls, finishes, escalations, invalid replies; the last turn repeats
forever, like an agent that never stops on its own), scripted tool results (per tool, consumed
in order, the last one repeating), the expected stop reason and an optional output check. A tiny
interpreter runs each case through :class:`RunController` with no model. The bundled suite
(``runner/control/evals/``) covers every stop reason.

Case fields (unknown fields are refused)::

    format         "ect.stop-eval/1"
    id             unique name
    description    what the case is about (optional)
    task           what the agent was asked
    expect_stop    a StopReason value
    expect_output  optional, only with goal_met: {"equals": value} or {"subset": {...}}
    expect_steps   optional: the number of decisions (model calls) the run took
    expect_tools   optional: the tools executed, in order (deduplicated calls are not executed)
    expect_not_run optional: tools that must never execute (side effects not done)
    expect_kind    optional: the type name of the condition that fired (e.g. "MaxTime")
    budget         {"max_steps", "max_tokens"?, "max_cost_usd"?, "max_seconds"?,
                    "tool_timeout_s"?, "tool_timeouts"?: {tool: seconds}, "tool_limits"?:
                    {"per_tool"?, "default"?, "side_effect_default"?, "total"?}}
    guard          {"allow": [...], "side_effects"?: {tool: {"amount_arg"?, "max_amount"?,
                    "escalate_above"?, "requires_approval"?, "idempotency_arg"?}}, "approvals"?}
    no_progress    {"repeats"?, "empty_results"?, "stalled"?}
    tool_failure   {"consecutive"?}
    kill_switch    optional {"max_spend_per_day_usd"?, "step_reserve_usd"?,
                   "engage_after_calls"?}: the run is admitted by a kill switch (with a daily
                   spend ceiling: on a fresh ledger, a new temporary file every run); with
                   engage_after_calls N its disable flag is raised when the N-th tool call
                   returns (the run must stop at its next check, before another model call)
    expect_spend   optional, with a daily spend ceiling: {"spend_usd", "reserved_usd"} the
                   ledger holds for the day after the run (what was spent, what is still
                   reserved)
    expect_handoff optional, not with goal_met: {"question"?, "found"?, "done"?, "asked"?}
                   fields the handoff package must hold exactly (``HandoffPackage.to_json``)
    calibrated_rule optional {"name", "require": [keys], "confidence_key", "target_error_rate",
                   "labelled": [{"confidence", "correct"}, ...]}: an early-stop rule that
                   holds once the run state's ``confidence_key`` reaches the threshold
                   ``Calibration.measure`` chooses on the labelled runs (each firing saves half
                   of a 4-step run); its output is the required keys' values
    finish_check   {"require": [keys]}: the output must be an object whose listed keys equal the
                   values tools put into the run state (ok tool results that are objects are
                   merged into the state); or {"verdicts": [bool, ...]}: replay recorded
                   verdicts in order, the last repeating (what `ect evals capture` writes)
    rules          [{"name", "require": [keys], "stop_early"?: bool}] predicates "key is known";
                   a stop_early rule ends the run with the known values as output
    tools          {tool: {"results": [{"ok"?, "data"?, "error"?, "fatal"?, "cost_usd"?,
                    "delay_s"?}, ...]}}  (delay_s: the tool takes that long; it is cancelled
                    at a deadline)
    agent          {"turns": [{"call": {"tool", "args"?, "idempotency_key"?}} | {"finish": value}
                    | {"escalate": question, "found"?: [...]} | {"invalid": detail}
                    | {"raise": message}, each optionally with "tokens", "cost_usd",
                    "delay_s" (the model call takes that long) and "elapsed_s" (the case's
                    clock moves on that much, with no real wait)]}
                   or {"import": "package.module:decide"}: your own agent's ``decide``

Time in a case is the controller's clock, the case's own: it starts at 0 and advances only by
the scripted ``delay_s`` (waited for real, cancelled at a deadline) and ``elapsed_s`` (not
waited: the model call is said to take that long), so a time budget is judged exactly (two
30-second model calls use a 60-second budget to the second). Deadlines still cancel work in
flight in real time. With an agent of your own, its real time counts as well.

Whatever the case expects, a run that did not end ``goal_met`` must carry no output (reading it
raises ``NoFinalOutput``) and must carry a handoff package; a case fails otherwise.
"""

from __future__ import annotations

import copy
import functools
import importlib
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from runner.canonical import canonical_bytes, load_strict_file
from runner.control._budget import Budget, ToolLimits
from runner.control._calibration import Calibration, LabelledRun, RunCost
from runner.control._conditions import NoProgressDetector, ToolFailure
from runner.control._controller import RunController
from runner.control._errors import EvalCaseError, NoFinalOutput, UnmeteredUsage
from runner.control._guards import Guard, SideEffectRule
from runner.control._killswitch import KillSwitch
from runner.control._rules import StoppingRule
from runner.control._types import (
    Action,
    Escalate,
    Finish,
    Invalid,
    PredicateReport,
    RunState,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
    display,
)
from runner.errors import ControlError, FormatError

__all__ = [
    "BUNDLED_EVALS",
    "EVAL_FORMAT",
    "CaseResult",
    "EvalCase",
    "EvalReport",
    "capture_case",
    "import_agent",
    "load_cases",
    "run_case",
    "run_evals",
]

EVAL_FORMAT = "ect.stop-eval/1"
BUNDLED_EVALS = "runner.control/evals"  # resolved with importlib.resources
_DEFAULT_BUDGET = {"max_steps": 12, "max_tokens": 60_000}


class _Reader:
    """Strict field access that names the file and field path in every error."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, msg: str) -> EvalCaseError:
        return EvalCaseError(f"{self.source}: {path}: {msg}")

    def has(self, value: Any, path: str, required: Sequence[str]) -> dict[str, Any]:
        """``value`` as an object holding every ``required`` field (the first one missing, in
        that order, is named); other fields are left alone."""
        if not isinstance(value, dict):
            raise self.fail(path, "must be an object")
        for key in required:
            if key not in value:
                raise self.fail(path, f"missing field {key!r}")
        return value

    def obj(self, value: Any, path: str, required: set[str], optional: set[str]) -> dict[str, Any]:
        """An object with every ``required`` field and nothing beyond ``optional``."""
        out = self.has(value, path, sorted(required))
        unknown = set(out) - required - optional
        if unknown:
            raise self.fail(path, f"unknown field {sorted(unknown)[0]!r}")
        return out

    def typed(self, value: Any, path: str, kind: type | tuple[type, ...], what: str) -> Any:
        # a bool is an int to isinstance; it passes only where a boolean is asked for
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.fail(path, f"must be {what}")
        return value

    def str_list(self, value: Any, path: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(path, "must be a list of non-empty strings")
        return tuple(value)

    def reason(self, value: Any, path: str) -> StopReason:
        try:
            return StopReason(value)
        except ValueError:
            raise self.fail(path, "must be one of " + ", ".join(StopReason)) from None

    def count(self, value: Any, path: str, minimum: int = 0) -> int:
        n = self.typed(value, path, int, "an integer")
        if n < minimum:
            raise self.fail(path, f"must be >= {minimum}")
        return int(n)

    def number(self, value: Any, path: str) -> float:
        x = self.typed(value, path, (int, float), "a number")
        if x < 0:
            raise self.fail(path, "must be >= 0")
        return float(x)


class _CaseClock:
    """The controller's clock in a case (its controller is built with it): the seconds the case
    says have passed, the scripted ``delay_s`` and ``elapsed_s`` (``advance``), exactly, so a
    time budget's boundary is judged to the second whatever the machine's load; with an agent
    of your own (``real``), plus the real seconds since the run started, which its calls take.
    Real deadlines still cancel work in flight. ``restart`` before every run."""

    def __init__(self) -> None:
        self.offset = 0.0
        self._start: float | None = None

    def restart(self, *, real: bool) -> None:
        self.offset = 0.0
        self._start = time.monotonic() if real else None

    def __call__(self) -> float:
        real = 0.0 if self._start is None else time.monotonic() - self._start
        return self.offset + real

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass(frozen=True)
class EvalCase:
    """A parsed eval case. ``raw`` keeps the JSON object it came from."""

    case_id: str
    source: str
    description: str
    task: str
    expect_stop: StopReason
    expect_output: dict[str, Any] | None
    controller: RunController
    turns: tuple[Turn | str, ...]  # a str: decide raises RuntimeError(str)
    tool_results: dict[str, tuple[ToolResult, ...]]
    raw: dict[str, Any]
    expect_steps: int | None = None
    expect_tools: tuple[str, ...] | None = None
    expect_not_run: tuple[str, ...] = ()
    expect_kind: str | None = None
    agent_import: str | None = None
    delays: dict[str, tuple[float, ...]] = field(default_factory=dict)  # per tool, per call
    turn_delays: tuple[float, ...] = ()  # per turn: how long the model call takes
    kill_switch: dict[str, float] | None = None  # KillSwitch arguments (a fresh ledger per run)
    expect_spend: dict[str, float] | None = None  # the day's {spend_usd, reserved_usd} after
    turn_elapsed: tuple[float, ...] = ()  # per turn: seconds the case's clock moves on
    expect_handoff: dict[str, Any] | None = None  # handoff fields that must match exactly
    clock: _CaseClock = field(default_factory=_CaseClock)  # the controller's clock

    @classmethod
    def from_json(cls, obj: Any, source: str = "<case>") -> EvalCase:
        r = _Reader(source)
        top = r.obj(obj, "$", {"format", "id", "task", "expect_stop", "agent"},
                    {"description", "expect_output", "budget", "guard", "no_progress",
                     "tool_failure", "finish_check", "rules", "tools", "expect_steps",
                     "expect_tools", "expect_not_run", "expect_kind", "kill_switch",
                     "expect_spend", "expect_handoff", "calibrated_rule"})
        if top["format"] != EVAL_FORMAT:
            raise r.fail("$.format", f"must be {EVAL_FORMAT!r}")
        case_id = r.typed(top["id"], "$.id", str, "a string")
        task = r.typed(top["task"], "$.task", str, "a string")
        description = r.typed(top.get("description", ""), "$.description", str, "a string")
        expect = r.reason(top["expect_stop"], "$.expect_stop")
        expect_output = None
        if "expect_output" in top:
            eo = r.obj(top["expect_output"], "$.expect_output", set(), {"equals", "subset"})
            if len(eo) != 1:
                raise r.fail("$.expect_output", "needs exactly one of 'equals' or 'subset'")
            if "subset" in eo:
                r.typed(eo["subset"], "$.expect_output.subset", dict, "an object")
            if expect is not StopReason.GOAL_MET:
                raise r.fail("$.expect_output", "only a goal_met case has an output to check")
            expect_output = eo
        clock = _CaseClock()
        controller = _controller(r, top, clock)
        agent = r.obj(top["agent"], "$.agent", set(), {"turns", "import"})
        if len(agent) != 1:
            raise r.fail("$.agent", "needs exactly one of 'turns' or 'import'")
        agent_import = None
        turns: tuple[Turn | str, ...] = ()
        turn_delays: tuple[float, ...] = ()
        turn_elapsed: tuple[float, ...] = ()
        if "import" in agent:
            agent_import = r.typed(agent["import"], "$.agent.import", str, "a string")
            if agent_import.count(":") != 1:
                raise r.fail("$.agent.import", "must be 'package.module:function'")
        else:
            turns, turn_delays, turn_elapsed = _turns(r, agent)
        tools, delays = _tools(r, top.get("tools", {}))
        steps = (r.count(top["expect_steps"], "$.expect_steps")
                 if "expect_steps" in top else None)
        ran = (r.str_list(r.typed(top["expect_tools"], "$.expect_tools", list, "a list"),
                          "$.expect_tools") if "expect_tools" in top else None)
        not_run = (r.str_list(top["expect_not_run"], "$.expect_not_run")
                   if "expect_not_run" in top else ())
        kind = (r.typed(top["expect_kind"], "$.expect_kind", str, "a string")
                if "expect_kind" in top else None)
        switch = None
        if "kill_switch" in top:
            k = r.obj(top["kill_switch"], "$.kill_switch", set(),
                      {"max_spend_per_day_usd", "step_reserve_usd", "engage_after_calls"})
            if not k:
                raise r.fail("$.kill_switch", "needs max_spend_per_day_usd or engage_after_calls")
            if "step_reserve_usd" in k and "max_spend_per_day_usd" not in k:
                raise r.fail("$.kill_switch.step_reserve_usd", "needs max_spend_per_day_usd")
            switch = {f: (float(r.count(v, f"$.kill_switch.{f}")) if f == "engage_after_calls"
                          else _positive(r, v, f"$.kill_switch.{f}")) for f, v in k.items()}
        spend = None
        if "expect_spend" in top:
            if switch is None or "max_spend_per_day_usd" not in switch:
                raise r.fail("$.expect_spend", "needs a kill_switch with max_spend_per_day_usd "
                             "(its ledger holds the spend)")
            e = r.obj(top["expect_spend"], "$.expect_spend", {"spend_usd", "reserved_usd"}, set())
            spend = {f: r.number(e[f], f"$.expect_spend.{f}") for f in e}
        handoff = None
        if "expect_handoff" in top:
            if expect is StopReason.GOAL_MET:
                raise r.fail("$.expect_handoff", "a goal_met run has no handoff")
            handoff = r.obj(top["expect_handoff"], "$.expect_handoff", set(),
                            {"question", "found", "done", "asked"})
            for f in ("question", "asked"):
                if f in handoff:
                    r.typed(handoff[f], f"$.expect_handoff.{f}", str, "a string")
            for f in ("found", "done"):
                if f in handoff:
                    handoff[f] = list(r.str_list(handoff[f], f"$.expect_handoff.{f}"))
        return cls(case_id, source, description, task, expect, expect_output, controller,
                   turns, tools, top, steps, ran, not_run, kind, agent_import, delays,
                   turn_delays, switch, spend, turn_elapsed, handoff, clock)


MAX_EVAL_STEPS = 10_000
"""An eval case is a scripted run of a few dozen steps; a step budget above this ceiling is
refused, so a hostile case file cannot make ``ect evals run`` run without end."""

MAX_EVAL_SECONDS = 300.0
"""Every eval case runs under a wall-clock budget: its own ``max_seconds`` (at most this), or
this when it names none, so a hung agent or tool ends the case as ``time_budget`` instead of
hanging ``ect evals run``."""


def _at_most(r: _Reader, n: int, path: str, ceiling: int) -> int:
    if n > ceiling:
        raise r.fail(path, f"must be <= {ceiling}")
    return n


def _at_most_s(r: _Reader, x: float, path: str) -> float:
    if x > MAX_EVAL_SECONDS:
        raise r.fail(path, f"must be <= {MAX_EVAL_SECONDS:g}")
    return x


def _controller(r: _Reader, top: dict[str, Any], clock: _CaseClock) -> RunController:
    b = r.obj(top.get("budget", _DEFAULT_BUDGET), "$.budget", {"max_steps"},
              {"max_tokens", "max_cost_usd", "tool_limits", "max_seconds", "tool_timeout_s",
               "tool_timeouts"})
    tl = r.obj(b.get("tool_limits", {}), "$.budget.tool_limits", set(),
               {"per_tool", "default", "side_effect_default", "total"})
    per_tool = r.typed(tl.get("per_tool", {}), "$.budget.tool_limits.per_tool", dict, "an object")
    limits = ToolLimits(
        per_tool={k: r.count(v, f"$.budget.tool_limits.per_tool.{k}") for k, v in per_tool.items()},
        default=r.count(tl.get("default", 8), "$.budget.tool_limits.default"),
        side_effect_default=r.count(tl.get("side_effect_default", 1),
                                    "$.budget.tool_limits.side_effect_default"),
        total=(r.count(tl["total"], "$.budget.tool_limits.total") if "total" in tl else None),
    )
    if "max_tokens" not in b and "max_cost_usd" not in b:
        raise r.fail("$.budget", "needs max_tokens or max_cost_usd")
    budget = Budget(
        max_steps=_at_most(r, r.count(b["max_steps"], "$.budget.max_steps", 1),
                           "$.budget.max_steps", MAX_EVAL_STEPS),
        max_tokens=r.count(b["max_tokens"], "$.budget.max_tokens", 1) if "max_tokens" in b else None,
        max_cost_usd=(_positive(r, b["max_cost_usd"], "$.budget.max_cost_usd")
                      if "max_cost_usd" in b else None),
        tool_limits=limits,
        max_seconds=(_at_most_s(r, _positive(r, b["max_seconds"], "$.budget.max_seconds"),
                                "$.budget.max_seconds")
                     if "max_seconds" in b else MAX_EVAL_SECONDS),
        tool_timeout_s=(_positive(r, b["tool_timeout_s"], "$.budget.tool_timeout_s")
                        if "tool_timeout_s" in b else None),
        tool_timeouts={k: _positive(r, v, f"$.budget.tool_timeouts.{k}") for k, v in
                       r.typed(b.get("tool_timeouts", {}), "$.budget.tool_timeouts", dict,
                               "an object").items()},
    )
    guard = None
    if "guard" in top:
        g = r.obj(top["guard"], "$.guard", {"allow"}, {"side_effects", "approvals"})
        side: dict[str, SideEffectRule] = {}
        se = r.typed(g.get("side_effects", {}), "$.guard.side_effects", dict, "an object")
        for tool, spec in se.items():
            p = f"$.guard.side_effects.{tool}"
            s = r.obj(spec, p, set(), {"amount_arg", "max_amount", "escalate_above",
                                       "requires_approval", "idempotency_arg"})
            max_amount = r.number(s["max_amount"], p + ".max_amount") if "max_amount" in s else None
            escalate_above = (r.number(s["escalate_above"], p + ".escalate_above")
                              if "escalate_above" in s else None)
            requires_approval = r.typed(s.get("requires_approval", False),
                                        p + ".requires_approval", bool, "a boolean")
            amount_arg = r.typed(s.get("amount_arg"), p + ".amount_arg", (str, type(None)),
                                 "a string")
            idempotency_arg = r.typed(s.get("idempotency_arg", "idempotency_key"),
                                      p + ".idempotency_arg", (str, type(None)), "a string")
            try:
                side[tool] = SideEffectRule(
                    amount_arg=amount_arg, max_amount=max_amount,
                    escalate_above=escalate_above, requires_approval=requires_approval,
                    idempotency_arg=idempotency_arg)
            except ValueError as e:
                raise r.fail(p, str(e)) from None
        try:
            guard = Guard(allow=frozenset(r.str_list(g["allow"], "$.guard.allow")),
                          side_effects=side,
                          approvals=frozenset(r.str_list(g.get("approvals", []), "$.guard.approvals")))
        except ValueError as e:
            raise r.fail("$.guard", str(e)) from None
    np_ = r.obj(top.get("no_progress", {}), "$.no_progress", set(),
                {"repeats", "empty_results", "stalled"})
    tf = r.obj(top.get("tool_failure", {}), "$.tool_failure", set(), {"consecutive"})
    try:
        no_progress = NoProgressDetector(
            repeats=r.count(np_.get("repeats", 3), "$.no_progress.repeats"),
            empty_results=r.count(np_.get("empty_results", 3), "$.no_progress.empty_results"),
            stalled=(r.count(np_["stalled"], "$.no_progress.stalled")
                     if "stalled" in np_ else None))
        tool_failure = ToolFailure(r.count(tf.get("consecutive", 2), "$.tool_failure.consecutive"))
    except ValueError as e:
        raise r.fail("$.no_progress/$.tool_failure", str(e)) from None
    rules: list[StoppingRule] = []
    for i, spec in enumerate(r.typed(top.get("rules", []), "$.rules", list, "a list")):
        p = f"$.rules[{i}]"
        s = r.obj(spec, p, {"name", "require"}, {"stop_early"})
        keys = r.str_list(s["require"], p + ".require")
        if not keys:
            raise r.fail(p + ".require", "must not be empty")
        early = r.typed(s.get("stop_early", False), p + ".stop_early", bool, "a boolean")
        rules.append(StoppingRule(
            r.typed(s["name"], p + ".name", str, "a string"),
            {k: _known(k) for k in keys},
            output=_known_values(keys) if early else None,
        ))
    if "calibrated_rule" in top:
        rules.append(_calibrated(r, top["calibrated_rule"]))
    validate: Any = None
    if "finish_check" in top:
        fc = r.obj(top["finish_check"], "$.finish_check", set(), {"require", "verdicts"})
        if len(fc) != 1:
            raise r.fail("$.finish_check", "needs exactly one of 'require' or 'verdicts'")
        if "require" in fc:
            validate = _grounded(r.str_list(fc["require"], "$.finish_check.require"))
        else:
            verdicts = r.typed(fc["verdicts"], "$.finish_check.verdicts", list, "a list")
            if not verdicts or not all(isinstance(v, bool) for v in verdicts):
                raise r.fail("$.finish_check.verdicts", "must be a non-empty list of booleans")
            validate = _replayed(tuple(verdicts))
    if validate is None and not rules:
        raise r.fail("$", "needs finish_check or rules (a finish must be checked)")
    try:
        return RunController(budget, guard=guard, rules=rules, validate=validate,
                             no_progress=no_progress, tool_failure=tool_failure, fold=_merge,
                             clock=clock)
    except ValueError as e:
        raise r.fail("$", str(e)) from None


def _calibrated(r: _Reader, spec: Any) -> StoppingRule:
    p = "$.calibrated_rule"
    c = r.obj(spec, p, {"name", "require", "confidence_key", "target_error_rate", "labelled"},
              set())
    keys = r.str_list(c["require"], p + ".require")
    key = r.typed(c["confidence_key"], p + ".confidence_key", str, "a string")
    full, at_signal = RunCost(4, 0.04, 4.0), RunCost(2, 0.02, 2.0)
    labelled = []
    for i, run in enumerate(r.typed(c["labelled"], p + ".labelled", list, "a list")):
        q = f"{p}.labelled[{i}]"
        x = r.obj(run, q, {"confidence", "correct"}, set())
        try:
            labelled.append(LabelledRun(f"l{i}", r.number(x["confidence"], q + ".confidence"),
                                        r.typed(x["correct"], q + ".correct", bool, "a boolean"),
                                        full, at_signal))
        except ValueError as e:
            raise r.fail(q, str(e)) from None
    try:
        cal = Calibration.measure(labelled, model_version="eval",
                                  target_error_rate=r.number(c["target_error_rate"],
                                                             p + ".target_error_rate"),
                                  savings_by="steps")
        return cal.stopping_rule(model_version="eval",
                                 confidence=lambda s: _confidence(s.data.get(key)),
                                 output=_known_values(keys),
                                 name=r.typed(c["name"], p + ".name", str, "a string"))
    except (ValueError, ControlError) as e:
        raise r.fail(p, str(e)) from None


def _confidence(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _positive(r: _Reader, value: Any, path: str) -> float:
    x = r.number(value, path)
    if not x > 0:
        raise r.fail(path, "must be > 0")
    return x


def _known(key: str) -> Callable[[RunState], bool]:
    return lambda s: s.data.get(key) is not None


def _known_values(keys: Sequence[str]) -> Callable[[RunState], Any]:
    return lambda s: {k: s.data[k] for k in keys}


def _grounded(keys: Sequence[str]) -> Callable[[RunState, Any], PredicateReport]:
    def check(state: RunState, output: Any) -> PredicateReport:
        if not isinstance(output, dict):
            return PredicateReport(missing=tuple(keys), detail="the output is not an object")
        # (only the missing keys matter: the controller reads a finish check's misses and detail)
        bad = tuple(k for k in keys if k not in output or k not in state.data
                    or canonical_bytes(output[k]) != canonical_bytes(state.data[k]))
        return PredicateReport(missing=bad,
                               detail=("not backed by a tool result: " + ", ".join(bad)) if bad else "")

    return check


def _replayed(verdicts: tuple[bool, ...]) -> Callable[[RunState, Any], bool]:
    """A finish check that replays recorded verdicts in order (the last one repeats); the
    position is the number of finishes this run already had checked."""

    def check(state: RunState, output: Any) -> bool:
        seen = sum(1 for rec in state.trace if rec.kind == "finish_rejected")
        return verdicts[min(seen, len(verdicts) - 1)]

    return check


def _merge(state: RunState, call: ToolCall, result: ToolResult) -> None:
    if result.ok and isinstance(result.data, dict):
        state.data.update(result.data)


def _turns(r: _Reader, a: dict[str, Any]) -> tuple[tuple[Turn | str, ...], tuple[float, ...],
                                                   tuple[float, ...]]:
    raw = r.typed(a["turns"], "$.agent.turns", list, "a list")
    if not raw:
        raise r.fail("$.agent.turns", "must not be empty")
    out: list[Turn | str] = []
    delays: list[float] = []
    elapsed: list[float] = []
    for i, t in enumerate(raw):
        p = f"$.agent.turns[{i}]"
        if not isinstance(t, dict):
            raise r.fail(p, "must be an object")
        delays.append(r.number(t.get("delay_s", 0), p + ".delay_s"))
        elapsed.append(r.number(t.get("elapsed_s", 0), p + ".elapsed_s"))
        kinds = [k for k in ("call", "finish", "escalate", "invalid", "raise") if k in t]
        if len(kinds) != 1:
            raise r.fail(p, "needs exactly one of call, finish, escalate, invalid, raise")
        kind = kinds[0]
        if kind == "raise":
            r.obj(t, p, {"raise"}, {"delay_s", "elapsed_s"})
            out.append(r.typed(t["raise"], p + ".raise", str, "a string"))
            continue
        r.obj(t, p, {kind}, {"tokens", "cost_usd", "delay_s", "elapsed_s", "found"}
              if kind == "escalate" else {"tokens", "cost_usd", "delay_s", "elapsed_s"})
        action: Action
        if kind == "call":
            c = r.obj(t["call"], p + ".call", {"tool"}, {"args", "idempotency_key"})
            tool = r.typed(c["tool"], p + ".call.tool", str, "a string")
            args = r.typed(c.get("args", {}), p + ".call.args", dict, "an object")
            try:  # (the reader's own errors above name their field once)
                action = ToolCall(tool, args, idempotency_key=c.get("idempotency_key"))
            except (ValueError, FormatError) as e:
                raise r.fail(p + ".call", str(e)) from None
        elif kind == "finish":
            action = Finish(t["finish"])
        elif kind == "escalate":
            action = Escalate(r.typed(t["escalate"], p + ".escalate", str, "a string"),
                              r.str_list(t.get("found", []), p + ".found"))
        else:
            action = Invalid(r.typed(t["invalid"], p + ".invalid", str, "a string"))
        out.append(Turn(action, r.count(t.get("tokens", 0), p + ".tokens"),
                        r.number(t.get("cost_usd", 0), p + ".cost_usd")))
    return tuple(out), tuple(delays), tuple(elapsed)


def _tools(r: _Reader, tools: Any) -> tuple[dict[str, tuple[ToolResult, ...]],
                                            dict[str, tuple[float, ...]]]:
    r.typed(tools, "$.tools", dict, "an object")
    out: dict[str, tuple[ToolResult, ...]] = {}
    delays: dict[str, tuple[float, ...]] = {}
    for name, spec in tools.items():
        p = f"$.tools.{name}"
        s = r.obj(spec, p, {"results"}, set())
        results = r.typed(s["results"], p + ".results", list, "a list")
        if not results:
            raise r.fail(p + ".results", "must not be empty")
        seq: list[ToolResult] = []
        waits: list[float] = []
        for i, res in enumerate(results):
            q = f"{p}.results[{i}]"
            x = r.obj(res, q, set(), {"ok", "data", "error", "fatal", "cost_usd", "delay_s"})
            waits.append(r.number(x.get("delay_s", 0), q + ".delay_s"))
            ok = r.typed(x.get("ok", True), q + ".ok", bool, "a boolean")
            seq.append(ToolResult(
                ok=ok, data=x.get("data"),
                error=r.typed(x.get("error", None if ok else "failed"), q + ".error",
                              (str, type(None)), "a string"),
                fatal=r.typed(x.get("fatal", False), q + ".fatal", bool, "a boolean"),
                cost_usd=r.number(x.get("cost_usd", 0), q + ".cost_usd")))
        out[name] = tuple(seq)
        delays[name] = tuple(waits)
    return out, delays


@dataclass(frozen=True)
class CaseResult:
    """How one case ended, against what it expected."""

    case_id: str
    source: str
    expected: StopReason
    observed: StopReason
    stop_kind: str
    stop_detail: str
    output_ok: bool | None  # None: no output check
    output_detail: str = ""
    problems: tuple[str, ...] = ()  # failed assertions beyond the stop reason and output

    @property
    def passed(self) -> bool:
        return (self.observed is self.expected and self.output_ok is not False
                and not self.problems)

    def failure_line(self) -> str:
        if self.observed is not self.expected:
            return (f"FAIL {self.case_id}: stopped with {self.observed} "
                    f"({self.stop_kind}: {self.stop_detail}), expected {self.expected}")
        if self.output_ok is False:
            return f"FAIL {self.case_id}: output check failed: {self.output_detail}"
        return f"FAIL {self.case_id}: " + "; ".join(self.problems)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.case_id, "source": self.source, "expected": str(self.expected),
                "observed": str(self.observed), "stop_kind": self.stop_kind,
                "stop_detail": self.stop_detail, "output_ok": self.output_ok,
                "problems": list(self.problems), "passed": self.passed}


@dataclass(frozen=True)
class EvalReport:
    results: tuple[CaseResult, ...]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def summary(self) -> str:
        return f"{self.passed} passed, {self.failed} failed"


def _scripted(turns: tuple[Turn | str, ...], delays: tuple[float, ...] = (),
              elapsed: tuple[float, ...] = (), clock: _CaseClock | None = None,
              ) -> Callable[[RunState], Awaitable[Turn]]:
    n = len(turns)
    it = iter(zip(turns, delays or (0.0,) * n, elapsed or (0.0,) * n, strict=True))
    last: list[tuple[Turn | str, float, float]] = []

    async def decide(state: RunState) -> Turn:
        import anyio

        nxt = next(it, None)
        if nxt is not None:
            last[:] = [nxt]
        turn, wait, took = last[0]
        if wait:  # a slow model call (cancelled at the deadline)
            await anyio.sleep(wait)
        if clock is not None:
            clock.advance(wait + took)
        if isinstance(turn, str):
            raise RuntimeError(turn)
        return turn

    return decide


def _served(table: dict[str, tuple[Any, ...]]) -> Callable[[str], Any]:
    """Per tool, the next entry of its scripted sequence (the last one repeating); None for a
    tool the table does not name."""
    served: dict[str, int] = {}

    def nxt(tool: str) -> Any:
        seq = table.get(tool)
        if seq is None:
            return None
        i = served.get(tool, 0)
        served[tool] = i + 1
        return seq[min(i, len(seq) - 1)]

    return nxt


def _tool_runner(tools: dict[str, tuple[ToolResult, ...]], delays: dict[str, tuple[float, ...]],
                 ran: list[str], clock: _CaseClock | None = None,
                 engage: Callable[[int], None] | None = None) -> Callable[[ToolCall], Any]:
    """The case's scripted tools: each call waits its scripted delay (cancelled at a deadline),
    then counts as run and gets its scripted result (``engage`` hears how many have run)."""
    result, delay = _served(tools), _served(delays)  # delays names the same tools as tools

    async def execute(call: ToolCall) -> ToolResult:
        import anyio

        wait: float | None = delay(call.tool)
        if wait:  # None (no such tool) or 0: no wait
            await anyio.sleep(wait)
            if clock is not None:
                clock.advance(wait)
        ran.append(call.tool)
        if engage is not None:
            engage(len(ran))
        res: ToolResult | None = result(call.tool)
        return ToolResult.failure(f"no such tool: {call.tool}") if res is None else res

    return execute


def import_agent(path: str) -> Callable[[RunState], Any]:
    """``package.module:attr`` -> the callable (your agent's ``decide``)."""
    module, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise EvalCaseError(f"cannot import agent {path!r}: {e}") from None
    if not callable(obj):
        raise EvalCaseError(f"agent {path!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _check_output(expect: dict[str, Any], output: Any) -> tuple[bool, str]:
    def cb(v: Any) -> bytes:
        try:
            return canonical_bytes(v)
        except FormatError:  # an expectation is JSON: a non-JSON output never matches it
            return repr(v).encode()  # pragma: no mutate (equivalent: any non-JSON bytes do)

    if "equals" in expect:
        ok = cb(output) == cb(expect["equals"])
        return ok, "" if ok else f"expected {display(expect['equals'])}, got {display(output)}"
    want = expect["subset"]
    if not isinstance(output, dict):
        return False, f"expected an object containing {display(want)}, got {display(output)}"
    bad = [k for k, v in want.items() if k not in output or cb(output[k]) != cb(v)]
    return (not bad), "" if not bad else (
        f"expected {display({k: want[k] for k in bad})}, got "
        f"{display({k: output.get(k) for k in bad})}")


def _run(case: EvalCase, decide: Callable[[RunState], Any], ran: list[str],
         controller: RunController, clock: _CaseClock,
         engage: Callable[[int], None] | None) -> Any:
    # every case has a deadline (MAX_EVAL_SECONDS at most), so arun drives the loop under a
    # cancel scope and awaits the async tools; a sync decide runs in a worker thread it can
    # abandon (run() refuses async callables)
    import anyio

    execute = _tool_runner(case.tool_results, case.delays, ran, clock, engage)
    return anyio.run(functools.partial(controller.arun, case.task, decide, execute,
                                       run_id=case.case_id))


_EVAL_FLAG = "ECT_EVAL_KILL_SWITCH"


def _with_switch(case: EvalCase, ledger: Path,
                 ) -> tuple[RunController, KillSwitch | None, Callable[[int], None] | None]:
    """The case's controller, admitted by the case's kill switch (a daily ceiling on a fresh
    ledger; a flag the tools raise once ``engage_after_calls`` calls have run)."""
    k = case.kill_switch
    if k is None:
        return case.controller, None, None
    flags: dict[str, str] = {}
    after = k.get("engage_after_calls")
    cap = k.get("max_spend_per_day_usd")
    switch = KillSwitch(ledger=ledger if cap is not None else None, max_spend_per_day_usd=cap,
                        step_reserve_usd=k.get("step_reserve_usd"),
                        disable_env=_EVAL_FLAG if after is not None else None, environ=flags)

    def engage(calls: int) -> None:
        if after is not None and calls >= after:
            flags[_EVAL_FLAG] = "1"

    controller = copy.copy(case.controller)
    controller.kill_switch = switch
    return controller, switch, engage


def run_case(case: EvalCase, *, decide: Callable[[RunState], Any] | None = None) -> CaseResult:
    """Run one case (fresh controller state every call) with its scripted agent, the agent it
    imports, or ``decide`` (your own agent) when given; the tools are the case's scripted ones.
    """
    clock = case.clock
    clock.restart(real=decide is not None or case.agent_import is not None)
    if decide is None:
        decide = (import_agent(case.agent_import) if case.agent_import is not None
                  else _scripted(case.turns, case.turn_delays, case.turn_elapsed, clock))
    ran: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ect-eval-") as home, warnings.catch_warnings():
        warnings.simplefilter("ignore", UnmeteredUsage)  # a scripted turn's usage is the case's
        controller, switch, engage = _with_switch(case, Path(home) / "ledger.sqlite")
        result = _run(case, decide, ran, controller, clock, engage)
        day = (switch.usage() if switch is not None and case.kill_switch is not None
               and "max_spend_per_day_usd" in case.kill_switch else None)
    output_ok: bool | None = None
    detail = ""
    if case.expect_output is not None:
        if result.completed:
            output_ok, detail = _check_output(case.expect_output, result.output)
        else:
            output_ok, detail = False, f"no output: the run stopped with {result.reason}"
    problems: list[str] = []
    if not result.completed:
        try:
            leaked = result.output
        except NoFinalOutput:
            pass
        else:
            problems.append(f"a {result.reason} stop carried an output ({display(leaked)})")
        if "output" in result.to_json():
            problems.append(f"a {result.reason} stop's record carries an output")
        if result.handoff is None:
            problems.append(f"a {result.reason} stop has no handoff package")
    if case.expect_steps is not None and result.steps != case.expect_steps:
        problems.append(f"took {result.steps} steps, expected {case.expect_steps}")
    if case.expect_tools is not None and tuple(ran) != case.expect_tools:
        problems.append(f"ran tools {list(ran)}, expected {list(case.expect_tools)}")
    done = sorted(set(ran) & set(case.expect_not_run))
    if done:
        problems.append("executed " + ", ".join(done) + ", which must not run")
    if case.expect_spend is not None and day is not None:
        got = {"spend_usd": day["spend_usd"], "reserved_usd": day["reserved_usd"]}
        if got != case.expect_spend:
            problems.append(f"the day's ledger holds {display(got)}, expected "
                            f"{display(case.expect_spend)}")
    if case.expect_handoff is not None and result.handoff is not None:
        held = result.handoff.to_json()
        for f, want in sorted(case.expect_handoff.items()):
            if held[f] != want:
                problems.append(f"the handoff's {f} is {display(held[f])}, expected "
                                f"{display(want)}")
    if case.expect_kind is not None and result.stop.kind != case.expect_kind:
        problems.append(f"stopped by {result.stop.kind}, expected {case.expect_kind}")
    return CaseResult(case.case_id, case.source, case.expect_stop, result.reason,
                      result.stop.kind, result.stop.detail, output_ok, detail, tuple(problems))


def _iter_files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*.json") if p.is_file())
    else:
        yield path


def load_cases(path: str | Path | None = None) -> list[EvalCase]:
    """Parse every ``*.json`` case under ``path`` (a file or directory; default: the bundled
    suite), in sorted path order.

    Raises:
        EvalCaseError: a case is malformed, or two cases share an id.
        FileNotFoundError: ``path`` does not exist.
    """
    if path is None:
        root = resources.files("runner.control") / "evals"
        with resources.as_file(root) as p:
            return load_cases(p)
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(2, "No such file or directory", str(p))
    cases: list[EvalCase] = []
    seen: dict[str, str] = {}
    for f in _iter_files(p):
        try:
            obj = load_strict_file(f)
        except FormatError as e:
            raise EvalCaseError(f"{f}: {e}") from None
        case = EvalCase.from_json(obj, str(f))
        if case.case_id in seen:
            raise EvalCaseError(f"{f}: $.id: {case.case_id!r} also used by {seen[case.case_id]}")
        seen[case.case_id] = str(f)
        cases.append(case)
    if not cases:
        raise EvalCaseError(f"{p}: no eval cases (*.json) found")
    return cases


def run_evals(path: str | Path | None = None, *,
              decide: Callable[[RunState], Any] | None = None) -> EvalReport:
    """Load and run every case (see :func:`load_cases`), with your ``decide`` when given."""
    return EvalReport(tuple(run_case(c, decide=decide) for c in load_cases(path)))



def _cut_call(r: _Reader, record: dict[str, Any], condition: Any,
              last: dict[str, Any] | None) -> str | None:
    """The tool of the last step's call when a deadline cancelled it mid-call (a tool timeout,
    or the run's time budget running out in it), else None."""
    call = (last or {}).get("call")
    if not isinstance(condition, dict) or not isinstance(call, dict):
        return None
    tool = call.get("tool")
    if condition.get("type") == "ToolTimeout":
        return tool if isinstance(tool, str) else None
    detail = r.typed(record["stop"].get("detail", ""), "$.stop.detail", str, "a string")
    if condition.get("type") == "MaxTime" and isinstance(tool, str) and detail.endswith(f" in {tool}"):
        return tool
    return None


def _cut_decide(record: dict[str, Any], condition: Any) -> bool:
    """True when the run's time budget ran out while it waited for the model."""
    detail = record["stop"].get("detail")
    return (isinstance(condition, dict) and condition.get("type") == "MaxTime"
            and isinstance(detail, str) and detail.endswith(" waiting for decide"))


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None}



def capture_case(record: Any, *, case_id: str | None = None,
                 expect: StopReason | str | None = None, source: str = "<record>") -> dict[str, Any]:
    """Turn a run record (``RunResult.to_json()``, format ``ect.run-record/1``) into an eval
    case (``ect.stop-eval/1``) that replays the run: the same controls, the model's actions
    turn by turn (with their usage), the tool results in order, and the finish verdicts.

    ``expect`` is the stop the run *should* have ended with (default: the one it ended with, so
    the case pins today's behaviour). Stopping rules are replayed as "this key is known in the
    folded state" predicates (the eval harness folds object results into the state).

    Raises:
        EvalCaseError: the record is not a run record, or lacks what a replay needs.
    """
    r = _Reader(source)
    if not isinstance(record, dict) or record.get("format") != "ect.run-record/1":
        raise r.fail("$.format", "must be 'ect.run-record/1' (a RunResult.to_json() record)")
    r.has(record, "$", ("run_id", "stop", "steps", "trace", "controls", "usage", "task"))
    stop = r.has(record["stop"], "$.stop", ("reason",))  # (a record carries more than a replay reads)
    recorded = r.reason(stop["reason"], "$.stop.reason")
    controls = r.has(record["controls"], "$.controls", ("budget", "no_progress", "tool_failure"))
    trace = r.typed(record["trace"], "$.trace", list, "a list")
    usage = r.typed(record["usage"], "$.usage", list, "a list")
    steps = r.count(record["steps"], "$.steps")
    if not steps:
        raise r.fail("$.steps", "the run made no decision: there is nothing to replay")
    if len(usage) != steps:
        raise r.fail("$.usage", f"must hold one [tokens, cost_usd] pair per step ({steps})")
    reason = StopReason(expect) if expect is not None else recorded

    by_step: dict[int, dict[str, Any]] = {}
    tools: dict[str, list[dict[str, Any]]] = {}
    ran: list[str] = []
    verdicts: list[bool] = []
    for i, rec in enumerate(trace):
        p = f"$.trace[{i}]"
        rec = r.has(rec, p, ("step", "kind"))
        kind, step = rec["kind"], r.count(rec["step"], p + ".step", 1)
        if kind in ("tool", "deduplicated"):
            r.has(rec, p, ("tool", "args"))
            tool = r.typed(rec["tool"], p + ".tool", str, "a string")
            args = {} if rec["args"] is None else rec["args"]  # (a call with no arguments)
            call = {"tool": tool, "args": r.typed(args, p + ".args", dict, "an object")}
            key = rec.get("idempotency_key")
            if key is not None:
                call["idempotency_key"] = r.typed(key, p + ".idempotency_key", str, "a string")
            by_step.setdefault(step, {"call": call})
            if kind == "tool":
                res = r.typed(rec.get("result"), p + ".result", dict, "an object")
                served = {k: res[k] for k in ("ok", "data", "error", "fatal", "cost_usd")
                          if k in res}
                took = rec.get("seconds")
                if took is not None and r.number(took, p + ".seconds"):
                    served["delay_s"] = took  # the replay's tool takes as long
                tools.setdefault(tool, []).append(served)
                ran.append(tool)
        elif kind == "finish_rejected":
            by_step[step] = {"finish": rec.get("output")}
            verdicts.append(False)
        elif kind == "invalid":
            by_step[step] = {"invalid": r.typed(rec.get("note", ""), p + ".note", str, "a string")}
        else:
            raise r.fail(p + ".kind", "must be one of tool, deduplicated, finish_rejected, invalid")
    last = record.get("last_action")
    if isinstance(last, dict):  # the last step's action in full (a trace omits a call's key)
        by_step[steps] = dict(last)
    condition = stop.get("condition")
    if (isinstance(condition, dict) and condition.get("type") == "FinishGate"
            and recorded is StopReason.GOAL_MET):
        verdicts.append(True)
    cut = _cut_call(r, record, condition, by_step.get(steps))
    if cut is not None:  # the call the deadline cancelled: it never answers in the replay
        tools.setdefault(cut, []).append({"ok": True, "delay_s": MAX_EVAL_SECONDS})
    thinking = r.typed(record.get("decide_seconds", []), "$.decide_seconds", list, "a list")
    for i, took in enumerate(thinking):
        r.number(took, f"$.decide_seconds[{i}]")
    turns: list[dict[str, Any]] = []
    for step in range(1, steps + 1):
        turn = dict(by_step.get(step) or {"invalid": "(no action recorded for this step)"})
        pair = usage[step - 1]
        if not isinstance(pair, list) or len(pair) != 2:
            raise r.fail(f"$.usage[{step - 1}]", "must be a [tokens, cost_usd] pair")
        tokens = r.count(pair[0], f"$.usage[{step - 1}][0]")
        cost = r.number(pair[1], f"$.usage[{step - 1}][1]")
        if tokens:
            turn["tokens"] = tokens
        if cost:
            turn["cost_usd"] = cost
        if step <= len(thinking) and thinking[step - 1]:
            turn["delay_s"] = thinking[step - 1]  # the model call took as long
        turns.append(turn)
    if _cut_decide(record, condition):  # the model call the deadline cancelled never answers
        turns.append({"invalid": "(the model call the deadline cancelled)",
                      "delay_s": MAX_EVAL_SECONDS})

    budget = dict(r.typed(controls["budget"], "$.controls.budget", dict, "an object"))
    limits = _clean(dict(r.typed(budget.pop("tool_limits", {}), "$.controls.budget.tool_limits",
                                 dict, "an object")))
    capped = ""
    seconds = budget.get("max_seconds")
    if isinstance(seconds, (int, float)) and seconds > MAX_EVAL_SECONDS:
        # an eval case runs for MAX_EVAL_SECONDS at most; a scripted replay waits for no model
        budget["max_seconds"] = MAX_EVAL_SECONDS
        capped = (f" (its wall-clock budget of {seconds:g} s is capped at "
                  f"{MAX_EVAL_SECONDS:g} s for the replay)")
    case: dict[str, Any] = {
        "format": EVAL_FORMAT,
        "id": case_id or f"captured_{record['run_id']}",
        "description": (f"captured from run {record['run_id']}, which stopped "
                        f"{recorded}: {stop.get('detail', '')}{capped}"),
        "task": record["task"] if isinstance(record["task"], str) else display(record["task"], 300),
        "expect_stop": str(reason),
        "budget": {**_clean(budget), "tool_limits": limits},
        "no_progress": controls["no_progress"],
        "tool_failure": controls["tool_failure"],
        "tools": {name: {"results": res} for name, res in tools.items()},
        "agent": {"turns": turns},
    }
    if not case["budget"].get("tool_timeouts"):  # a run without a deadline records none
        case["budget"].pop("tool_timeouts", None)
    if expect is None:
        case["expect_steps"] = steps
        case["expect_tools"] = ran
    guard = controls.get("guard")
    if guard:
        g = r.has(guard, "$.controls.guard", ("allow", "approvals", "side_effects"))
        side = r.typed(g["side_effects"], "$.controls.guard.side_effects", dict, "an object")
        case["guard"] = {"allow": g["allow"], "approvals": g["approvals"], "side_effects": {
            t: _clean(r.typed(v, f"$.controls.guard.side_effects.{t}", dict, "an object"))
            for t, v in side.items()}}
    rules = r.typed(controls.get("rules") or [], "$.controls.rules", list, "a list")
    rules = [r.has(x, f"$.controls.rules[{i}]", ("name", "predicates", "stop_early"))
             for i, x in enumerate(rules)]
    if any(x["predicates"] for x in rules):
        case["rules"] = [{"name": x["name"], "require": x["predicates"],
                          "stop_early": x["stop_early"]} for x in rules if x["predicates"]]
    if controls.get("validate") or "rules" not in case:
        case["finish_check"] = {"verdicts": verdicts or [False]}
    EvalCase.from_json(case, source)  # what we write must load
    return case
