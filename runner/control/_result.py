"""The run result: exactly one stop; a final output only when the goal was met."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from runner.control._errors import NoFinalOutput
from runner.control._handoff import HandoffPackage
from runner.control._types import PredicateReport, StepRecord, Stop, StopReason

__all__ = ["RUN_RECORD_FORMAT", "RunResult"]

RUN_RECORD_FORMAT = "ect.run-record/1"

T = TypeVar("T")
_NO_OUTPUT: Any = object()


@dataclass(frozen=True)
class RunResult(Generic[T]):
    """How a run ended.

    ``output`` exists only for ``goal_met``: reading it after any other stop raises
    :class:`NoFinalOutput`, so a budget stop can never be mistaken for an answer. The work done so
    far stays available, labelled as such, in ``trace`` and ``data``; every non-goal stop carries
    a :class:`HandoffPackage`.
    """

    stop: Stop
    run_id: str
    steps: int
    tool_calls: int
    tokens: int
    cost_usd: float
    trace: tuple[StepRecord, ...]
    data: dict[str, Any] = field(default_factory=dict)
    handoff: HandoffPackage | None = None
    unmetered_steps: int = 0  # decisions whose usage decide did not report
    reports: dict[str, PredicateReport] = field(default_factory=dict)  # last report per rule
    record: dict[str, Any] = field(default_factory=dict)  # task, controls, last action, usage
    _output: Any = field(default=_NO_OUTPUT, repr=False)
    _resume: Callable[..., Any] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": RUN_RECORD_FORMAT,
            "run_id": self.run_id,
            "stop": self.stop.to_json(),
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "trace": [r.to_json() for r in self.trace],
            "data": _jsonable(self.data),
            "reports": {k: v.to_json() for k, v in sorted(self.reports.items())},
            **self.record,
        }
        if self.completed:
            out["output"] = self._output
        else:
            assert self.handoff is not None
            out["handoff"] = self.handoff.to_json()
        return out


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
