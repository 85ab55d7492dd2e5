"""Mutants a maintainer would write, beyond mutmut's operators: a dropped statement, ``and`` and
``or`` swapped, and a comparison made case-insensitive.

mutmut 3 mutates operators, constants, strings and arguments; it never deletes a statement
(``self._settle(state)`` gone from ``result()``), swaps a boolean operator, or makes a name
check ignore case (an allow-list that lets ``Refund`` through for ``refund``). This module
generates those three classes for ``runner/control`` from the source (``ast``) and judges each
mutant twice: by the bundled eval suite (``run_evals()``) and by the control unit tests. A
mutant is applied in process by swapping the mutated function's code object (``__code__``), so
a mutant costs one test run, not an interpreter start.

    python -m tests.control.extra_mutation                 # every module (long)
    python -m tests.control.extra_mutation _guards _ledger # these modules
    python -m tests.control.extra_mutation --evals-only    # judge by the bundled evals alone

Each mutant is judged by the bundled evals first; one they miss is judged by the unit tests.
    python -m tests.control.extra_mutation -v              # list the survivors

Operators (the ``class`` of a mutant):

- ``statement``: one statement of a function body replaced by ``pass`` (expression statements
  such as calls, assignments, augmented assignments, ``del`` and ``raise``; not docstrings);
- ``boolean``: one ``and`` turned into ``or`` or the reverse;
- ``case``: one ``==``, ``!=``, ``in`` or ``not in`` comparison made case-insensitive for
  strings (both sides, and every string of a collection, compared by ``str.casefold``).

A line holding ``# pragma: no mutate`` (the marker mutmut honours) is left alone here too.
Equivalent survivors are listed in :data:`EXPLAINED` with the reason.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib
import inspect
import io
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FunctionType, ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "runner" / "control"
CLASSES = ("statement", "boolean", "case")

# The control tests that judge a mutant of a module: the module's own test files
# (tests/control/test_<module>*.py, or OWN_TESTS where tests/control, grouped by behaviour,
# names them otherwise) and the suites every module is judged by (mutmut maps tests to
# functions by tracing; this run maps them by name, which keeps a mutant to seconds).
SHARED_TESTS = ("test_stop_reasons.py", "test_step_api.py", "test_progress_and_rules.py",
                "test_values.py", "test_budget.py", "test_exits.py", "test_deadlines.py",
                "test_ceilings.py", "test_killswitch.py", "test_idempotency.py",
                "test_conditions.py", "test_guards.py", "test_calibration.py")
OWN_TESTS: dict[str, tuple[str, ...]] = {
    "_verdicts": ("test_exits.py",),
    "_checks": ("test_exits.py", "test_drivers.py"),
    "_claims": ("test_idempotency.py", "test_claims.py"),
    "_steps": ("test_exits.py", "test_drivers.py", "test_handoff.py"),
    "_controller": ("test_drivers.py",),
    "_evalcase": ("test_evals.py", "test_eval_case_errors.py", "test_eval_fields.py"),
    "_evals": ("test_evals.py", "test_eval_harness.py", "test_eval_fields.py"),
    "_capture": ("test_capture.py", "test_eval_harness.py"),
    "_types": ("test_values.py",),
    "_ledger": ("test_ledgers.py", "test_ledger_liveness.py", "test_claims.py"),
}


def unit_tests(module: str) -> tuple[str, ...]:
    name = module.rsplit(".", 1)[-1]
    stem = name.lstrip("_")
    own = sorted({*(str(p.relative_to(REPO)) for p in (REPO / "tests" / "control").glob(
        f"test_{stem}*.py")), *(f"tests/control/{f}" for f in OWN_TESTS.get(name, ()))})
    shared = (f"tests/control/{f}" for f in SHARED_TESTS)
    return (*own, *(s for s in shared if s not in own))

# mutant id -> why it survives (it cannot change behaviour), reviewed by hand
EXPLAINED: dict[str, str] = {
    "runner.control._guards:Guard.judge:case:131:1":
        "compares canonical bytes, which casefold leaves alone",
    "runner.control._guards:Guard.judge:case:162:5":
        "StopReason values are lower-case already: casefold changes neither side",
    "runner.control._killswitch:KillSwitch.engaged:case:153:0":
        '"" and "0" have no case: a casefolded value is off exactly when the value is',
    "runner.control._rules:StoppingRule.__init__:case:57:0":
        "compares two booleans, which casefold leaves alone",
    "runner.control._rules:StoppingRule.__init__:case:68:1":
        "compares two lengths, which casefold leaves alone",
    "runner.control._killswitch:KillSwitch.admit:case:193:0":
        'the refusal kind is the ledger\'s own lower-case constant ("runs" or "spend")',
}


@dataclass(frozen=True)
class Mutant:
    module: str  # runner.control._guards
    function: str  # Guard.judge
    kind: str  # one of CLASSES
    line: int
    index: int  # the n-th mutation point of this kind in the function

    @property
    def ident(self) -> str:
        return f"{self.module}:{self.function}:{self.kind}:{self.line}:{self.index}"


def _casefold(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def _ci_compare(op: str, left: Any, right: Any) -> bool:
    """``left op right`` with every string compared by ``casefold`` (the ``case`` mutant)."""
    a = _casefold(left)
    if op in ("in", "not in"):
        if isinstance(right, str):
            found = isinstance(a, str) and a in right.casefold()
        else:
            try:
                found = any(_casefold(x) == a for x in right)
            except TypeError:
                found = left in right
        return found if op == "in" else not found
    b = _casefold(right)
    return a == b if op == "==" else a != b


_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in"}
_STATEMENTS = (ast.Expr, ast.Assign, ast.AugAssign, ast.Delete, ast.Raise)


def _skipped(node: ast.AST, lines: list[str]) -> bool:
    line = lines[getattr(node, "lineno", 1) - 1]
    return "pragma: no mutate" in line


def _points(fn: ast.AST, kind: str) -> list[ast.AST]:
    """Every node of ``fn`` that a ``kind`` mutant changes, in source order."""
    out: list[ast.AST] = []
    for node in ast.walk(fn):
        if kind == "statement" and isinstance(node, _STATEMENTS):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring
            out.append(node)
        elif kind == "boolean" and isinstance(node, ast.BoolOp):
            out.append(node)
        elif (kind == "case" and isinstance(node, ast.Compare) and len(node.ops) == 1
              and type(node.ops[0]) in _OPS):
            out.append(node)
    return sorted(out, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


class _Mutate(ast.NodeTransformer):
    def __init__(self, target: ast.AST, kind: str) -> None:
        self.target, self.kind = target, kind

    def visit(self, node: ast.AST) -> Any:
        if node is not self.target:
            return super().visit(node)
        if self.kind == "statement":
            return ast.copy_location(ast.Pass(), node)
        if self.kind == "boolean":
            assert isinstance(node, ast.BoolOp)
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            return node
        assert isinstance(node, ast.Compare)
        call = ast.Call(ast.Name("__ci_compare", ast.Load()),
                        [ast.Constant(_OPS[type(node.ops[0])]), node.left, node.comparators[0]], [])
        return ast.copy_location(call, node)


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}.{item.name}", item


def _live(module: ModuleType, qualname: str) -> FunctionType | None:
    """The function object whose ``__code__`` a mutant of ``qualname`` replaces."""
    owner: Any = module
    parts = qualname.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
    raw = (owner.__dict__ if isinstance(owner, type) else vars(owner)).get(parts[-1])
    if isinstance(raw, property):
        raw = raw.fget
    elif isinstance(raw, staticmethod | classmethod):
        raw = raw.__func__
    raw = inspect.unwrap(raw) if callable(raw) else raw
    return raw if isinstance(raw, FunctionType) else None


def _compiled(module: ModuleType, fn: ast.FunctionDef | ast.AsyncFunctionDef,
              live: FunctionType) -> CodeType | None:
    """Compile the (mutated) definition so its code object can replace ``live.__code__``."""
    fn.decorator_list = []
    for sub in ast.walk(fn):  # a mutant's new nodes take the place of the ones they replace
        if "lineno" in sub._attributes and not hasattr(sub, "lineno"):
            ast.copy_location(sub, fn)
    freevars = live.__code__.co_freevars
    # a method using super() or a closure needs the same free variables: define it inside a
    # function that binds them, and take the inner code object
    def at(node: ast.AST) -> Any:
        for sub in ast.walk(node):
            if "lineno" in sub._attributes and not hasattr(sub, "lineno"):
                ast.copy_location(sub, fn)
        return node

    body: list[ast.stmt] = [at(ast.Assign([ast.Name(v, ast.Store())], ast.Constant(None)))
                            for v in freevars]
    outer = at(ast.FunctionDef("__outer", ast.arguments([], [], None, [], [], None, []),
                               [*body, fn, at(ast.Return(ast.Name(fn.name, ast.Load())))], []))
    tree = ast.Module([outer], [])
    ns: dict[str, Any] = dict(vars(module))
    exec(compile(tree, live.__code__.co_filename, "exec"), ns)  # our own source, mutated
    code: CodeType = ns["__outer"]().__code__
    return code if code.co_freevars == freevars else None


def mutants(modules: list[str] | None = None, *, function: str | None = None,
            ) -> Iterator[tuple[Mutant, ModuleType, FunctionType, CodeType]]:
    """Every mutant of the named modules (default all of runner/control), compiled; only those
    of ``function`` (a qualified name such as ``Guard.judge``) when given."""
    names = modules or sorted(p.stem for p in PACKAGE.glob("_*.py") if p.stem != "__init__")
    for short in names:
        name = f"runner.control.{short.removeprefix('runner.control.')}"
        module = importlib.import_module(name)
        source = Path(module.__file__ or "").read_text("utf-8")
        lines = source.splitlines()
        tree = ast.parse(source)
        for qualname, fn in _functions(tree):
            if function is not None and qualname != function:
                continue
            live = _live(module, qualname)
            if live is None:
                continue
            for kind in CLASSES:
                for i, point in enumerate(_points(fn, kind)):
                    if _skipped(point, lines):
                        continue
                    clone = copy.deepcopy(fn)  # the same walk finds the same node in it
                    mutated = _Mutate(_points(clone, kind)[i], kind).visit(clone)
                    code = _compiled(module, mutated, live)
                    if code is not None:
                        yield (Mutant(name, qualname, kind, getattr(point, "lineno", 0), i),
                               module, live, code)


@contextlib.contextmanager
def applied(module: ModuleType, live: FunctionType, code: CodeType) -> Iterator[None]:
    original = live.__code__
    had = "__ci_compare" in vars(module)
    module.__dict__["__ci_compare"] = _ci_compare
    live.__code__ = code
    try:
        yield
    finally:
        live.__code__ = original
        if not had:
            del module.__dict__["__ci_compare"]


def _evals_fail() -> bool:
    from runner.control import run_evals

    try:
        return not run_evals().ok
    except Exception:  # a mutant that crashes the harness is caught by the evals too
        return True


def _units_fail(tests: tuple[str, ...]) -> bool:
    import pytest

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = pytest.main(["-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
                            *tests, "-k", "not processes and not signal",
                            "-W", "ignore::pytest.PytestAssertRewriteWarning"])
    return code != 0


MUTANT_TIMEOUT_S = 120.0
"""A mutant whose judging takes longer than this (say, a dropped ``frame = frame.f_back`` that
loops forever) is ended and counted as killed: a hang is something the tests detect."""


def _judge(mutant: Mutant, module: ModuleType, live: FunctionType, code: CodeType,
           units: bool) -> str:
    """``evals``, ``units``, ``hang`` or ``survived``. The mutant is judged in a forked child,
    so nothing it does (a hang, a leaked thread, a changed global) reaches the next one."""
    pid = os.fork()
    if pid == 0:  # the child: apply, judge, report by exit code
        status = 0
        try:
            with applied(module, live, code):
                if _evals_fail():
                    status = 1
                elif units and _units_fail(unit_tests(mutant.module)):
                    status = 2
        finally:
            os._exit(status)
    end = time.monotonic() + MUTANT_TIMEOUT_S
    while True:
        done, wait = os.waitpid(pid, os.WNOHANG)
        if done:
            return {1: "evals", 2: "units"}.get(os.waitstatus_to_exitcode(wait), "survived")
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "hang"
        time.sleep(0.05)


def run(modules: list[str] | None = None, *, units: bool = True) -> dict[str, Any]:
    """Judge every mutant: first by the bundled evals, then (``units``) a mutant the evals did
    not kill by the unit tests. Returns per class: mutants, killed by the bundled evals, killed
    by the unit tests (of those the evals missed), ended by the time limit, killed in all, and
    the survivors."""
    rows: dict[str, dict[str, Any]] = {k: {"mutants": 0, "evals": 0, "units": 0, "hang": 0,
                                           "killed": 0, "survivors": []} for k in CLASSES}
    started = time.monotonic()
    for mutant, module, live, code in mutants(modules):
        row = rows[mutant.kind]
        row["mutants"] += 1
        verdict = _judge(mutant, module, live, code, units)
        if verdict == "survived":
            if mutant.ident not in EXPLAINED:
                row["survivors"].append(mutant.ident)
        else:
            row[verdict] += 1
            row["killed"] += 1
        print(f"{mutant.ident} {verdict}", file=sys.stderr, flush=True)
    return {"classes": rows, "seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str]) -> int:
    modules = [a for a in argv if not a.startswith("-")] or None
    report = run(modules, units="--evals-only" not in argv)
    print(f"{'class':<10} {'mutants':>7} {'evals kill':>10} {'units kill':>10} {'hang':>5} "
          f"{'killed':>7} {'score':>7}")
    for kind, row in report["classes"].items():
        score = f"{row['killed'] / row['mutants']:.1%}" if row["mutants"] else "n/a"
        print(f"{kind:<10} {row['mutants']:>7} {row['evals']:>10} {row['units']:>10} "
              f"{row['hang']:>5} {row['killed']:>7} {score:>7}")
    print(f"({report['seconds']} s)")
    if "-v" in argv:
        for row in report["classes"].values():
            for ident in row["survivors"]:
                print(f"  survived: {ident}")
    return 0 if all(not r["survivors"] for r in report["classes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
