"""Core value types: stop reasons, stops, actions, tool results, run state."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from runner.canonical import FLAT, OMIT, JsonRecord, canonical_bytes, spec
from runner.errors import FormatError

__all__ = [
    "Action",
    "Checkpoint",
    "Condition",
    "Directive",
    "Escalate",
    "Fact",
    "Finish",
    "Invalid",
    "Phase",
    "PredicateReport",
    "Remaining",
    "RunState",
    "StepRecord",
    "Stop",
    "StopReason",
    "ToolCall",
    "ToolResult",
    "Turn",
    "display",
]

MICRO = 1_000_000  # money is counted in integer micro-dollars


def micro(usd: float) -> int:
    """Dollars as integer micro-dollars (the unit every sum and comparison of money uses)."""
    return round(usd * MICRO)


def dollars(amount_micro: int) -> float:
    """Integer micro-dollars as dollars (the nearest float to the exact decimal figure)."""
    return amount_micro / MICRO


def add_usd(a: float, b: float) -> float:
    """``a + b`` summed in integer micro-dollars, so 0.1 + 0.2 is exactly 0.3."""
    return dollars(micro(a) + micro(b))


class StopReason(StrEnum):
    """Every way a run can end. A run ends with exactly one of these."""

    GOAL_MET = "goal_met"  # a finish passed its checks, or a stopping rule with an output fired
    STEP_BUDGET = "step_budget"  # the model-call (step) budget is spent
    TOKEN_BUDGET = "token_budget"  # the token or cost ceiling is reached
    TOOL_LIMIT = "tool_limit"  # one tool (or all tools together) called too many times
    NO_PROGRESS = "no_progress"  # the same action, or the same empty result, again and again
    NEEDS_HUMAN = "needs_human"  # the agent asked for help, or policy demanded it
    TOOL_ERROR = "tool_error"  # an unrecoverable tool failure
    POLICY_BLOCK = "policy_block"  # a guard (or the kill switch) refused an action
    TIME_BUDGET = "time_budget"  # the wall-clock budget or a tool's timeout ran out
    INTERNAL_ERROR = "internal_error"  # user code raised or broke its contract; interrupted

    @property
    def is_budget(self) -> bool:
        """True for the reasons that mean a budget ran out (never a completion)."""
        return self in (StopReason.STEP_BUDGET, StopReason.TOKEN_BUDGET, StopReason.TOOL_LIMIT,
                        StopReason.TIME_BUDGET)


class Phase(StrEnum):
    """Where in the loop a condition is evaluated."""

    BEFORE_MODEL = "before_model"  # tool results are folded in; the next model call is not built
    ON_ACTION = "on_action"  # the model proposed an action; nothing executed yet
    AFTER_TOOL = "after_tool"  # a tool result was folded into the run state


def display(value: Any, limit: int = 120) -> str:
    """Compact one-line rendering of a JSON-ish value for traces and handoffs (display only)."""
    try:
        text = canonical_bytes(value).decode("utf-8")  # pragma: no mutate (codec names ignore case)
    except FormatError:
        text = json.dumps(value, default=repr, sort_keys=True,  # noqa: TID251 - display only
                          ensure_ascii=False)  # pragma: no mutate (None is as falsy as False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Condition(ABC):
    """Anything that can end a run; a :class:`Stop` names the instance that fired."""

    @property
    @abstractmethod
    def name(self) -> str:
        """Short stable name (used in reports and JSON)."""

    def describe(self) -> dict[str, Any]:
        return {"type": type(self).__name__, "name": self.name}


@dataclass(frozen=True)
class _Causes(JsonRecord):
    """The ``causes`` of a stop's JSON, written only when there are any."""

    causes: tuple[Stop, ...]


def _sorted_records(value: Mapping[str, JsonRecord]) -> dict[str, Any]:
    """The writer of a mapping of records (a guard's side-effect rules, a run's reports), keys
    sorted."""
    return {k: v.to_json() for k, v in sorted(value.items())}


def _describe(condition: Condition) -> dict[str, Any]:
    return condition.describe()


@dataclass(frozen=True)
class Stop(JsonRecord):
    """Why a run ended: one reason, the condition object that fired, and a one-line detail.

    ``causes`` is non-empty only for :class:`AllOf`, which fires when all its members fire; the
    members' own stops are kept there, typed, never joined into a string.
    """

    reason: StopReason
    condition: Condition = field(metadata=spec(write=_describe))
    detail: str
    step: int = 0
    causes: tuple[Stop, ...] = field(default=(), metadata=spec(skip=True))  # (in _causes)
    _causes: _Causes | None = field(default=None, kw_only=True, repr=False, compare=False,
                                    metadata=FLAT)  # set from causes when there are any
    question: str | None = field(default=None, metadata=OMIT)  # the one question a human
    # must answer (needs_human et al.)

    def __post_init__(self) -> None:
        if not isinstance(self.reason, StopReason):
            object.__setattr__(self, "reason", StopReason(self.reason))
        if not isinstance(self.condition, Condition):
            raise TypeError("Stop.condition must be a Condition instance")
        object.__setattr__(self, "_causes", _Causes(self.causes) if self.causes else None)

    @property
    def kind(self) -> str:
        """The type name of the condition that fired (e.g. ``"MaxSteps"``)."""
        return type(self.condition).__name__


@dataclass(frozen=True)
class ToolCall:
    """The model asks for one tool call. Arguments must be JSON (they are fingerprinted)."""

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    call_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not self.tool:
            raise ValueError("ToolCall.tool must be a non-empty string")
        if not isinstance(self.args, Mapping):
            raise TypeError("ToolCall.args must be a mapping")
        object.__setattr__(self, "args", dict(self.args))
        canonical_bytes(self.args)  # FormatError when the arguments are not JSON


@dataclass(frozen=True)
class Finish:
    """The model proposes a final output (an answer, a certificate). It is checked, not trusted."""

    output: Any


@dataclass(frozen=True)
class Escalate:
    """The model asks a human. ``question`` is the one question that needs answering."""

    question: str
    found: tuple[str, ...] = ()


@dataclass(frozen=True)
class Invalid:
    """The model's reply could not be parsed into an action; it costs a step and is fed back."""

    detail: str


Action = ToolCall | Finish | Escalate | Invalid


@dataclass(frozen=True)
class Turn:
    """An action plus what the model call that produced it cost."""

    action: Action
    tokens: int = 0
    cost_usd: float = 0.0


def _empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return all(_empty(v) for v in value.values())
    if isinstance(value, list | str | tuple):
        return len(value) == 0
    return False


@dataclass(frozen=True)
class ToolResult(JsonRecord):
    """What a tool returned. ``fatal`` marks an unrecoverable failure (ends as ``tool_error``)."""

    ok: bool = True
    data: Any = None
    error: str | None = None
    fatal: bool = False
    cost_usd: float = 0.0

    @classmethod
    def success(cls, data: Any = None, *, cost_usd: float = 0.0) -> ToolResult:
        return cls(True, data, cost_usd=cost_usd)

    @classmethod
    def failure(cls, error: str, *, fatal: bool = False, cost_usd: float = 0.0) -> ToolResult:
        return cls(ok=False, error=error, fatal=fatal, cost_usd=cost_usd)

    @property
    def empty(self) -> bool:
        """A successful result that carries nothing: None, an empty list/dict/string, or an
        object whose every value is itself empty (``{"results": []}``). Numbers and booleans
        are never empty."""
        return self.ok and _empty(self.data)

    def summary(self) -> str:
        if not self.ok:
            return ("fatal error: " if self.fatal else "error: ") + (self.error or "unknown")
        if self.empty:
            return "empty"
        return display(self.data, 80)


StepKind = Literal["tool", "deduplicated", "finish_rejected", "invalid"]


@dataclass(frozen=True)
class _Rejected(JsonRecord):
    """The ``output`` of a ``finish_rejected`` step's JSON (other steps have no such key)."""

    output: Any


@dataclass(frozen=True)
class StepRecord(JsonRecord):
    """One entry of a run's trace."""

    step: int
    kind: StepKind
    tool: str | None = None
    args: Mapping[str, Any] | None = None
    result: ToolResult | None = None
    note: str = ""
    _rejected: _Rejected | None = field(default=None, kw_only=True, repr=False, compare=False,
                                        metadata=FLAT)  # output, set for finish_rejected
    output: Any = field(default=None, metadata=spec(skip=True))  # the rejected finish's
    # output (finish_rejected), for replay
    idempotency_key: str | None = field(default=None, metadata=OMIT)  # the call's own key
    # (tool, deduplicated), for replay
    seconds: float | None = field(default=None, metadata=OMIT)  # how long the tool call took
    # (tool), for replay

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rejected", _Rejected(self.output)
                           if self.kind == "finish_rejected" else None)

    def line(self) -> str:
        """One human-readable line (handoff packages, failure output)."""
        if self.kind in ("tool", "deduplicated"):  # such a record always names its tool
            call = f"{self.tool}({display(dict(self.args or {}), 60)})"
            outcome = self.result.summary() if self.result is not None else "no result"
            tag = " [deduplicated: not re-executed]" if self.kind == "deduplicated" else ""
            return f"{call} -> {outcome}{tag}"
        if self.kind == "finish_rejected":
            return f"proposed a finish; rejected: {self.note}"
        return f"invalid reply: {self.note}"


@dataclass(frozen=True)
class PredicateReport(JsonRecord):
    """What a stopping rule or finish check found: satisfied and missing predicate names.

    ``escalate`` (a question) means the check demands a human (e.g. two sources disagree).
    """

    satisfied: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    escalate: str | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "satisfied", tuple(self.satisfied))
        object.__setattr__(self, "missing", tuple(self.missing))

    @property
    def ok(self) -> bool:
        return not self.missing and self.escalate is None

    @classmethod
    def of(cls, value: PredicateReport | bool, name: str = "check") -> PredicateReport:
        """Normalise a validator's return value (a bool becomes one named predicate)."""
        if isinstance(value, PredicateReport):
            return value
        if isinstance(value, bool):
            return cls(satisfied=(name,)) if value else cls(missing=(name,))
        raise TypeError(f"a check must return bool or PredicateReport, got {type(value).__name__}")


@dataclass(frozen=True)
class Directive(JsonRecord):
    """What the model is told before its next call: the checks still missing, and why the last
    reply was not accepted."""

    _derived = ("text",)

    missing: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        parts: list[str] = list(self.notes)
        if self.missing:
            parts.append("Not done yet. Still missing: " + ", ".join(self.missing) + ".")
        return " ".join(parts)


@dataclass(frozen=True)
class Fact:
    """A fact in the run state with its freshness: an expiry time and the tools that void it."""

    value: Any
    expires_at: float | None = None
    invalidated_by: frozenset[str] | None = None  # None: every side-effect tool


@dataclass(frozen=True)
class Remaining(JsonRecord):
    """What is left of a run's budget before the next model call (None: no such limit).

    ``decide`` reads it as ``state.remaining`` to plan within what is left."""

    steps: int
    tokens: int | None
    cost_usd: float | None
    seconds: float | None


@dataclass(eq=False)
class RunState:
    """The mutable state of one run. ``data`` is where tool results are folded; predicates read it.

    Counters are maintained by the controller; do not edit them by hand.
    """

    run_id: str
    task: Any
    data: dict[str, Any] = field(default_factory=dict)
    step: int = 0  # model calls (decisions) made
    tool_calls: int = 0  # tool calls executed (deduplicated calls are not executed)
    calls_by_tool: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    cost_usd: float = 0.0
    trace: list[StepRecord] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    directive: Directive | None = None
    proposal: Any = None  # the output of the Finish being checked, else None
    reports: dict[str, PredicateReport] = field(default_factory=dict)
    daily_remaining_usd: float | None = None
    stop: Stop | None = None
    failed_by_tool: dict[str, int] = field(default_factory=dict)  # failed calls, per tool
    unmetered_steps: int = 0  # decisions that reported no token/cost usage
    approvals: frozenset[str] = frozenset()  # tools a person approved (resume)
    facts: dict[str, Any] = field(default_factory=dict)  # name -> Fact (see set_fact)
    started_at: float = 0.0  # the controller's clock when the run started
    _limits: Any = field(default=None, repr=False)  # (budget, clock) for ``remaining``
    _lease: Any = field(default=None, repr=False)
    last_action: Any = None  # the last action the model proposed (kept in the run record)
    usage: list[tuple[int, float]] = field(default_factory=list)  # (tokens, cost) per decision
    _settled_usd: float = field(default=0.0, repr=False)
    _warned: bool = field(default=False, repr=False)
    _scratch: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)
    _notes: list[str] = field(default_factory=list, repr=False)
    _missing: list[str] = field(default_factory=list, repr=False)
    _idempotency: dict[str, tuple[bytes, ToolResult]] = field(default_factory=dict, repr=False)
    _claims: dict[str, str] = field(default_factory=dict, repr=False)  # key -> owner (in flight)
    _call_started: float | None = field(default=None, repr=False)  # the clock at EXECUTE
    decide_seconds: list[float] = field(default_factory=list)  # per decision (run/arun only)
    _output: Any = field(default=None, repr=False)
    _alerted: bool = field(default=False, repr=False)
    _recorded: bool = field(default=False, repr=False)
    _admission: Any = field(default=None, repr=False)

    def scratch(self, owner: object) -> dict[str, Any]:
        """Per-run private memory for a condition object (conditions themselves are stateless)."""
        return self._scratch.setdefault(id(owner), {})

    @property
    def remaining(self) -> Remaining | None:
        """What is left of the budget (None for a state not started by a controller)."""
        if self._limits is None:
            return None
        budget, clock = self._limits
        tokens = None if budget.max_tokens is None else max(0, budget.max_tokens - self.tokens)
        spent = micro(self.cost_usd)
        cost = (None if budget.max_cost_usd is None
                else dollars(max(0, micro(budget.max_cost_usd) - spent)))
        if self.daily_remaining_usd is not None:
            left = dollars(max(0, micro(self.daily_remaining_usd) - spent))
            cost = left if cost is None else min(cost, left)
        seconds = (None if budget.max_seconds is None
                   else max(0.0, budget.max_seconds - (clock() - self.started_at)))
        return Remaining(max(0, budget.max_steps - self.step), tokens, cost, seconds)

    def set_fact(self, name: str, value: Any, *, ttl_s: float | None = None,
                 invalidated_by: frozenset[str] | set[str] | None = None) -> None:
        """Record a fact a predicate may rely on. It expires ``ttl_s`` seconds from now (by the
        controller's clock), and a write tool invalidates it: any side-effect tool when
        ``invalidated_by`` is None, else only the named tools (an empty set: none)."""
        clock = self._limits[1] if self._limits is not None else None
        now = clock() if clock is not None else 0.0
        self.facts[name] = Fact(value, None if ttl_s is None else now + ttl_s,
                                None if invalidated_by is None else frozenset(invalidated_by))

    def fact(self, name: str, default: Any = None) -> Any:
        """The fact's value while it is fresh, else ``default`` (stale state satisfies nothing)."""
        f = self.facts.get(name)
        if f is None:
            return default
        if f.expires_at is not None:
            clock = self._limits[1] if self._limits is not None else None
            if clock is None or clock() >= f.expires_at:
                return default
        return f.value

    @property
    def last_result(self) -> ToolResult | None:
        for rec in reversed(self.trace):
            if rec.result is not None:
                return rec.result
        return None


@dataclass(frozen=True)
class Checkpoint:
    """What a condition sees: the phase, the state, and the pending action or latest result."""

    phase: Phase
    state: RunState
    action: Action | None = None
    call: ToolCall | None = None
    result: ToolResult | None = None
