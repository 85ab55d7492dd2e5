"""Stop-reason evals: did the run end the right way?

The interpreter that runs an eval case (``runner/control/_evalcase.py`` holds the format)
through :class:`RunController` with no model: the scripted agent's turns, the scripted tool
results (cancelled at a deadline), the case's clock and kill switch; then the run is judged
against what the case expects (:class:`CaseResult`, :class:`EvalReport`). ``run_evals`` runs a
directory of cases (the bundled suite by default), with your own agent's ``decide`` if given
(``import_agent``).

Whatever the case expects, a run that did not end ``goal_met`` must carry no output (reading it
raises ``NoFinalOutput``) and must carry a handoff package; a case fails otherwise.
"""

from __future__ import annotations

import copy
import functools
import importlib
import tempfile
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.canonical import JsonRecord, canonical_bytes, key, spec
from runner.control._controller import RunController
from runner.control._errors import EvalCaseError, NoFinalOutput, UnmeteredUsage
from runner.control._evalcase import (
    EvalCase,
    _CaseClock,
    load_cases,
)
from runner.control._killswitch import KillSwitch
from runner.control._types import (
    RunState,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
    display,
)
from runner.errors import FormatError

__all__ = [
    "CaseResult",
    "EvalReport",
    "import_agent",
    "run_case",
    "run_evals",
]


@dataclass(frozen=True)
class CaseResult(JsonRecord):
    """How one case ended, against what it expected (as JSON, ``passed`` written last)."""

    _derived = ("passed",)

    case_id: str = field(metadata=key("id"))
    source: str
    expected: StopReason
    observed: StopReason
    stop_kind: str
    stop_detail: str
    output_ok: bool | None  # None: no output check
    output_detail: str = field(default="", metadata=spec(skip=True))  # (in failure_line only)
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


def run_evals(path: str | Path | None = None, *,
              decide: Callable[[RunState], Any] | None = None) -> EvalReport:
    """Load and run every case (see :func:`load_cases`), with your ``decide`` when given."""
    return EvalReport(tuple(run_case(c, decide=decide) for c in load_cases(path)))
