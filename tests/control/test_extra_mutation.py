"""The extra mutation operators (tests/control/extra_mutation.py) generate what mutmut does not,
and the bundled evals catch the behaviour-level bugs of those classes that issue 27 found
surviving: a dropped ``self._settle(state)`` in ``result()`` and a case-insensitive allow-list."""

from __future__ import annotations

from runner.control import run_evals
from tests.control.extra_mutation import CLASSES, Mutant, applied, mutants


def _find(module: str, function: str, kind: str, needle: str) -> tuple[Mutant, object, object, object]:
    import inspect
    import linecache

    for mutant, mod, live, code in mutants([module], function=function):
        source = linecache.getline(inspect.getfile(mod), mutant.line)
        if mutant.function == function and mutant.kind == kind and needle in source:
            return mutant, mod, live, code
    raise AssertionError(f"no {kind} mutant of {function} at {needle!r}")


def test_every_class_is_generated_for_the_guard() -> None:
    kinds = {m.kind for m, *_ in mutants(["_guards"], function="Guard.judge")}
    assert kinds == set(CLASSES)


def test_the_bundled_evals_kill_a_dropped_settlement_of_the_spend() -> None:
    mutant, mod, live, code = _find("_steps", "_Steps.result", "statement",
                                    "self._settle(state)")
    assert run_evals().ok
    with applied(mod, live, code):  # type: ignore[arg-type]
        report = run_evals()
    failed = {r.case_id for r in report.results if not r.passed}
    assert failed == {"goal_met_spend_settled"}, mutant.ident


def test_the_bundled_evals_kill_a_case_insensitive_allow_list() -> None:
    mutant, mod, live, code = _find("_guards", "Guard.judge", "case", "not in self.allow")
    with applied(mod, live, code):  # type: ignore[arg-type]
        report = run_evals()
    failed = {r.case_id for r in report.results if not r.passed}
    assert failed == {"policy_block_tool_name_case"}, mutant.ident
    assert run_evals().ok  # the mutant is gone again
