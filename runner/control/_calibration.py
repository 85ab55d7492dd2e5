"""Calibrating a confidence score, and reporting both sides of a stopping rule.

When a step has no checkable artefact, the only thing to threshold is a score the model emits.
It becomes usable by being measured against labelled outcomes: for each candidate threshold,
how often the rule would fire, how often it is wrong when it fires (error rate over firings, not
over all runs), and what it saves. The chosen threshold is the one with the highest savings whose
error rate stays within the target, recorded with the model version it was measured on: the
mapping from score to error rate belongs to one model and prompt, so applying it to another
version is refused unless explicitly overridden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from runner.canonical import FLAT, JsonRecord, NonEmptyStr, read_int, read_str
from runner.control._errors import CalibrationMismatch, NoSafeThreshold
from runner.control._rules import StoppingRule
from runner.control._types import PredicateReport, RunState

__all__ = [
    "CALIBRATION_FORMAT",
    "Calibration",
    "LabelledRun",
    "RuleOutcome",
    "RuleReport",
    "RunCost",
    "ThresholdRow",
    "render_reports",
    "report_rule",
]

CALIBRATION_FORMAT = "ect.calibration/1"
SavingsKey = Literal["steps", "cost_usd", "latency_s"]


@dataclass(frozen=True)
class RunCost(JsonRecord):
    """Steps, cost and latency of a run (or of a run up to some point)."""

    steps: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0

    def minus(self, other: RunCost) -> RunCost:
        return RunCost(self.steps - other.steps, self.cost_usd - other.cost_usd,
                       self.latency_s - other.latency_s)


@dataclass(frozen=True)
class RuleOutcome:
    """One run with a stopping rule, paired with the same run without it."""

    run_id: str
    fired: bool
    wrong: bool  # the rule fired and the result was later rejected (a truncation)
    baseline: RunCost
    with_rule: RunCost

    def __post_init__(self) -> None:
        if self.wrong and not self.fired:
            raise ValueError(f"{self.run_id}: a run the rule did not stop cannot be its error")


_COMPUTED: Any = object()  # a computed field not given to the constructor


@dataclass(frozen=True)
class RuleReport(JsonRecord):
    """Both sides of a stopping rule, side by side: what it saved and what it truncated.

    ``firing_rate`` and ``error_rate_over_firings`` are computed from the counts (given, as
    when read back, they must equal what the counts say)."""

    rule: str
    runs: int
    firings: int
    firing_rate: float = field(default=_COMPUTED, kw_only=True, compare=False)
    errors: int
    error_rate_over_firings: float | None = field(default=_COMPUTED, kw_only=True,
                                                  compare=False)
    saved: RunCost
    baseline: RunCost

    def __post_init__(self) -> None:
        for name, want in (("firing_rate", self.firings / self.runs if self.runs else 0.0),
                           ("error_rate_over_firings", self.error_rate)):
            given = getattr(self, name)
            if given is not _COMPUTED and given != want:
                raise ValueError(f"{name} {given!r} does not match the counts ({want!r})")
            object.__setattr__(self, name, want)

    @property
    def error_rate(self) -> float | None:
        """Errors over firings (None when the rule never fired)."""
        return self.errors / self.firings if self.firings else None

    def saved_fraction(self, key: SavingsKey) -> float:
        base = getattr(self.baseline, key)
        return getattr(self.saved, key) / base if base else 0.0


def report_rule(rule: str, outcomes: Sequence[RuleOutcome]) -> RuleReport:
    """Savings (steps, cost, latency) and truncation (error rate over firings) of a rule."""
    base = RunCost(sum(o.baseline.steps for o in outcomes),
                   sum(o.baseline.cost_usd for o in outcomes),
                   sum(o.baseline.latency_s for o in outcomes))
    got = RunCost(sum(o.with_rule.steps for o in outcomes),
                  sum(o.with_rule.cost_usd for o in outcomes),
                  sum(o.with_rule.latency_s for o in outcomes))
    saved = base.minus(got)
    saved = RunCost(saved.steps, round(saved.cost_usd, 9), round(saved.latency_s, 9))
    return RuleReport(rule, len(outcomes), sum(o.fired for o in outcomes),
                      sum(o.wrong for o in outcomes), saved, base)


def render_reports(reports: Sequence[RuleReport]) -> str:
    """A plain-text table: savings and truncation in the same row for each rule."""
    head = ("rule", "runs", "fired", "firing rate", "errors", "error rate/firings",
            "steps saved", "cost saved", "latency saved")
    rows = [head]
    for r in reports:
        err = "n/a" if r.error_rate is None else f"{r.error_rate:.1%}"
        rows.append((
            r.rule, str(r.runs), str(r.firings), f"{r.firing_rate:.1%}", str(r.errors), err,
            f"{r.saved.steps} ({r.saved_fraction('steps'):.0%})",
            f"${r.saved.cost_usd:.4f} ({r.saved_fraction('cost_usd'):.0%})",
            f"{r.saved.latency_s:.1f}s ({r.saved_fraction('latency_s'):.0%})",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def _run_id(value: object, path: str) -> str:
    """A labelled run's id: a string, or an integer taken as its decimal string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(read_int(value, path))
    return read_str(value, path)


@dataclass(frozen=True)
class LabelledRun(JsonRecord):
    """A run with a known verdict and the confidence emitted at its candidate stopping point.

    ``correct``: would the result at that point have passed review. ``full`` is what the whole
    run cost; ``at_signal`` what it had cost when the score was emitted.
    """

    run_id: Annotated[str, _run_id]
    confidence: float
    correct: bool
    full: RunCost
    at_signal: RunCost

    def __post_init__(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"{self.run_id}: confidence must be within [0, 1]")

    def outcome(self, threshold: float) -> RuleOutcome:
        fired = self.confidence >= threshold
        return RuleOutcome(self.run_id, fired, fired and not self.correct, self.full,
                           self.at_signal if fired else self.full)


@dataclass(frozen=True)
class ThresholdRow(JsonRecord):
    """One line of the threshold table (the report's keys beside the threshold)."""

    threshold: float
    report: RuleReport = field(metadata=FLAT)


@dataclass(frozen=True)
class Calibration(JsonRecord):
    """A threshold table and the chosen threshold, bound to one model version (as JSON, an
    ``ect.calibration/1`` document)."""

    _format = CALIBRATION_FORMAT
    _path = "calibration"
    _object_error = f"not an {CALIBRATION_FORMAT} object"
    _format_error = "not an {want} object"

    model_version: NonEmptyStr
    target_error_rate: float
    savings_by: SavingsKey
    rows: tuple[ThresholdRow, ...]
    chosen: float | None

    @classmethod
    def measure(
        cls,
        runs: Sequence[LabelledRun],
        *,
        model_version: str,
        target_error_rate: float,
        thresholds: Sequence[float] | None = None,
        savings_by: SavingsKey = "cost_usd",
        min_runs: int = 5,
    ) -> Calibration:
        """Build the table (thresholds descending) and choose: the highest savings (by
        ``savings_by``) among thresholds that fire and keep errors over firings <= target;
        ties go to the higher threshold. No such threshold: ``chosen`` is None."""
        if len(runs) < max(1, min_runs):
            raise ValueError(f"calibration needs at least {max(1, min_runs)} labelled runs, "
                             f"got {len(runs)}: a threshold measured on fewer says nothing")
        if not model_version:
            raise ValueError("calibration needs the model version it was measured on")
        if not 0.0 <= target_error_rate < 1.0:
            raise ValueError("target_error_rate must be within [0, 1)")
        if savings_by not in ("steps", "cost_usd", "latency_s"):
            raise ValueError("savings_by must be steps, cost_usd or latency_s")
        cands = sorted(set(thresholds if thresholds is not None else (r.confidence for r in runs)),
                       reverse=True)
        rows = tuple(ThresholdRow(t, report_rule(f"confidence >= {t:g}",
                                                 [r.outcome(t) for r in runs])) for t in cands)
        best: ThresholdRow | None = None
        for row in rows:  # descending, so a tie keeps the higher threshold
            err = row.report.error_rate
            if err is None or err > target_error_rate:
                continue
            if best is None or getattr(row.report.saved, savings_by) > getattr(best.report.saved,
                                                                                savings_by):
                best = row
        return cls(model_version, target_error_rate, savings_by, rows,
                   best.threshold if best is not None else None)

    def _threshold_for(self, model_version: str, allow_model_mismatch_unsafe: bool) -> float:
        if model_version != self.model_version and not allow_model_mismatch_unsafe:
            raise CalibrationMismatch(
                f"calibration was measured on {self.model_version!r}, not {model_version!r}: "
                "re-measure it (or pass allow_model_mismatch_unsafe=True)")
        if self.chosen is None:
            raise NoSafeThreshold(
                f"no threshold keeps errors over firings within {self.target_error_rate:.1%} "
                f"on {self.model_version!r}")
        return self.chosen

    def fires(self, confidence: float, *, model_version: str,
              allow_model_mismatch_unsafe: bool = False) -> bool:
        """Would the chosen threshold stop a run at this confidence?

        Raises:
            CalibrationMismatch: ``model_version`` differs from the measured one.
            NoSafeThreshold: no threshold was safe enough.
        """
        return confidence >= self._threshold_for(model_version, allow_model_mismatch_unsafe)

    def stopping_rule(
        self,
        *,
        model_version: str,
        confidence: Callable[[RunState], float | None],
        output: Callable[[RunState], Any] | None = None,
        name: str = "calibrated_confidence",
        allow_model_mismatch_unsafe: bool = False,
    ) -> StoppingRule:
        """A :class:`StoppingRule` firing when ``confidence(state)`` reaches the threshold."""
        t = self._threshold_for(model_version, allow_model_mismatch_unsafe)
        label = f"confidence>={t:g}"

        def evaluate(state: RunState) -> PredicateReport:
            c = confidence(state)
            if c is not None and c >= t:
                return PredicateReport(satisfied=(label,))
            return PredicateReport(missing=(label,))

        return StoppingRule(name, evaluate=evaluate, output=output)

    def render(self) -> str:
        chosen = "none (no threshold meets the target)" if self.chosen is None else f"{self.chosen:g}"
        head = (f"calibration on {self.model_version}: target error rate over firings <= "
                f"{self.target_error_rate:.1%}; chosen threshold {chosen} "
                f"(highest {self.savings_by} saved)\n")
        return head + render_reports([r.report for r in self.rows])
