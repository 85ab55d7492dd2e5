"""Combinable stop conditions. Each keeps its own type and reason when combined.

``a | b`` is :class:`AnyOf` (the first member that fires is the stop, with its own type and
reason); ``a & b`` is :class:`AllOf` (fires when every member fires at the same checkpoint; the
stop carries the first member's reason and every member's own typed stop in ``causes``).

Every condition declares the checkpoints (``phases``) at which it can fire. An :class:`AllOf`
whose members share no phase could never fire, so it is refused at construction.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.canonical import canonical_bytes as _cb
from runner.canonical import digest
from runner.control._types import (
    Checkpoint,
    Condition,
    Escalate,
    Finish,
    Invalid,
    Phase,
    RunState,
    Stop,
    StopReason,
    ToolCall,
    ToolResult,
    display,
    micro,
)
from runner.errors import FormatError

__all__ = [
    "AllOf",
    "AnyOf",
    "DailySpendCap",
    "EscalationRequested",
    "ExternalStop",
    "FinishGate",
    "MaxCost",
    "MaxSteps",
    "MaxTime",
    "MaxTokens",
    "NoProgressDetector",
    "RepeatedAction",
    "RepeatedEmptyResult",
    "StalledState",
    "StopCondition",
    "ToolCallLimit",
    "ToolFailure",
    "ToolTimeout",
    "action_fingerprint",
]


class StopCondition(Condition):
    """A condition evaluated at checkpoints. Stateless: per-run memory lives in ``RunState``.

    Subclasses implement :meth:`check` (return a :class:`Stop` to end the run, else ``None``) and
    may implement :meth:`observe` (called once per checkpoint that did not end the run).
    ``phases`` names the checkpoints at which :meth:`check` can fire (default: all of them).
    """

    phases: frozenset[Phase] = frozenset(Phase)

    @abstractmethod
    def check(self, point: Checkpoint) -> Stop | None: ...

    def observe(self, point: Checkpoint) -> None:
        return None

    def __or__(self, other: StopCondition) -> AnyOf:
        return AnyOf(self, other)

    def __and__(self, other: StopCondition) -> AllOf:
        return AllOf(self, other)

    def _stop(self, reason: StopReason, point: Checkpoint, detail: str, **kw: Any) -> Stop:
        return Stop(reason=reason, condition=self, detail=detail, step=point.state.step, **kw)


def _flatten(kind: type, members: tuple[StopCondition, ...]) -> tuple[StopCondition, ...]:
    out: list[StopCondition] = []
    for m in members:
        if not isinstance(m, StopCondition):
            raise TypeError(f"{kind.__name__} members must be StopConditions, got {type(m).__name__}")
        out.extend(m.members if type(m) is kind else (m,))  # type: ignore[attr-defined]
    return tuple(out)


class AnyOf(StopCondition):
    """Fires when any member fires; the stop is the first firing member's own stop."""

    def __init__(self, *members: StopCondition) -> None:
        self.members = _flatten(AnyOf, members)
        self.phases = frozenset().union(*(m.phases for m in self.members))

    @property
    def name(self) -> str:
        return "any_of"

    def check(self, point: Checkpoint) -> Stop | None:
        for m in self.members:
            stop = m.check(point)
            if stop is not None:
                return stop
        return None

    def observe(self, point: Checkpoint) -> None:
        for m in self.members:
            m.observe(point)

    def describe(self) -> dict[str, Any]:
        return {"type": "AnyOf", "name": self.name, "members": [m.describe() for m in self.members]}


class AllOf(StopCondition):
    """Fires when every member fires at the same checkpoint.

    The stop's reason and condition are the first member's own (or ``reason`` if given, with
    this AllOf as the condition); ``causes`` holds every member's typed stop.
    """

    def __init__(self, *members: StopCondition, reason: StopReason | None = None) -> None:
        self.members = _flatten(AllOf, members)
        if not self.members:
            raise ValueError("AllOf needs at least one member")
        self.reason = StopReason(reason) if reason is not None else None
        if self.reason is StopReason.GOAL_MET:
            raise ValueError("AllOf cannot end a run with goal_met (only a checked finish can)")
        phases = frozenset(Phase)
        for m in self.members:
            phases &= m.phases
        if not phases:
            names = ", ".join(f"{m.name} ({'/'.join(sorted(m.phases))})" for m in self.members)
            raise ValueError(f"AllOf members never fire at the same checkpoint: {names}; "
                             "combine them with | or check them separately")
        self.phases = phases

    @property
    def name(self) -> str:
        return "all_of"

    def check(self, point: Checkpoint) -> Stop | None:
        stops: list[Stop] = []
        for m in self.members:
            stop = m.check(point)
            if stop is None:
                return None
            stops.append(stop)
        first = stops[0]
        if self.reason is None:
            return Stop(first.reason, first.condition, first.detail, first.step, tuple(stops),
                        first.question)
        return Stop(self.reason, self, first.detail, first.step, tuple(stops), first.question)

    def observe(self, point: Checkpoint) -> None:
        for m in self.members:
            m.observe(point)

    def describe(self) -> dict[str, Any]:
        return {"type": "AllOf", "name": self.name, "members": [m.describe() for m in self.members]}


@dataclass(frozen=True, eq=False)
class MaxSteps(StopCondition):
    """``step_budget``: at most ``limit`` model calls (decisions)."""

    limit: int
    phases = frozenset({Phase.BEFORE_MODEL})

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError("MaxSteps.limit must be >= 1")

    @property
    def name(self) -> str:
        return f"max_steps={self.limit}"

    def check(self, point: Checkpoint) -> Stop | None:
        if point.phase is Phase.BEFORE_MODEL and point.state.step >= self.limit:
            return self._stop(StopReason.STEP_BUDGET, point,
                              f"used all {self.limit} steps without a validated result")
        return None


@dataclass(frozen=True, eq=False)
class MaxTokens(StopCondition):
    """``token_budget``: no model call once ``limit`` tokens are used; a call that overruns it
    ends the run before its action is looked at."""

    limit: int

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError("MaxTokens.limit must be >= 1")

    @property
    def name(self) -> str:
        return f"max_tokens={self.limit}"

    def check(self, point: Checkpoint) -> Stop | None:
        used = point.state.tokens
        if (point.phase is Phase.BEFORE_MODEL and used >= self.limit) or used > self.limit:
            return self._stop(StopReason.TOKEN_BUDGET, point,
                              f"used {used} tokens of a {self.limit}-token budget")
        return None


@dataclass(frozen=True, eq=False)
class MaxCost(StopCondition):
    """``token_budget``: the run's cost ceiling in USD (model calls plus tool costs)."""

    limit_usd: float
    label: str = "max_cost"

    def __post_init__(self) -> None:
        if not self.limit_usd > 0:
            raise ValueError("MaxCost.limit_usd must be > 0")

    @property
    def name(self) -> str:
        return f"{self.label}={self.limit_usd:g}"

    def check(self, point: Checkpoint) -> Stop | None:
        return _cost_check(self, point, self.limit_usd, "cost ceiling")


def _cost_check(cond: StopCondition, point: Checkpoint, limit: float, what: str) -> Stop | None:
    """Nothing left before a model call, or more spent than allowed after one (compared in
    integer micro-dollars: a step that spends exactly what is left continues)."""
    used = point.state.cost_usd
    if (point.phase is Phase.BEFORE_MODEL and micro(used) >= micro(limit)) or micro(used) > micro(limit):
        return cond._stop(StopReason.TOKEN_BUDGET, point,
                          f"spent ${used:.4f} of a ${limit:.4f} {what}")
    return None


class DailySpendCap(StopCondition):
    """``token_budget``: a step spent more than the kill switch's daily spend ceiling allowed
    it. Before a model call the step's reservation decides instead (the controller reserves
    what the step may spend and stops the run ``token_budget`` when the day cannot cover it),
    so this fires only on an action or a tool result."""

    phases = frozenset({Phase.ON_ACTION, Phase.AFTER_TOOL})

    @property
    def name(self) -> str:
        return "daily_spend_remaining"

    def check(self, point: Checkpoint) -> Stop | None:
        remaining = point.state.daily_remaining_usd
        if remaining is None or point.phase is Phase.BEFORE_MODEL:
            return None
        return _cost_check(self, point, remaining, "share of today's spend ceiling")


@dataclass(frozen=True, eq=False)
class ToolCallLimit(StopCondition):
    """``tool_limit``: at most ``limit`` executed calls of ``tool`` (of all tools when None)."""

    limit: int
    tool: str | None = None
    phases = frozenset({Phase.ON_ACTION})

    def __post_init__(self) -> None:
        if self.limit < 0:
            raise ValueError("ToolCallLimit.limit must be >= 0")

    @property
    def name(self) -> str:
        return f"tool_limit[{self.tool or '*'}]={self.limit}"

    def check(self, point: Checkpoint) -> Stop | None:
        call = point.call
        if point.phase is not Phase.ON_ACTION or call is None:
            return None
        if self.tool is None:
            used = point.state.tool_calls
            what = "tool calls in total"
        elif call.tool == self.tool:  # a failed call does not count: it may be retried
            used = (point.state.calls_by_tool.get(self.tool, 0)
                    - point.state.failed_by_tool.get(self.tool, 0))
            what = f"successful calls of {self.tool}"
        else:
            return None
        if used + 1 > self.limit:
            return self._stop(StopReason.TOOL_LIMIT, point,
                              f"{call.tool}: would exceed the limit of {self.limit} {what}")
        return None


def action_fingerprint(action: ToolCall | Finish | Invalid, state_hash: str | None = None) -> str:
    """sha256 over (kind, tool, canonical args[, state hash]) via runner.canonical."""
    # no mutate on the key and kind names below: a fingerprint is only compared with others made
    # here, and renaming one name in one branch still leaves every kind's bodies distinct
    if isinstance(action, ToolCall):
        body: dict[str, Any] = {"kind": "tool", "tool": action.tool, "args": action.args}  # pragma: no mutate (a private tag)
    elif isinstance(action, Finish):
        try:
            _cb(action.output)
            out: Any = action.output
        except FormatError:
            out = repr(action.output)
        body = {"kind": "finish", "output": out}  # pragma: no mutate (a private tag)
    else:
        body = {"kind": "invalid", "detail": action.detail}  # pragma: no mutate (a private tag)
    if state_hash is not None:
        body["state"] = state_hash  # pragma: no mutate (a private tag)
    return digest("ect/args/v1", body)


@dataclass(frozen=True, eq=False)
class RepeatedAction(StopCondition):
    """``no_progress``: the same action (tool + canonical args, or the same finish/invalid reply)
    proposed ``repeats`` times ends the run before the last one runs.

    ``state_key`` (optional) maps the run state to a JSON value hashed into the fingerprint, so
    the same call in a genuinely different state is not a repeat.
    """

    repeats: int = 3
    state_key: Callable[[RunState], Any] | None = None
    phases = frozenset({Phase.ON_ACTION})

    def __post_init__(self) -> None:
        if self.repeats < 2:
            raise ValueError("RepeatedAction.repeats must be >= 2")

    @property
    def name(self) -> str:
        return f"repeated_action={self.repeats}"

    def _fp(self, point: Checkpoint) -> str | None:
        action = point.action
        if point.phase is not Phase.ON_ACTION or not isinstance(action, ToolCall | Finish | Invalid):
            return None
        key = self.state_key
        return action_fingerprint(
            action, digest("ect/value/v1", key(point.state)) if key is not None else None)

    def check(self, point: Checkpoint) -> Stop | None:
        fp = self._fp(point)
        if fp is None:
            return None
        seen = point.state.scratch(self).get(fp, 0)
        if seen + 1 >= self.repeats:
            action = point.action
            what = (f"{action.tool}({_short(action.args)})" if isinstance(action, ToolCall)
                    else "the same finish" if isinstance(action, Finish) else "the same invalid reply")
            return self._stop(StopReason.NO_PROGRESS, point,
                              f"{what} proposed {seen + 1} times with no change")
        return None

    def observe(self, point: Checkpoint) -> None:
        fp = self._fp(point)
        if fp is not None:
            memo = point.state.scratch(self)
            memo[fp] = memo.get(fp, 0) + 1


def _short(args: Any) -> str:
    return display(dict(args), 60)


def _result_digest(result: ToolResult) -> str:
    try:
        return digest("ect/value/v1", result.data)
    except FormatError:
        return repr(result.data)


@dataclass(frozen=True, eq=False)
class RepeatedEmptyResult(StopCondition):
    """``no_progress``: ``count`` identical empty results in a row (any tool, any arguments)."""

    count: int = 3
    phases = frozenset({Phase.AFTER_TOOL})

    def __post_init__(self) -> None:
        if self.count < 2:
            raise ValueError("RepeatedEmptyResult.count must be >= 2")

    @property
    def name(self) -> str:
        return f"repeated_empty_result={self.count}"

    def check(self, point: Checkpoint) -> Stop | None:
        r = point.result
        if point.phase is not Phase.AFTER_TOOL or r is None or not r.empty:
            return None
        memo = point.state.scratch(self)
        streak = memo["streak"] if memo.get("last") == _result_digest(r) else 0  # set with "last"
        if streak + 1 >= self.count:
            return self._stop(StopReason.NO_PROGRESS, point,
                              f"the same empty result {streak + 1} times in a row")
        return None

    def observe(self, point: Checkpoint) -> None:
        r = point.result
        if point.phase is not Phase.AFTER_TOOL or r is None:
            return
        memo = point.state.scratch(self)
        if r.empty:
            d = _result_digest(r)
            memo["streak"] = memo["streak"] + 1 if memo.get("last") == d else 1
            memo["last"] = d
        else:
            memo.pop("last", None)  # the next empty result starts a new streak


def _state_digest(state: RunState) -> str:
    try:
        return digest("ect/value/v1", state.data)
    except FormatError:
        return repr(sorted(state.data.items(), key=lambda kv: str(kv[0])))


@dataclass(frozen=True, eq=False)
class StalledState(StopCondition):
    """``no_progress``: ``results`` tool results in a row that left the folded state
    (``state.data``) unchanged — progress measured as change in what the run knows, whatever
    the calls looked like. Needs a ``fold``; a run without one never changes its state."""

    results: int = 4
    phases = frozenset({Phase.AFTER_TOOL})

    def __post_init__(self) -> None:
        if self.results < 2:
            raise ValueError("StalledState.results must be >= 2")

    @property
    def name(self) -> str:
        return f"stalled_state={self.results}"

    def check(self, point: Checkpoint) -> Stop | None:
        if point.phase is not Phase.AFTER_TOOL or point.result is None:
            return None
        memo = point.state.scratch(self)
        if memo.get("digest") != _state_digest(point.state):
            return None
        streak = memo["streak"] + 1  # observe() set it with the digest
        if streak >= self.results:
            return self._stop(StopReason.NO_PROGRESS, point,
                              f"{streak} tool results in a row left the run state unchanged")
        return None

    def observe(self, point: Checkpoint) -> None:
        if point.phase is not Phase.AFTER_TOOL or point.result is None:
            return
        memo = point.state.scratch(self)
        now = _state_digest(point.state)
        memo["streak"] = memo["streak"] + 1 if memo.get("digest") == now else 0
        memo["digest"] = now


@dataclass(frozen=True, eq=False)
class ToolFailure(StopCondition):
    """``tool_error``: a fatal tool failure, or ``consecutive`` failures of the same tool."""

    consecutive: int = 2
    phases = frozenset({Phase.AFTER_TOOL})

    def __post_init__(self) -> None:
        if self.consecutive < 1:
            raise ValueError("ToolFailure.consecutive must be >= 1")

    @property
    def name(self) -> str:
        return f"tool_failure={self.consecutive}"

    def check(self, point: Checkpoint) -> Stop | None:
        r, call = point.result, point.call
        if point.phase is not Phase.AFTER_TOOL or r is None or call is None or r.ok:
            return None
        if r.fatal:
            return self._stop(StopReason.TOOL_ERROR, point,
                              f"{call.tool} failed fatally: {r.error or 'unknown error'}")
        streak = point.state.scratch(self).get(call.tool, 0) + 1
        if streak >= self.consecutive:
            return self._stop(StopReason.TOOL_ERROR, point,
                              f"{call.tool} failed {streak} times in a row: {r.error or 'unknown error'}")
        return None

    def observe(self, point: Checkpoint) -> None:
        r, call = point.result, point.call
        if point.phase is not Phase.AFTER_TOOL or r is None or call is None:
            return
        memo = point.state.scratch(self)
        memo[call.tool] = 0 if r.ok else memo.get(call.tool, 0) + 1


class EscalationRequested(StopCondition):
    """``needs_human``: the model chose the explicit escalate action."""

    phases = frozenset({Phase.ON_ACTION})

    @property
    def name(self) -> str:
        return "escalate_action"

    def check(self, point: Checkpoint) -> Stop | None:
        action = point.action
        if point.phase is Phase.ON_ACTION and isinstance(action, Escalate):
            return self._stop(StopReason.NEEDS_HUMAN, point, "the agent escalated",
                              question=action.question)
        return None


@dataclass(frozen=True, eq=False)
class MaxTime(StopCondition):
    """``time_budget``: the run's wall-clock budget (seconds since it started, by the
    controller's clock). The whole-run drivers also cancel work in flight at the deadline."""

    limit_s: float

    def __post_init__(self) -> None:
        if not self.limit_s > 0:
            raise ValueError("MaxTime.limit_s must be > 0")

    @property
    def name(self) -> str:
        return f"max_seconds={self.limit_s:g}"

    def check(self, point: Checkpoint) -> Stop | None:
        left = point.state.remaining
        if left is not None and left.seconds is not None and left.seconds <= 0:
            return self._stop(StopReason.TIME_BUDGET, point,
                              f"used the whole {self.limit_s:g}-second time budget")
        return None

    def expired(self, point: Checkpoint, what: str) -> Stop:
        """The stop for work cancelled at the deadline."""
        return self._stop(StopReason.TIME_BUDGET, point,
                          f"the {self.limit_s:g}-second time budget ran out {what}")


@dataclass(frozen=True, eq=False)
class ToolTimeout(Condition):
    """``time_budget``: one tool call ran past its timeout and was cancelled."""

    tool: str
    limit_s: float

    @property
    def name(self) -> str:
        return f"tool_timeout[{self.tool}]={self.limit_s:g}"


class FinishGate(Condition):
    """The check a finish must pass (``goal_met``), or the check that demanded a human."""

    @property
    def name(self) -> str:
        return "finish_check"


@dataclass(frozen=True, eq=False)
class ExternalStop(Condition):
    """A stop the caller decided with :meth:`RunController.halt` (named by the caller)."""

    label: str

    @property
    def name(self) -> str:
        return self.label


class NoProgressDetector(AnyOf):
    """``no_progress``: :class:`RepeatedAction`, :class:`RepeatedEmptyResult` or (opt-in)
    :class:`StalledState`, whichever fires (the stop names that member, with its own type).

    Args:
        repeats: the N-th identical action (tool + canonical args [+ state hash]) is not run.
        empty_results: N identical empty results in a row end the run.
        state_key: optional ``state -> JSON value`` hashed into each action's fingerprint.
        stalled: N tool results in a row that leave the folded state unchanged end the run
            (None: off; it needs a ``fold`` that records what each result taught the run).
    """

    def __init__(
        self,
        repeats: int = 3,
        empty_results: int = 3,
        state_key: Callable[[RunState], Any] | None = None,
        stalled: int | None = None,
    ) -> None:
        members: list[StopCondition] = [RepeatedAction(repeats, state_key),
                                        RepeatedEmptyResult(empty_results)]
        if stalled is not None:
            members.append(StalledState(stalled))
        super().__init__(*members)
        self.repeats = repeats
        self.empty_results = empty_results
        self.stalled = stalled

    @property
    def name(self) -> str:
        return "no_progress"
