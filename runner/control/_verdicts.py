"""What the step controller answers, and the stops it raises itself.

A :class:`Verdict` (kind :class:`VerdictKind`) is the controller's answer to a proposed action;
the conditions here name the stops that come from the controller rather than from a budget, a
guard or a rule: user code that raised or broke its contract, an interruption, an idempotency
key whose outcome is unknown or whose result was not stored, the kill switch's flag.
``_Failed`` carries such a failure out of a check, and ``_call`` turns an exception raised by
user code into one. The callables a run is given (``Decide``, ``Execute``, ``Fold``,
``Validate``) are typed here too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runner.control._types import (
    Action,
    Condition,
    Finish,
    PredicateReport,
    RunState,
    Stop,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
)

__all__ = [
    "ContractViolation",
    "Decide",
    "Execute",
    "Fold",
    "Interrupted",
    "KillSwitchStop",
    "ResultNotStored",
    "UnknownOutcome",
    "UserCodeError",
    "Validate",
    "Verdict",
    "VerdictKind",
]

Decide = Callable[[RunState], "Action | Turn | Awaitable[Action | Turn]"]
Execute = Callable[[ToolCall], "ToolResult | Any | Awaitable[ToolResult | Any]"]
Fold = Callable[[RunState, ToolCall, ToolResult], None]
Validate = Callable[[RunState, Any], "bool | PredicateReport | Awaitable[bool | PredicateReport]"]


class VerdictKind(StrEnum):
    EXECUTE = "execute"  # run ``call`` and report its result with on_tool_result
    DEDUPLICATED = "deduplicated"  # same idempotency key and arguments: ``result`` is the earlier one
    CHECK_FINISH = "check_finish"  # check ``finish`` with on_finish
    CONTINUE = "continue"  # nothing to run (an invalid reply was fed back); call the model again
    STOP = "stop"  # the run ended: ``stop``


@dataclass(frozen=True)
class Verdict:
    """What the controller says about a proposed action."""

    kind: VerdictKind
    call: ToolCall | None = None
    result: ToolResult | None = None
    finish: Finish | None = None
    stop: Stop | None = None


@dataclass(frozen=True, eq=False)
class UserCodeError(Condition):
    """``internal_error``: user code (``decide``, a guard rule, ``fold``...) raised."""

    source: str

    @property
    def name(self) -> str:
        return f"user_code[{self.source}]"


@dataclass(frozen=True, eq=False)
class ContractViolation(Condition):
    """``internal_error``: a callable returned something its contract does not allow."""

    source: str

    @property
    def name(self) -> str:
        return f"contract[{self.source}]"


@dataclass(frozen=True, eq=False)
class Interrupted(Condition):
    """``internal_error``: the run was interrupted (Ctrl-C) or cancelled from outside."""

    how: str

    @property
    def name(self) -> str:
        return f"interrupted[{self.how}]"


@dataclass(frozen=True, eq=False)
class UnknownOutcome(Condition):
    """``needs_human``: an earlier attempt of a side-effect call with this idempotency key ended
    mid-call (its process died, its lease expired, its tool raised, it was cancelled): nobody
    knows whether the side effect happened, so it is not run again until a person resolves it."""

    key: str

    @property
    def name(self) -> str:
        return f"unknown_outcome[{self.key}]"


@dataclass(frozen=True, eq=False)
class ResultNotStored(Condition):
    """``needs_human``: another run already made this side-effect call (the key is done), but
    its result had no canonical encoding, so only "done, result not storable" was recorded:
    the call is not run again, and the run cannot go on with a result it does not have."""

    key: str

    @property
    def name(self) -> str:
        return f"result_not_stored[{self.key}]"


@dataclass(frozen=True, eq=False)
class KillSwitchStop(Condition):
    """``policy_block``: the kill switch's flag was raised while the run was going."""

    @property
    def name(self) -> str:
        return "kill_switch"


class _Failed(Exception):
    def __init__(self, condition: Condition, detail: str) -> None:
        super().__init__(detail)  # pragma: no mutate (only a traceback shows it; callers read .detail)
        self.condition, self.detail = condition, detail


def _first_line(e: BaseException) -> str:
    """``Type: first line of the message`` (the type alone for an empty message)."""
    first = (str(e).splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__



def _call(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except _Failed:
        raise
    except Exception as e:
        raise _user_error(what, e) from e


def _user_error(what: str, e: Exception) -> _Failed:
    return _Failed(UserCodeError(what), f"{what} raised {_first_line(e)}")


def _contract(what: str, value: Any) -> _Failed:
    return _Failed(ContractViolation(what),
                   f"{what} must return bool or PredicateReport, got {type(value).__name__}")


_HOW = {"ctrl-c": "interrupted by Ctrl-C", "sigterm": "terminated by SIGTERM",
        "cancelled": "cancelled from outside"}


def _interrupted(state: RunState, how: str) -> Stop:
    return Stop(StopReason.INTERNAL_ERROR, Interrupted(how), _HOW[how],
                state.step, question="The run was interrupted: resume it from the handoff, "
                                     "or close it?")
