"""What a cell's record keeps of each planner decision (:class:`DecisionRecord`, its
:class:`DecisionVerdict` and the pipeline's :class:`PipelineJudgement`): the record types alone,
apart from the engine in ``_trajectory`` that makes them, so that reading a cell's record (the
study's lock and preflight, the replay, the viewer) does not load the engine's controller,
pipelines and providers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from runner.canonical import (
    Count,
    JsonObject,
    JsonRecord,
    RecordFormatError,
    read_object,
    read_opt_str,
    read_str,
)
from runner.ect import Reason
from runner.policies import (
    PIPELINE_VERDICTS,
    PipelineDecision,
    PipelineVerdict,
    PlannerAction,
    action_from_json,
)

__all__ = ["DecisionRecord", "DecisionVerdict", "PipelineJudgement"]


class DecisionVerdict(StrEnum):
    """What became of one planner decision: the one vocabulary of the loop, the scoring, the
    replay and the viewer. The values are the record's strings (part of the record format)."""

    EXECUTED = "executed"  # a tool call ran and answered
    TOOL_FAILED = "tool_failed"  # a tool call failed in its sandbox (the run ends tool_error)
    STOPPED = "stopped"  # the controller ended the run on this action
    CONTINUE = "continue"  # an invalid reply, fed back
    DEDUPLICATED = "deduplicated"  # a repeated side effect, answered from the earlier one
    FINISH_COMPLETE = "finish_complete"  # the pipeline accepted the finish
    FINISH_CONTINUE = "finish_continue"  # the pipeline sent the planner back to work
    FINISH_STUCK = "finish_stuck"  # the pipeline judged the run stuck
    FINISH_NEEDS_HUMAN = "finish_needs_human"  # the pipeline asked for a human

    @classmethod
    def of_finish(cls, decision: PipelineVerdict) -> DecisionVerdict:
        """The verdict of a finish the pipeline answered ``decision``."""
        return cls(f"finish_{decision}")

    @property
    def is_finish(self) -> bool:
        """A finish the pipeline answered (whatever it answered)."""
        return self in _FINISHES

    @property
    def rejected_finish(self) -> bool:
        """A finish the pipeline did not answer ``complete``."""
        return self in _FINISHES and self is not DecisionVerdict.FINISH_COMPLETE

    @property
    def ran_tool(self) -> bool:
        """A tool call was sent to the sandbox (it answered or failed)."""
        return self is DecisionVerdict.EXECUTED or self is DecisionVerdict.TOOL_FAILED


def _verdict(value: object, path: str) -> DecisionVerdict:
    """A verdict's reader: one of the member values, else ``unknown verdict '...'``."""
    text = read_str(value, path)
    try:
        return DecisionVerdict(text)
    except ValueError:
        raise RecordFormatError(path, f"unknown verdict {text[:40]!r}") from None


_FINISHES = frozenset({DecisionVerdict.FINISH_COMPLETE, DecisionVerdict.FINISH_CONTINUE,
                       DecisionVerdict.FINISH_STUCK, DecisionVerdict.FINISH_NEEDS_HUMAN})


_PIPELINE_VERDICTS: tuple[PipelineVerdict, ...] = PIPELINE_VERDICTS


@dataclass(frozen=True, slots=True)
class PipelineJudgement(JsonRecord):
    """A pipeline's answer to one finish as a decision record keeps it: its decision, reason
    codes, directive and number of model calls (the critics' provider results are audited
    apart, in the cell's audit group)."""

    _path = "pipeline"

    decision: Annotated[PipelineVerdict, _pipeline_verdict]
    reasons: tuple[Annotated[Reason, _reason], ...]
    directive: str | None
    model_calls: Count

    @classmethod
    def of(cls, decided: PipelineDecision) -> PipelineJudgement:
        return cls(decided.decision, decided.reasons, decided.directive, decided.model_calls)

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(r.code for r in self.reasons)

def _pipeline_verdict(value: object, path: str) -> PipelineVerdict:
    decision = read_str(value, path)
    verdict = next((v for v in _PIPELINE_VERDICTS if v == decision), None)
    if verdict is None:
        raise RecordFormatError(path, f"unknown pipeline decision {decision[:40]!r}")
    return verdict


def _reason(obj: object, path: str) -> Reason:
    """A reason code as a pipeline gave it (the verifier's codes and the policies' own)."""
    r = read_object(obj, path, ("code", "slot", "detail"))
    return Reason(code=read_str(r["code"], f"{path}.code", nonempty=True),
                  slot=read_opt_str(r["slot"], f"{path}.slot"),
                  detail=read_str(r["detail"], f"{path}.detail"))


@dataclass(frozen=True, slots=True)
class DecisionRecord(JsonRecord):
    """One planner decision as recorded in the result (deterministic fields only).

    ``action`` is the planner's action (it owns its JSON form), ``verdict`` what became of it
    and ``pipeline`` the pipeline's answer to a finish; ``tool_response`` is the tool's JSON
    response as it produced it.
    """

    _path = "decision"

    index: int
    action: Annotated[PlannerAction, action_from_json]
    verdict: Annotated[DecisionVerdict, _verdict]
    pipeline: PipelineJudgement | None = None
    tool_response: JsonObject | None = None
    tool_error: str | None = None
    provider_ok: bool = True
