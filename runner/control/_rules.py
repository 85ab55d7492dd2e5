"""Predicate stopping rules over run state (no model in the loop).

A rule is a set of named predicates that read the run's structured state. It reports which are
satisfied and which are missing; the missing list goes back to the model as a directive. Rules
are evaluated after tool results are folded in and before the next model call, and they also
gate a proposed finish. A rule says when work may stop being necessary; it bounds nothing (the
:class:`Budget` does that, separately).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runner.control._types import Condition, PredicateReport, RunState

__all__ = ["Predicate", "StoppingRule"]


@dataclass(frozen=True)
class Predicate:
    """One named check over run state. A truthy return value satisfies it; an exception counts
    as not satisfied (fail closed)."""

    name: str
    check: Callable[[RunState], bool]

    def __call__(self, state: RunState) -> bool:
        try:
            return bool(self.check(state))
        except Exception:  # a predicate that cannot read the state is not satisfied
            return False


class StoppingRule(Condition):
    """Named predicates returning satisfied/missing lists.

    Args:
        name: the rule's name.
        predicates: ``{name: state -> bool}`` or a sequence of :class:`Predicate`.
        evaluate: instead of predicates, a function ``state -> PredicateReport`` (e.g. a
            verifier that reports missing slots, or asks for a human via ``escalate``).
        output: when given, the rule ends the run early with ``goal_met`` as soon as every
            predicate holds, with ``output(state)`` as the final output. Without it the rule
            only gates a finish and produces directives.
    """

    def __init__(
        self,
        name: str,
        predicates: Mapping[str, Callable[[RunState], bool]] | Sequence[Predicate] | None = None,
        *,
        evaluate: Callable[[RunState], PredicateReport] | None = None,
        output: Callable[[RunState], Any] | None = None,
    ) -> None:
        if (predicates is None) == (evaluate is None):
            raise ValueError("StoppingRule needs exactly one of predicates= or evaluate=")
        if predicates is not None:
            items = (
                [Predicate(k, v) for k, v in predicates.items()]
                if isinstance(predicates, Mapping)
                else list(predicates)
            )
            if not items:
                raise ValueError("StoppingRule needs at least one predicate")
            names = [p.name for p in items]
            if len(set(names)) != len(names):
                raise ValueError(f"StoppingRule {name!r}: duplicate predicate names")
            self.predicates: tuple[Predicate, ...] = tuple(items)
        else:
            self.predicates = ()
        self._name = name
        self._evaluate = evaluate
        self.output = output

    @property
    def name(self) -> str:
        return self._name

    @property
    def stops_early(self) -> bool:
        return self.output is not None

    def evaluate(self, state: RunState) -> PredicateReport:
        """Evaluate against ``state``; pure reads, reproducible from a stored run record."""
        if self._evaluate is not None:
            try:
                report = self._evaluate(state)
            except Exception as e:  # fail closed: an evaluator that breaks satisfies nothing
                return PredicateReport(missing=(self._name,),
                                       detail=f"{type(e).__name__}: {e}".splitlines()[0])
            return PredicateReport.of(report, self._name)
        satisfied = tuple(p.name for p in self.predicates if p(state))
        missing = tuple(p.name for p in self.predicates if p.name not in satisfied)
        return PredicateReport(satisfied=satisfied, missing=missing)
