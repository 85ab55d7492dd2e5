"""Budgets: steps, tokens or cost, and per-tool call limits (lowest for side-effect tools)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from runner.canonical import FLAT, JsonRecord, sorted_map, spec
from runner.control._conditions import (
    AnyOf,
    MaxCost,
    MaxSteps,
    MaxTime,
    MaxTokens,
    StopCondition,
    ToolCallLimit,
)
from runner.control._types import Checkpoint, Phase, Stop

__all__ = ["Budget", "ToolLimits"]

_IN_DEADLINES = spec(skip=True)  # written by Budget._deadlines (only when the budget is timed)


@dataclass(frozen=True)
class ToolLimits(JsonRecord):
    """Per-tool call limits. Tools not named in ``per_tool`` get ``default`` calls, or
    ``side_effect_default`` when they have side effects (the most dangerous tools get the lowest
    limit). ``total`` optionally caps all tool calls together."""

    per_tool: Mapping[str, int] = field(default_factory=dict, metadata=spec(write=sorted_map))
    default: int = 8
    side_effect_default: int = 1
    total: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_tool", dict(self.per_tool))
        for name, n in [*self.per_tool.items(), ("default", self.default),
                        ("side_effect_default", self.side_effect_default)]:
            if not isinstance(n, int) or n < 0:
                raise ValueError(f"tool limit {name!r} must be an integer >= 0")
        if self.total is not None and self.total < 0:
            raise ValueError("ToolLimits.total must be >= 0")

    def limit_for(self, tool: str, side_effect_tools: Iterable[str] = ()) -> int:
        if tool in self.per_tool:
            return self.per_tool[tool]
        return self.side_effect_default if tool in set(side_effect_tools) else self.default


@dataclass(frozen=True, eq=False)
class _DefaultToolLimit(StopCondition):
    limits: ToolLimits
    side_effect_tools: frozenset[str]

    phases = frozenset({Phase.ON_ACTION})

    @property
    def name(self) -> str:
        return "tool_limit[default]"

    def check(self, point: Checkpoint) -> Stop | None:
        call = point.call
        if call is None or call.tool in self.limits.per_tool:
            return None
        limit = self.limits.limit_for(call.tool, self.side_effect_tools)
        return ToolCallLimit(limit, call.tool).check(point)


@dataclass(frozen=True)
class _Deadlines(JsonRecord):
    """The time part of a budget's JSON, written only when the budget has a deadline."""

    max_seconds: float | None
    tool_timeout_s: float | None
    tool_timeouts: Mapping[str, float] = field(metadata=spec(write=sorted_map))


@dataclass(frozen=True)
class Budget(JsonRecord):
    """What bounds a run. Set it from the task (see :meth:`from_task`), not from a default.

    ``max_steps`` counts model calls. At least one of ``max_tokens`` / ``max_cost_usd`` is
    required: steps are not equal, so cost needs its own ceiling. Exhausting any of these is a
    budget stop, never a completion.
    """

    max_steps: int
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    tool_limits: ToolLimits = field(default_factory=ToolLimits)
    max_seconds: float | None = field(default=None, metadata=_IN_DEADLINES)  # wall clock for
    # the whole run (time_budget)
    tool_timeout_s: float | None = field(default=None, metadata=_IN_DEADLINES)  # default timeout
    # of one tool call (time_budget)
    tool_timeouts: Mapping[str, float] = field(default_factory=dict,
                                               metadata=_IN_DEADLINES)  # per-tool timeouts
    _deadlines: _Deadlines | None = field(default=None, kw_only=True, repr=False, compare=False,
                                          metadata=FLAT)  # the three above, set when timed

    def __post_init__(self) -> None:
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError("Budget.max_steps must be an integer >= 1")
        if self.max_tokens is None and self.max_cost_usd is None:
            raise ValueError("Budget needs max_tokens or max_cost_usd (a ceiling on spend)")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("Budget.max_tokens must be >= 1")
        if self.max_cost_usd is not None and not self.max_cost_usd > 0:
            raise ValueError("Budget.max_cost_usd must be > 0")
        object.__setattr__(self, "tool_timeouts", dict(self.tool_timeouts))
        for what, v in [("max_seconds", self.max_seconds), ("tool_timeout_s", self.tool_timeout_s),
                        *((f"tool_timeouts[{k!r}]", t) for k, t in self.tool_timeouts.items())]:
            if v is not None and not (isinstance(v, int | float) and v > 0):
                raise ValueError(f"Budget.{what} must be a number of seconds > 0")
        object.__setattr__(self, "_deadlines", _Deadlines(
            self.max_seconds, self.tool_timeout_s, self.tool_timeouts) if self.timed else None)

    @property
    def timed(self) -> bool:
        """True when any deadline is set (the whole-run drivers then cancel work in flight)."""
        return (self.max_seconds is not None or self.tool_timeout_s is not None
                or bool(self.tool_timeouts))

    def timeout_for(self, tool: str) -> float | None:
        return self.tool_timeouts.get(tool, self.tool_timeout_s)

    def time_condition(self) -> MaxTime | None:
        return MaxTime(self.max_seconds) if self.max_seconds is not None else None

    @classmethod
    def from_task(
        cls,
        *,
        expected_steps: int,
        tokens_per_step: int | None = None,
        cost_per_step_usd: float | None = None,
        margin: float = 3.0,
        tool_limits: ToolLimits | None = None,
    ) -> Budget:
        """Count the steps a competent human would take and give a margin above that.

        A task needing three lookups and one write (``expected_steps=4``) gets 12 steps.
        """
        if expected_steps < 1 or margin < 1:
            raise ValueError("expected_steps must be >= 1 and margin >= 1")
        if tokens_per_step is None and cost_per_step_usd is None:
            raise ValueError("Budget.from_task needs tokens_per_step or cost_per_step_usd "
                             "(a ceiling on spend)")
        if tokens_per_step is not None and tokens_per_step < 1:
            raise ValueError("Budget.from_task: tokens_per_step must be >= 1")
        if cost_per_step_usd is not None and not cost_per_step_usd > 0:
            raise ValueError("Budget.from_task: cost_per_step_usd must be > 0")
        steps = math.ceil(expected_steps * margin)
        return cls(
            max_steps=steps,
            max_tokens=tokens_per_step * steps if tokens_per_step is not None else None,
            max_cost_usd=cost_per_step_usd * steps if cost_per_step_usd is not None else None,
            tool_limits=tool_limits or ToolLimits(),
        )

    def spend_conditions(self) -> tuple[StopCondition, ...]:
        """The token/cost ceilings (checked before a model call, after one, after a tool)."""
        out: list[StopCondition] = []
        if self.max_tokens is not None:
            out.append(MaxTokens(self.max_tokens))
        if self.max_cost_usd is not None:
            out.append(MaxCost(self.max_cost_usd))
        return tuple(out)

    def tool_conditions(self, side_effect_tools: Iterable[str] = ()) -> tuple[StopCondition, ...]:
        """Per-tool limits (explicit ones, then defaults) and the optional total."""
        lim = self.tool_limits
        out: list[StopCondition] = [ToolCallLimit(n, tool) for tool, n in sorted(lim.per_tool.items())]
        out.append(_DefaultToolLimit(lim, frozenset(side_effect_tools)))
        if lim.total is not None:
            out.append(ToolCallLimit(lim.total))
        return tuple(out)

    def conditions(self, side_effect_tools: Iterable[str] = ()) -> AnyOf:
        """Every limit of this budget as one combined condition."""
        return AnyOf(MaxSteps(self.max_steps), *self.spend_conditions(),
                     *self.tool_conditions(side_effect_tools))
