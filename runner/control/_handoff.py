"""The handoff package: what a person needs to decide a stopped run in a minute."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.canonical import JsonRecord
from runner.control._types import RunState, StepRecord, Stop, StopReason, display

__all__ = ["HandoffPackage", "build_handoff"]

_MAX_DONE = 8
_MAX_FOUND = 8


@dataclass(frozen=True)
class HandoffPackage(JsonRecord):
    """What was asked, what was done, what was found, and the one question for a human."""

    run_id: str
    stop_reason: StopReason
    stop_detail: str
    asked: str
    done: tuple[str, ...]
    found: tuple[str, ...]
    question: str
    steps: int
    tool_calls: int
    cost_usd: float

    def render(self) -> str:
        """Short Markdown (also fine as plain text)."""
        lines = [
            f"## Needs a decision: run {self.run_id} stopped with {self.stop_reason}",
            "",
            f"**Question:** {self.question}",
            "",
            f"**Asked:** {self.asked}",
            f"**Why it stopped:** {self.stop_detail}",
            "",
            f"**Done** ({self.steps} steps, {self.tool_calls} tool calls, ${self.cost_usd:.4f}):",
        ]
        lines += [f"- {d}" for d in self.done] or ["- nothing"]
        lines += ["", "**Found:**"]
        lines += [f"- {f}" for f in self.found] or ["- nothing yet"]
        return "\n".join(lines) + "\n"



def _default_question(stop: Stop) -> str:
    r = stop.reason
    if r is StopReason.STEP_BUDGET:
        return "Retry with a larger step budget, or close the task as out of scope?"
    if r is StopReason.TOKEN_BUDGET:
        return "Raise the cost ceiling for this task, or close it? (Check for oversized context.)"
    if r is StopReason.TOOL_LIMIT:
        return "Allow this tool more calls for this task, or fix what makes the agent re-call it?"
    if r is StopReason.NO_PROGRESS:
        return "The agent kept repeating itself: what should it do differently here?"
    if r is StopReason.TOOL_ERROR:
        return "Is the failing tool healthy again, so the run can be retried?"
    if r is StopReason.TIME_BUDGET:
        return "The run ran out of time: is the slow tool healthy, or does this task need longer?"
    if r is StopReason.INTERNAL_ERROR:
        return "User code failed or the run was interrupted: fix or restart it, then retry?"
    if r is StopReason.POLICY_BLOCK:
        return "A guard refused the action: is the guard right, or should it be allowed?"
    return "What should the agent do next?"


def _collapse(trace: list[StepRecord]) -> list[str]:
    """One line per distinct action, repeats counted, capped for a one-minute read."""
    runs: list[list[Any]] = []  # [line, times in a row]
    for rec in trace:
        line = rec.line()
        if runs and runs[-1][0] == line:
            runs[-1][1] += 1
        else:
            runs.append([line, 1])
    out = [f"{line} (x{n})" if n > 1 else line for line, n in runs]
    if len(out) > _MAX_DONE:
        hidden = len(out) - (_MAX_DONE - 1)
        out = [*out[: _MAX_DONE - 2], f"... {hidden} more", out[-1]]
    return out


def build_handoff(state: RunState, stop: Stop, *, findings: tuple[str, ...] = ()) -> HandoffPackage:
    """Assemble the package from the run state (explicit findings first, then predicates)."""
    task = state.task
    # no mutate: the cut below makes a limit of 300 and of 301 the same
    asked = task if isinstance(task, str) else display(task, 300)  # pragma: no mutate
    asked = " ".join(asked.split())
    if len(asked) > 300:
        asked = asked[:299] + "…"
    found: list[str] = [*findings, *state.findings]
    for name, report in sorted(state.reports.items()):
        if report.satisfied:
            found.append(f"{name}: satisfied {', '.join(report.satisfied)}")
        if report.missing:
            found.append(f"{name}: still missing {', '.join(report.missing)}")
    if len(found) > _MAX_FOUND:
        found = [*found[: _MAX_FOUND - 1], f"... {len(found) - _MAX_FOUND + 1} more"]
    return HandoffPackage(
        run_id=state.run_id,
        stop_reason=stop.reason,
        stop_detail=stop.detail,
        asked=asked,
        done=tuple(_collapse(state.trace)),
        found=tuple(found),
        question=stop.question or _default_question(stop),
        steps=state.step,
        tool_calls=state.tool_calls,
        cost_usd=round(state.cost_usd, 9),
    )
