"""The eval-case file (``ect.stop-eval/1``) declared: each part a record whose fields say their
keys and types, read strictly by the record mechanism with the case format's own messages
(``$.budget.max_steps: must be >= 1``, ``$.agent.turns[0]: unknown field 'found'``), and what
each part builds (the budget, guard, rules, finish check and scripted turns of the case's
:class:`RunController`). ``runner/control/_evalcase.py`` documents the fields and loads cases.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from runner.canonical import (
    OMIT,
    JsonObject,
    JsonRecord,
    RecordFormatError,
    canonical_bytes,
    spec,
)
from runner.control._budget import Budget, ToolLimits
from runner.control._calibration import Calibration, LabelledRun, RunCost
from runner.control._conditions import NoProgressDetector, ToolFailure
from runner.control._controller import RunController
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

__all__ = ["EVAL_FORMAT", "MAX_EVAL_SECONDS", "MAX_EVAL_STEPS"]

EVAL_FORMAT = "ect.stop-eval/1"

MAX_EVAL_STEPS = 10_000
"""An eval case is a scripted run of a few dozen steps; a step budget above this ceiling is
refused, so a hostile case file cannot make ``ect evals run`` run without end."""

MAX_EVAL_SECONDS = 300.0
"""Every eval case runs under a wall-clock budget: its own ``max_seconds`` (at most this), or
this when it names none, so a hung agent or tool ends the case as ``time_budget`` instead of
hanging ``ect evals run``."""


def _confidence(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


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


Reader = Callable[[Any, str], Any]


# -- the case file, declared (read by the record mechanism, in the case format's own words) -----

def _fail(path: str, problem: str) -> RecordFormatError:
    return RecordFormatError(path, problem)


def _str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise _fail(path, "must be a string")
    return value


def _opt_str(value: object, path: str) -> str | None:
    return None if value is None else _str(value, path)


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, "must be a boolean")
    return value


def _int(value: object, path: str, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool):  # (a bool is no count)
        raise _fail(path, "must be an integer")
    if value < minimum:
        raise _fail(path, f"must be >= {minimum}")
    return value


def _count(value: object, path: str) -> int:
    return _int(value, path)


def _at_least_one(value: object, path: str) -> int:
    return _int(value, path, 1)


def _steps(value: object, path: str) -> int:
    n = _int(value, path, 1)
    if n > MAX_EVAL_STEPS:
        raise _fail(path, f"must be <= {MAX_EVAL_STEPS}")
    return n


def _number(value: object, path: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _fail(path, "must be a number")
    if value < 0:
        raise _fail(path, "must be >= 0")
    return float(value)


def _positive(value: object, path: str) -> float:
    x = _number(value, path)
    if not x > 0:
        raise _fail(path, "must be > 0")
    return x


def _seconds(value: object, path: str) -> float:
    x = _positive(value, path)
    if x > MAX_EVAL_SECONDS:
        raise _fail(path, f"must be <= {MAX_EVAL_SECONDS:g}")
    return x


def _object(value: object, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, "must be an object")
    return value


def _names(value: object, path: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(path, "must be a list of non-empty strings")
    return tuple(value)


def _listed_names(value: object, path: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _fail(path, "must be a list")
    return _names(value, path)


def _reason(value: object, path: str) -> StopReason:
    if isinstance(value, str) and value in set(StopReason):
        return StopReason(value)
    raise _fail(path, "must be one of " + ", ".join(StopReason))


def _verdicts(value: object, path: str) -> tuple[bool, ...]:
    if not isinstance(value, list):
        raise _fail(path, "must be a list")
    if not value or not all(isinstance(v, bool) for v in value):
        raise _fail(path, "must be a non-empty list of booleans")
    return tuple(value)


def _list_of(item: Reader, *, nonempty: bool = False) -> Reader:
    """The reader of a list (``must be a list``), each item read at ``path[i]``."""
    def read(value: object, path: str) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise _fail(path, "must be a list")
        if nonempty and not value:
            raise _fail(path, "must not be empty")
        return tuple(item(v, f"{path}[{i}]") for i, v in enumerate(value))
    return read


def _map_of(item: Reader) -> Reader:
    """The reader of an object of named values (``must be an object``), each at ``path.name``."""
    def read(value: object, path: str) -> dict[str, Any]:
        return {k: item(v, f"{path}.{k}") for k, v in _object(value, path).items()}
    return read


def _given(item: Reader) -> Reader:
    """The reader of an omittable field whose ``null`` means something: the value boxed in a
    1-tuple, so a field given as ``null`` is told apart from one left out."""
    def read(value: object, path: str) -> tuple[Any]:
        return (item(value, path),)
    return read


def _any(value: object, path: str) -> object:
    return value


Str = Annotated[str, _str]
Bool = Annotated[bool, _bool]
Count = Annotated[int, _count]
Number = Annotated[float, _number]
Positive = Annotated[float, _positive]
Names = Annotated[tuple[str, ...], _names]


class _Spec(JsonRecord):
    """A part of an eval-case file: unknown fields are refused, a non-object ``must be an
    object``; a field that may be left out is declared ``OMIT`` (its default applies)."""

    __slots__ = ()
    _object_error = "must be an object"


@dataclass(frozen=True)
class _ToolLimitsSpec(_Spec):
    per_tool: Annotated[dict[str, int], _map_of(_count)] | None = field(default=None,
                                                                        metadata=OMIT)
    default: Count | None = field(default=None, metadata=OMIT)
    side_effect_default: Count | None = field(default=None, metadata=OMIT)
    total: Count | None = field(default=None, metadata=OMIT)

    def limits(self) -> ToolLimits:
        return ToolLimits(per_tool=self.per_tool or {}, total=self.total,
                          default=8 if self.default is None else self.default,
                          side_effect_default=(1 if self.side_effect_default is None
                                               else self.side_effect_default))


@dataclass(frozen=True)
class _BudgetSpec(_Spec):
    max_steps: Annotated[int, _steps]
    max_tokens: Annotated[int, _at_least_one] | None = field(default=None, metadata=OMIT)
    max_cost_usd: Positive | None = field(default=None, metadata=OMIT)
    tool_limits: _ToolLimitsSpec | None = field(default=None, metadata=OMIT)
    max_seconds: Annotated[float, _seconds] | None = field(default=None, metadata=OMIT)
    tool_timeout_s: Positive | None = field(default=None, metadata=OMIT)
    tool_timeouts: Annotated[dict[str, float], _map_of(_positive)] | None = field(
        default=None, metadata=OMIT)

    def _check(self, obj: JsonObject, path: str) -> None:
        if self.max_tokens is None and self.max_cost_usd is None:
            raise _fail(path, "needs max_tokens or max_cost_usd")

    def budget(self, ceiling_s: float) -> Budget:
        return Budget(
            max_steps=self.max_steps, max_tokens=self.max_tokens, max_cost_usd=self.max_cost_usd,
            tool_limits=(self.tool_limits or _ToolLimitsSpec()).limits(),
            max_seconds=ceiling_s if self.max_seconds is None else self.max_seconds,
            tool_timeout_s=self.tool_timeout_s, tool_timeouts=self.tool_timeouts or {})


@dataclass(frozen=True)
class _SideEffectSpec(_Spec):
    amount_arg: str | None = field(default=None, metadata=spec(omit=True, read=_opt_str))
    max_amount: Number | None = field(default=None, metadata=OMIT)
    escalate_above: Number | None = field(default=None, metadata=OMIT)
    requires_approval: Bool | None = field(default=None, metadata=OMIT)
    idempotency_arg: tuple[str | None] | None = field(  # null: no idempotency argument
        default=None, metadata=spec(omit=True, read=_given(_opt_str)))

    def __post_init__(self) -> None:
        self.rule()  # (a ValueError is reported at this rule's path)

    def rule(self) -> SideEffectRule:
        return SideEffectRule(
            amount_arg=self.amount_arg, max_amount=self.max_amount,
            escalate_above=self.escalate_above, requires_approval=bool(self.requires_approval),
            idempotency_arg=("idempotency_key" if self.idempotency_arg is None
                             else self.idempotency_arg[0]))


@dataclass(frozen=True)
class _GuardSpec(_Spec):
    allow: Names
    side_effects: Annotated[dict[str, _SideEffectSpec], _map_of(_SideEffectSpec.from_json)] | None \
        = field(default=None, metadata=OMIT)
    approvals: Names | None = field(default=None, metadata=OMIT)

    def __post_init__(self) -> None:
        self.guard()  # (a ValueError is reported at the guard's path)

    def guard(self) -> Guard:
        return Guard(allow=frozenset(self.allow),
                     side_effects={k: v.rule() for k, v in (self.side_effects or {}).items()},
                     approvals=frozenset(self.approvals or ()))


@dataclass(frozen=True)
class _NoProgressSpec(_Spec):
    repeats: Count | None = field(default=None, metadata=OMIT)
    empty_results: Count | None = field(default=None, metadata=OMIT)
    stalled: Count | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class _ToolFailureSpec(_Spec):
    consecutive: Count | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class _RuleSpec(_Spec):
    name: Str
    require: Names
    stop_early: Bool | None = field(default=None, metadata=OMIT)

    def _check(self, obj: JsonObject, path: str) -> None:
        if not self.require:
            raise _fail(f"{path}.require", "must not be empty")

    def rule(self) -> StoppingRule:
        return StoppingRule(self.name, {k: _known(k) for k in self.require},
                            output=_known_values(self.require) if self.stop_early else None)


@dataclass(frozen=True)
class _LabelledSpec(_Spec):
    confidence: Number
    correct: Bool


@dataclass(frozen=True)
class _CalibratedSpec(_Spec):
    name: Str
    require: Names
    confidence_key: Str
    target_error_rate: Number
    labelled: Annotated[tuple[_LabelledSpec, ...], _list_of(_LabelledSpec.from_json)]

    def rule(self, path: str) -> StoppingRule:
        """The early-stop rule at the threshold measured on the labelled runs (each firing
        saves half of a 4-step run)."""
        full, at_signal = RunCost(4, 0.04, 4.0), RunCost(2, 0.02, 2.0)
        labelled = []
        for i, run in enumerate(self.labelled):
            try:
                labelled.append(LabelledRun(f"l{i}", run.confidence, run.correct, full,
                                            at_signal))
            except ValueError as e:
                raise _fail(f"{path}.labelled[{i}]", str(e)) from None
        key = self.confidence_key
        try:
            cal = Calibration.measure(labelled, model_version="eval",
                                      target_error_rate=self.target_error_rate,
                                      savings_by="steps")
            return cal.stopping_rule(model_version="eval",
                                     confidence=lambda s: _confidence(s.data.get(key)),
                                     output=_known_values(self.require), name=self.name)
        except (ValueError, ControlError) as e:
            raise _fail(path, str(e)) from None


@dataclass(frozen=True)
class _FinishCheckSpec(_Spec):
    require: Names | None = field(default=None, metadata=OMIT)
    verdicts: Annotated[tuple[bool, ...], _verdicts] | None = field(default=None, metadata=OMIT)

    def _check(self, obj: JsonObject, path: str) -> None:
        if len(obj) != 1:
            raise _fail(path, "needs exactly one of 'require' or 'verdicts'")

    def check(self) -> Callable[[RunState, Any], Any]:
        if self.require is not None:
            return _grounded(self.require)
        assert self.verdicts is not None  # (exactly one of the two, checked on reading)
        return _replayed(self.verdicts)


@dataclass(frozen=True)
class _ExpectOutputSpec(_Spec):
    equals: tuple[Any] | None = field(default=None, metadata=spec(omit=True, read=_given(_any)))
    subset: Annotated[dict[str, Any], _object] | None = field(default=None, metadata=OMIT)

    def _check(self, obj: JsonObject, path: str) -> None:
        if len(obj) != 1:
            raise _fail(path, "needs exactly one of 'equals' or 'subset'")


@dataclass(frozen=True)
class _KillSwitchSpec(_Spec):
    max_spend_per_day_usd: Positive | None = field(default=None, metadata=OMIT)
    step_reserve_usd: Positive | None = field(default=None, metadata=OMIT)
    engage_after_calls: Count | None = field(default=None, metadata=OMIT)

    def _check(self, obj: JsonObject, path: str) -> None:
        if not obj:
            raise _fail(path, "needs max_spend_per_day_usd or engage_after_calls")
        if self.step_reserve_usd is not None and self.max_spend_per_day_usd is None:
            raise _fail(f"{path}.step_reserve_usd", "needs max_spend_per_day_usd")

    def arguments(self) -> dict[str, float]:
        """The :class:`KillSwitch` arguments given (a fresh ledger per run)."""
        return {k: float(v) for k, v in (("max_spend_per_day_usd", self.max_spend_per_day_usd),
                                         ("step_reserve_usd", self.step_reserve_usd),
                                         ("engage_after_calls", self.engage_after_calls))
                if v is not None}


@dataclass(frozen=True)
class _ExpectSpendSpec(_Spec):
    spend_usd: Number
    reserved_usd: Number


@dataclass(frozen=True)
class _ExpectHandoffSpec(_Spec):
    question: Str | None = field(default=None, metadata=OMIT)
    found: Names | None = field(default=None, metadata=OMIT)
    done: Names | None = field(default=None, metadata=OMIT)
    asked: Str | None = field(default=None, metadata=OMIT)

    def fields(self) -> dict[str, Any]:
        """The handoff fields to match exactly (lists as the package's JSON holds them)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in (
            ("question", self.question), ("found", self.found), ("done", self.done),
            ("asked", self.asked)) if v is not None}


@dataclass(frozen=True)
class _CallSpec(_Spec):
    tool: Str
    args: Annotated[dict[str, Any], _object] | None = field(default=None, metadata=OMIT)
    idempotency_key: str | None = field(default=None, metadata=spec(omit=True, read=_opt_str))

    def __post_init__(self) -> None:
        self.call()  # (a ValueError is reported at the call's path)

    def call(self) -> ToolCall:
        try:
            return ToolCall(self.tool, self.args or {}, idempotency_key=self.idempotency_key)
        except FormatError as e:  # arguments that are not JSON
            raise ValueError(str(e)) from None


_KINDS = ("call", "finish", "escalate", "invalid", "raise")
_METERED = frozenset({"tokens", "cost_usd", "delay_s", "elapsed_s"})


@dataclass(frozen=True)
class _TurnSpec(_Spec):
    """One scripted turn: exactly one of call, finish, escalate, invalid, raise; ``found`` only
    with escalate; a ``raise`` turn costs nothing (only ``delay_s``/``elapsed_s``)."""

    call: _CallSpec | None = field(default=None, metadata=OMIT)
    finish: tuple[Any] | None = field(default=None, metadata=spec(omit=True, read=_given(_any)))
    escalate: Str | None = field(default=None, metadata=OMIT)
    invalid: Str | None = field(default=None, metadata=OMIT)
    raise_: Str | None = field(default=None, metadata=spec(key="raise", omit=True))
    found: Names | None = field(default=None, metadata=OMIT)
    tokens: Count | None = field(default=None, metadata=OMIT)
    cost_usd: Number | None = field(default=None, metadata=OMIT)
    delay_s: Number | None = field(default=None, metadata=OMIT)
    elapsed_s: Number | None = field(default=None, metadata=OMIT)

    def _check(self, obj: JsonObject, path: str) -> None:
        kinds = [k for k in _KINDS if k in obj]
        if len(kinds) != 1:
            raise _fail(path, "needs exactly one of call, finish, escalate, invalid, raise")
        allowed = ({"delay_s", "elapsed_s"} if kinds[0] == "raise"
                   else _METERED | {"found"} if kinds[0] == "escalate" else _METERED)
        unknown = sorted(set(obj) - allowed - {kinds[0]})
        if unknown:
            raise _fail(path, f"unknown field {unknown[0]!r}")

    def turn(self) -> Turn | str:
        """The scripted turn (a str: ``decide`` raises ``RuntimeError`` with it)."""
        if self.raise_ is not None:
            return self.raise_
        action: Action
        if self.call is not None:
            action = self.call.call()
        elif self.finish is not None:
            action = Finish(self.finish[0])
        elif self.escalate is not None:
            action = Escalate(self.escalate, self.found or ())
        else:
            assert self.invalid is not None  # (exactly one kind, checked on reading)
            action = Invalid(self.invalid)
        return Turn(action, self.tokens or 0, self.cost_usd or 0.0)


@dataclass(frozen=True)
class _AgentSpec(_Spec):
    turns: Annotated[tuple[_TurnSpec, ...], _list_of(_TurnSpec.from_json, nonempty=True)] \
        | None = field(default=None, metadata=OMIT)
    import_: Str | None = field(default=None, metadata=spec(key="import", omit=True))

    def _check(self, obj: JsonObject, path: str) -> None:
        if len(obj) != 1:
            raise _fail(path, "needs exactly one of 'turns' or 'import'")
        if self.import_ is not None and self.import_.count(":") != 1:
            raise _fail(f"{path}.import", "must be 'package.module:function'")


@dataclass(frozen=True)
class _ResultSpec(_Spec):
    ok: Bool | None = field(default=None, metadata=OMIT)
    data: Any = field(default=None, metadata=OMIT)
    error: tuple[str | None] | None = field(  # null: no error even when not ok
        default=None, metadata=spec(omit=True, read=_given(_opt_str)))
    fatal: Bool | None = field(default=None, metadata=OMIT)
    cost_usd: Number | None = field(default=None, metadata=OMIT)
    delay_s: Number | None = field(default=None, metadata=OMIT)

    def result(self) -> ToolResult:
        ok = self.ok is not False
        return ToolResult(
            ok=ok, data=self.data, fatal=bool(self.fatal), cost_usd=self.cost_usd or 0.0,
            error=(None if ok else "failed") if self.error is None else self.error[0])


@dataclass(frozen=True)
class _ToolSpec(_Spec):
    results: Annotated[tuple[_ResultSpec, ...], _list_of(_ResultSpec.from_json, nonempty=True)]


@dataclass(frozen=True, kw_only=True)
class _CaseFile(_Spec):
    """An eval case file as written (the module docstring lists its fields)."""

    _format = EVAL_FORMAT
    _format_error = "must be {want!r}"
    _path = "$"

    id: Str
    description: Str | None = field(default=None, metadata=OMIT)
    task: Str
    expect_stop: Annotated[StopReason, _reason]
    expect_output: _ExpectOutputSpec | None = field(default=None, metadata=OMIT)
    budget: _BudgetSpec | None = field(default=None, metadata=OMIT)
    guard: _GuardSpec | None = field(default=None, metadata=OMIT)
    no_progress: tuple[_NoProgressSpec | None] | None = field(  # null: detection off
        default=None, metadata=spec(omit=True, read=_given(
            lambda v, p: None if v is None else _NoProgressSpec.from_json(v, p))))
    tool_failure: _ToolFailureSpec | None = field(default=None, metadata=OMIT)
    finish_check: _FinishCheckSpec | None = field(default=None, metadata=OMIT)
    rules: Annotated[tuple[_RuleSpec, ...], _list_of(_RuleSpec.from_json)] | None = field(
        default=None, metadata=OMIT)
    tools: Annotated[dict[str, _ToolSpec], _map_of(_ToolSpec.from_json)] | None = field(
        default=None, metadata=OMIT)
    expect_steps: Count | None = field(default=None, metadata=OMIT)
    expect_tools: Annotated[tuple[str, ...], _listed_names] | None = field(default=None,
                                                                           metadata=OMIT)
    expect_not_run: Names | None = field(default=None, metadata=OMIT)
    expect_kind: Str | None = field(default=None, metadata=OMIT)
    kill_switch: _KillSwitchSpec | None = field(default=None, metadata=OMIT)
    expect_spend: _ExpectSpendSpec | None = field(default=None, metadata=OMIT)
    expect_handoff: _ExpectHandoffSpec | None = field(default=None, metadata=OMIT)
    calibrated_rule: _CalibratedSpec | None = field(default=None, metadata=OMIT)
    agent: _AgentSpec

    def _check(self, obj: JsonObject, path: str) -> None:
        goal = self.expect_stop is StopReason.GOAL_MET
        if self.expect_output is not None and not goal:
            raise _fail(f"{path}.expect_output", "only a goal_met case has an output to check")
        if self.expect_spend is not None and (self.kill_switch is None
                                              or self.kill_switch.max_spend_per_day_usd is None):
            raise _fail(f"{path}.expect_spend", "needs a kill_switch with max_spend_per_day_usd "
                        "(its ledger holds the spend)")
        if self.expect_handoff is not None and goal:
            raise _fail(f"{path}.expect_handoff", "a goal_met run has no handoff")
        if self.finish_check is None and not self.rules and self.calibrated_rule is None:
            raise _fail(path, "needs finish_check or rules (a finish must be checked)")

    def controller(self, clock: Callable[[], float], ceiling_s: float) -> RunController:
        """The controller of this case, on the case's ``clock``; a case naming no
        ``max_seconds`` runs for ``ceiling_s`` at most."""
        off = self.no_progress is not None and self.no_progress[0] is None
        np_ = (self.no_progress[0] if self.no_progress is not None else None) or _NoProgressSpec()
        tf = self.tool_failure or _ToolFailureSpec()
        try:
            no_progress: NoProgressDetector | Literal[False] = False if off else NoProgressDetector(
                repeats=3 if np_.repeats is None else np_.repeats,
                empty_results=3 if np_.empty_results is None else np_.empty_results,
                stalled=np_.stalled)
            tool_failure = ToolFailure(2 if tf.consecutive is None else tf.consecutive)
        except ValueError as e:
            raise _fail("$.no_progress/$.tool_failure", str(e)) from None
        rules = [r.rule() for r in self.rules or ()]
        if self.calibrated_rule is not None:
            rules.append(self.calibrated_rule.rule("$.calibrated_rule"))
        try:
            return RunController(
                (self.budget or _DEFAULT_BUDGET).budget(ceiling_s),
                guard=None if self.guard is None else self.guard.guard(), rules=rules,
                validate=None if self.finish_check is None else self.finish_check.check(),
                no_progress=no_progress, tool_failure=tool_failure, fold=_merge, clock=clock)
        except ValueError as e:
            raise _fail("$", str(e)) from None


_DEFAULT_BUDGET = _BudgetSpec(max_steps=12, max_tokens=60_000)
