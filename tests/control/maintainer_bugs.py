"""Nine single-line bugs a maintainer could write in runner/control, and whether the bundled
evals catch them: the measurement behind "the bundled evals catch N of 9" in docs/control.md.

mutmut's operators and the extra operators (tests/control/extra_mutation.py) are generated;
these are written by hand, one per class of bug the stop controls' review found the bundled
evals blind to (dropped settle, case-insensitive allow-list, off-by-one deadline, kill switch
not re-read, wrong idempotency key, clock source, handoff fields, calibration arithmetic, and a
second dropped settle). Each is one line of the real source replaced by another; it is applied
in process by swapping the function's code object (as the extra operators are), in a forked
child, and judged by ``run_evals()``: the evals catch it when the suite does not pass (a case
fails, the harness raises, or it hangs past the time limit).

    python -m tests.control.maintainer_bugs          # the table; exit 0 when >= 7 are caught
    python -m tests.control.maintainer_bugs --units  # also judge each by its unit tests

``make mutate`` runs it after mutmut and the extra operators.
"""

from __future__ import annotations

import ast
import importlib
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FunctionType, ModuleType

from tests.control.extra_mutation import (
    _compiled,
    _functions,
    _live,
    _units_fail,
    applied,
    unit_tests,
)

REQUIRED = 7  # the bundled evals must catch at least this many of the nine


@dataclass(frozen=True)
class Bug:
    ident: str
    kind: str  # the class of bug
    module: str  # runner.control._steps
    function: str  # _Steps.result
    old: str  # the line as it is (stripped; it must occur exactly once in the function)
    new: str  # the line as the bug writes it


BUGS: tuple[Bug, ...] = (
    Bug("B1", "dropped settle", "runner.control._steps", "_Steps.result",
        "self._settle(state)", "pass"),
    Bug("B2", "case-insensitive allow-list", "runner.control._guards", "Guard.judge",
        "if call.tool not in self.allow:",
        "if call.tool.casefold() not in {a.casefold() for a in self.allow}:"),
    Bug("B3", "off-by-one deadline", "runner.control._conditions", "MaxTime.check",
        "if left is not None and left.seconds is not None and left.seconds <= 0:",
        "if left is not None and left.seconds is not None and left.seconds < 0:"),
    Bug("B4", "kill switch not re-read", "runner.control._steps",
        "_Steps._before_model",
        "stop = (self._flag(state) or self._steps.check(point) or self._timed(point)",
        "stop = (self._steps.check(point) or self._timed(point)"),
    Bug("B5", "wrong idempotency key", "runner.control._guards", "_key_of",
        "return call.idempotency_key", "return call.tool"),
    Bug("B6", "clock source", "runner.control._checks", "_Checks.__init__",
        "self.clock = clock or time.monotonic", "self.clock = time.monotonic"),
    Bug("B7", "handoff fields", "runner.control._handoff", "build_handoff",
        "question=stop.question or _default_question(stop),",
        "question=_default_question(stop),"),
    Bug("B8", "calibration arithmetic", "runner.control._calibration", "RuleReport.error_rate",
        "return self.errors / self.firings if self.firings else None",
        "return self.errors / self.runs if self.runs else None"),
    Bug("B9", "dropped settle", "runner.control._checks", "_Checks._reserve",
        "self._settle(state)", "pass"),
)

BUG_TIMEOUT_S = 120.0  # a bug that makes the evals hang is caught (a hang is detected)


def compile_bug(bug: Bug) -> tuple[ModuleType, FunctionType, CodeType]:
    """The module, the live function and the code object of the function with the bug."""
    module = importlib.import_module(bug.module)
    path = Path(module.__file__ or "")
    lines = path.read_text("utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    fn = dict(_functions(tree)).get(bug.function)
    if fn is None:
        raise LookupError(f"{bug.ident}: no function {bug.function} in {bug.module}")
    span = range(fn.lineno - 1, fn.end_lineno or fn.lineno)
    hits = [i for i in span if lines[i].strip() == bug.old]
    if len(hits) != 1:
        raise LookupError(f"{bug.ident}: {bug.old!r} occurs {len(hits)} times in {bug.function}")
    line = lines[hits[0]]
    lines[hits[0]] = line[: len(line) - len(line.lstrip())] + bug.new
    mutated = dict(_functions(ast.parse("\n".join(lines)))).get(bug.function)
    live = _live(module, bug.function)
    assert mutated is not None and live is not None
    code = _compiled(module, mutated, live)
    if code is None:
        raise LookupError(f"{bug.ident}: cannot compile the bug into {bug.function}")
    return module, live, code


def _evals_fail() -> bool:
    from runner.control import run_evals

    try:
        return not run_evals().ok
    except Exception:  # a bug that crashes the harness is caught by the evals too
        return True


def judge(bug: Bug, *, units: bool = False) -> dict[str, bool]:
    """``{"evals": caught?, "units": caught?}`` (units only when asked), each judged in a
    forked child with the bug applied; a child that hangs past the limit counts as caught."""
    module, live, code = compile_bug(bug)
    out: dict[str, bool] = {}
    for what in ("evals", "units") if units else ("evals",):
        pid = os.fork()
        if pid == 0:  # the child: apply, judge, report by exit code
            status = 0
            try:
                with applied(module, live, code):
                    failed = (_evals_fail() if what == "evals"
                              else _units_fail(unit_tests(bug.module)))
                status = 1 if failed else 0
            finally:
                os._exit(status)
        end = time.monotonic() + BUG_TIMEOUT_S
        while True:
            done, wait = os.waitpid(pid, os.WNOHANG)
            if done:
                out[what] = os.waitstatus_to_exitcode(wait) != 0
                break
            if time.monotonic() > end:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                out[what] = True
                break
            time.sleep(0.05)
    return out


def main(argv: list[str]) -> int:
    units = "--units" in argv
    caught = 0
    print(f"{'bug':<4} {'class':<28} {'function':<34} {'evals':>6}" + ("  units" if units else ""))
    for bug in BUGS:
        verdict = judge(bug, units=units)
        caught += verdict["evals"]
        row = f"{bug.ident:<4} {bug.kind:<28} {bug.function:<34} {'caught' if verdict['evals'] else 'MISSED':>6}"
        if units:
            row += "  " + ("caught" if verdict["units"] else "MISSED")
        print(row, flush=True)
    print(f"the bundled evals catch {caught} of {len(BUGS)} (at least {REQUIRED} required)")
    return 0 if caught >= REQUIRED else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
