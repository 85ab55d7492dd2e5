"""Errors of the analysis layer (all under :class:`runner.errors.AnalysisError`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.errors import AnalysisError, ExitCategory

if TYPE_CHECKING:
    from runner.analysis._static import StaticResults

__all__ = [
    "AllModelCallsFailed",
    "InventoryIncomplete",
    "PlanUnreadable",
    "ScheduleDisagrees",
    "ScheduleUnreadable",
]


class ScheduleDisagrees(AnalysisError):
    """The schedule given is not the one the store was run for; no figure is computed."""

    exit_category = ExitCategory.REFUSED


class ScheduleUnreadable(AnalysisError):
    """The schedule file given cannot be read or is not a schedule (a usage error)."""

    exit_category = ExitCategory.USAGE


class InventoryIncomplete(AnalysisError):
    """The outcomes do not cover every schedule row exactly once; no figure is computed."""

    exit_category = ExitCategory.REFUSED

    def __init__(
        self,
        missing: list[int] | tuple[int, ...] = (),
        duplicate: list[int] | tuple[int, ...] = (),
        unexpected: list[str] | tuple[str, ...] = (),
        *,
        expected: int = 0,
    ) -> None:
        self.missing = tuple(missing)
        self.duplicate = tuple(duplicate)
        self.unexpected = tuple(unexpected)
        self.expected = expected
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} missing (rows {_abbrev(self.missing)})")
        if self.duplicate:
            parts.append(f"{len(self.duplicate)} duplicated (rows {_abbrev(self.duplicate)})")
        if self.unexpected:
            parts.append(f"{len(self.unexpected)} not in the schedule ({_abbrev(self.unexpected)})")
        super().__init__(
            f"inventory incomplete: {expected} schedule rows expected, "
            + "; ".join(parts)
            + "; refusing to compute any figure"
        )


def _abbrev(items: tuple[object, ...], limit: int = 8) -> str:
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f", ... +{len(items) - limit} more" if len(items) > limit else "")


class AllModelCallsFailed(AnalysisError):
    """Every model call of a static study failed: its tables (written all the same, each failure
    counted as ``continue``) are not model measurements. ``results`` is what was written."""

    exit_category = ExitCategory.RUNTIME

    def __init__(self, calls: int, results: StaticResults) -> None:
        self.calls = calls
        self.results = results
        super().__init__("every model call failed: these tables are not model measurements "
                         "(check the provider, --base-url and the credential)")


class PlanUnreadable(AnalysisError):
    """``ect report --plan`` was given a file that is not an ``ect plan --json`` document."""

    exit_category = ExitCategory.USAGE
