"""Stop-reason eval cases: the case format (``ect.stop-eval/1``, read strictly by the records of
``runner/control/_casefile.py``) and its loader.

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from runner.canonical import (
    RecordFormatError,
    load_strict_file,
)
from runner.control._casefile import EVAL_FORMAT, _CaseFile
from runner.control._casefile import MAX_EVAL_SECONDS as MAX_EVAL_SECONDS  # (re-exported)
from runner.control._controller import RunController
from runner.control._errors import EvalCaseError
from runner.control._types import (
    StopReason,
    ToolResult,
    Turn,
)
from runner.errors import FormatError

__all__ = [
    "BUNDLED_EVALS",
    "EVAL_FORMAT",
    "EvalCase",
    "load_cases",
]

BUNDLED_EVALS = "runner.control/evals"  # resolved with importlib.resources


class _Reader:
    """Strict field access that names the file and field path in every error (the run-record
    reader of ``ect evals capture``, runner/control/_capture.py)."""

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

    def typed(self, value: Any, path: str, kind: type | tuple[type, ...], what: str) -> Any:
        # a bool is an int to isinstance; it passes only where a boolean is asked for
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.fail(path, f"must be {what}")
        return value

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
        """Read a case strictly (:class:`_CaseFile`); errors name ``source`` and the field."""
        try:
            return _case(_CaseFile.from_json(obj), obj, source)
        except RecordFormatError as e:
            raise EvalCaseError(f"{source}: {e}") from None


def _case(file: _CaseFile, raw: dict[str, Any], source: str) -> EvalCase:
    """The case ``file`` describes, its controller built (``raw``: the file's object)."""
    clock = _CaseClock()
    turns = file.agent.turns or ()
    tools = file.tools or {}
    return EvalCase(
        file.id, source, file.description or "", file.task, file.expect_stop,
        raw.get("expect_output"), file.controller(clock, MAX_EVAL_SECONDS),
        tuple(t.turn() for t in turns),
        {k: tuple(r.result() for r in t.results) for k, t in tools.items()}, raw,
        file.expect_steps, file.expect_tools, file.expect_not_run or (), file.expect_kind,
        file.agent.import_,
        {k: tuple(r.delay_s or 0.0 for r in t.results) for k, t in tools.items()},
        tuple(t.delay_s or 0.0 for t in turns),
        None if file.kill_switch is None else file.kill_switch.arguments(),
        None if file.expect_spend is None else {
            "spend_usd": file.expect_spend.spend_usd,
            "reserved_usd": file.expect_spend.reserved_usd},
        tuple(t.elapsed_s or 0.0 for t in turns),
        None if file.expect_handoff is None else file.expect_handoff.fields(), clock)


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

