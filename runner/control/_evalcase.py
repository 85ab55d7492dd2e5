"""Stop-reason eval cases: the case format (``ect.stop-eval/1``), its strict reader and loader.

Each case is a JSON file (format ``ect.stop-eval/1``) carrying the controls to apply, a scripted
agent (a list of turns: tool calls, finishes, escalations, invalid replies; the last turn repeats
forever, like an agent that never stops on its own), scripted tool results (per tool, consumed
in order, the last one repeating), the expected stop reason and an optional output check. A tiny
interpreter (``runner/control/_evals.py``) runs each case through :class:`RunController` with
no model. The bundled suite
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
    no_progress    {"repeats"?, "empty_results"?, "stalled"?}, or null: no-progress detection off
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

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from runner.canonical import canonical_bytes, load_strict_file
from runner.control._budget import Budget, ToolLimits
from runner.control._calibration import Calibration, LabelledRun, RunCost
from runner.control._conditions import NoProgressDetector, ToolFailure
from runner.control._controller import RunController
from runner.control._errors import EvalCaseError
from runner.control._guards import Guard, SideEffectRule
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
)
from runner.errors import ControlError, FormatError

__all__ = [
    "BUNDLED_EVALS",
    "EVAL_FORMAT",
    "EvalCase",
    "load_cases",
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
    off = "no_progress" in top and top["no_progress"] is None  # null: detection off
    np_ = {} if off else r.obj(top.get("no_progress", {}), "$.no_progress", set(),
                               {"repeats", "empty_results", "stalled"})
    tf = r.obj(top.get("tool_failure", {}), "$.tool_failure", set(), {"consecutive"})
    try:
        no_progress: NoProgressDetector | Literal[False] = False if off else NoProgressDetector(
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

