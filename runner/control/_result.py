"""The run result: exactly one stop; a final output only when the goal was met."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from runner.canonical import FLAT, OMIT, JsonObject, JsonRecord, spec
from runner.control._errors import NoFinalOutput
from runner.control._handoff import HandoffPackage
from runner.control._types import (
    PredicateReport,
    StepRecord,
    Stop,
    StopReason,
    _sorted_records,
)

__all__ = ["RUN_RECORD_FORMAT", "RunResult"]

RUN_RECORD_FORMAT = "ect.run-record/1"

T = TypeVar("T")
_NO_OUTPUT: Any = object()


def _jsonable(value: Any) -> Any:
    """The folded run state as JSON (what a rule needs to be recomputed); values that are not
    JSON are kept as their repr."""
    from runner.canonical import canonical_bytes, loads_strict
    from runner.errors import FormatError

    try:
        return loads_strict(canonical_bytes(value))
    except FormatError:
        return {str(k): _jsonable(v) if isinstance(v, dict) else repr(v)
                for k, v in value.items()} if isinstance(value, dict) else repr(value)


@dataclass(frozen=True)
class _OpenKeys(JsonRecord):
    """Keys a record carries beyond its declared fields, written into its object as they are
    (the run record's task, controls, last action and usage, which the controller assembles).
    The record mechanism has no open part of its own: this is the one place it is spelled."""

    keys: Mapping[str, Any]

    def to_json(self) -> JsonObject:
        return dict(self.keys)


@dataclass(frozen=True)
class _FinalOutput(JsonRecord):
    """The ``output`` of a goal_met run record (any JSON, ``null`` too; no other run has one)."""

    output: Any


@dataclass(frozen=True)
class RunResult(JsonRecord, Generic[T]):
    """How a run ended (as JSON, the run record ``ect.run-record/1``).

    ``output`` exists only for ``goal_met``: reading it after any other stop raises
    :class:`NoFinalOutput`, so a budget stop can never be mistaken for an answer. The work done so
    far stays available, labelled as such, in ``trace`` and ``data``; every non-goal stop carries
    a :class:`HandoffPackage`.
    """

    _format = RUN_RECORD_FORMAT

    stop: Stop
    run_id: str
    steps: int
    tool_calls: int
    tokens: int
    cost_usd: float
    trace: tuple[StepRecord, ...]
    data: dict[str, Any] = field(default_factory=dict, metadata=spec(write=_jsonable))
    handoff: HandoffPackage | None = field(default=None, metadata=OMIT)  # (not goal_met)
    unmetered_steps: int = field(default=0, metadata=spec(skip=True))  # decisions whose usage
    # decide did not report
    reports: dict[str, PredicateReport] = field(  # last report per rule
        default_factory=dict, metadata=spec(write=_sorted_records))
    record: dict[str, Any] = field(default_factory=dict, metadata=spec(skip=True))  # task,
    # controls, last action, usage (written by _record)
    _record: _OpenKeys | None = field(default=None, kw_only=True, repr=False, compare=False,
                                      metadata=FLAT)  # set from record
    _final: _FinalOutput | None = field(default=None, kw_only=True, repr=False, compare=False,
                                        metadata=FLAT)  # set from _output when goal_met
    _output: Any = field(default=_NO_OUTPUT, repr=False, metadata=spec(skip=True))
    _resume: Callable[..., Any] | None = field(default=None, repr=False, compare=False,
                                               metadata=spec(skip=True))

    def __post_init__(self) -> None:
        object.__setattr__(self, "_record", _OpenKeys(self.record))
        object.__setattr__(self, "_final", None if self._output is _NO_OUTPUT
                           else _FinalOutput(self._output))
        goal = self.stop.reason is StopReason.GOAL_MET
        if goal and self._output is _NO_OUTPUT:
            raise ValueError("a goal_met result needs its output")
        if not goal and self._output is not _NO_OUTPUT:
            raise ValueError(f"a {self.stop.reason} result cannot carry a final output")
        if goal and self.handoff is not None:
            raise ValueError("a goal_met result has no handoff package")
        if not goal and self.handoff is None:
            raise ValueError("every non-goal result carries a handoff package")

    @classmethod
    def build(cls, *, stop: Stop, output: Any = _NO_OUTPUT, **kw: Any) -> RunResult[Any]:
        return cls(stop=stop, _output=output, **kw)

    @property
    def reason(self) -> StopReason:
        return self.stop.reason

    @property
    def completed(self) -> bool:
        """True only for ``goal_met``."""
        return self.stop.reason is StopReason.GOAL_MET

    @property
    def resumable(self) -> bool:
        """True for a ``needs_human`` result of ``run``/``arun`` that :meth:`resume` can continue."""
        return self._resume is not None

    def resume(self, approvals: frozenset[str] | set[str] = frozenset(),
               answer: str | None = None) -> Any:
        """Continue a ``needs_human`` run after a person decided: ``approvals`` are the tools
        now approved, ``answer`` is fed to the model. Budgets, counters and idempotency keys
        carry on, so an approved side effect is not repeated. Returns the new
        :class:`RunResult` (an awaitable of it for a run started with ``arun``).

        Raises:
            ValueError: the run did not end ``needs_human`` (or was driven step by step: use
                ``RunController.reopen`` there).
        """
        if self._resume is None:
            raise ValueError(f"run {self.run_id} ended {self.stop.reason}: only a needs_human "
                             "result of run()/arun() can be resumed")
        return self._resume(approvals, answer)

    @property
    def output(self) -> T:
        """The validated final output.

        Raises:
            NoFinalOutput: the run did not end with ``goal_met``.
        """
        if self.stop.reason is not StopReason.GOAL_MET:
            raise NoFinalOutput(
                f"run {self.run_id} stopped with {self.stop.reason} ({self.stop.detail}); "
                "it has no final output"
            )
        return self._output  # type: ignore[no-any-return]
