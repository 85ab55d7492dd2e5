"""Guards on side-effect tools: plain code, never a question to the model.

A guard checks a proposed tool call before it runs: the tool must be on the allow-list; a
side-effect tool must carry an idempotency key; an amount over ``max_amount`` is refused
(``policy_block``); an amount over ``escalate_above`` or a tool that needs approval without one
is handed to a human (``needs_human``). A repeated idempotency key with the same arguments is
deduplicated by the controller (the earlier result is returned, the tool is not re-executed);
the same key with different arguments is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from runner.canonical import JsonRecord, canonical_bytes, spec
from runner.control._conditions import StopCondition
from runner.control._types import (
    Checkpoint,
    Phase,
    RunState,
    Stop,
    StopReason,
    ToolCall,
    _sorted_records,
    display,
)

__all__ = ["Guard", "GuardRule", "SideEffectRule"]

GuardRule = Callable[[ToolCall, RunState], "Stop | tuple[StopReason, str] | None"]
"""A custom plain-code rule: return ``(StopReason.POLICY_BLOCK | NEEDS_HUMAN, detail)`` (or a
:class:`Stop` with one of those two reasons) to act."""


@dataclass(frozen=True)
class SideEffectRule(JsonRecord):
    """How one side-effect tool is guarded."""

    amount_arg: str | None = None  # the argument holding the amount, if any
    max_amount: float | None = None  # above it: refused (policy_block)
    escalate_above: float | None = None  # above it: a human must decide (needs_human)
    requires_approval: bool = False  # without an approval for this tool: needs_human
    idempotency_arg: str | None = "idempotency_key"  # also accepted as ToolCall.idempotency_key

    def __post_init__(self) -> None:
        if (self.max_amount is not None or self.escalate_above is not None) and not self.amount_arg:
            raise ValueError("SideEffectRule: an amount limit needs amount_arg")



def _key_of(call: ToolCall, rule: SideEffectRule) -> str | None:
    if call.idempotency_key:
        return call.idempotency_key
    if rule.idempotency_arg:
        value = call.args.get(rule.idempotency_arg)
        if isinstance(value, str) and value:
            return value
    return None


@dataclass(frozen=True, eq=False)
class Guard(StopCondition, JsonRecord):
    """Allow-list plus side-effect rules. ``allow`` is required (an empty guard fails closed).

    Args:
        allow: every tool the agent may call; anything else is ``policy_block``.
        side_effects: tool -> :class:`SideEffectRule`. These tools need idempotency keys and get
            the lowest default call limit.
        approvals: tools a human has approved for this run (``requires_approval`` rules).
        rules: extra plain-code rules, evaluated in order after the built-in ones.
    """

    allow: AbstractSet[str]  # stored as a frozenset (written sorted)
    side_effects: Mapping[str, SideEffectRule] = field(
        default_factory=dict, metadata=spec(write=_sorted_records))
    approvals: AbstractSet[str] = frozenset()
    rules: tuple[GuardRule, ...] = field(default=(), metadata=spec(write=len))  # written: how many

    def __post_init__(self) -> None:
        if isinstance(self.allow, str) or not isinstance(self.allow, Iterable):
            raise TypeError("Guard.allow must be a collection of tool names")
        object.__setattr__(self, "allow", frozenset(self.allow))
        object.__setattr__(self, "approvals", frozenset(self.approvals))
        object.__setattr__(self, "side_effects", dict(self.side_effects))
        object.__setattr__(self, "rules", tuple(self.rules))
        if not self.allow:
            raise ValueError("Guard.allow is empty: name the tools the agent may call")
        outside = set(self.side_effects) - self.allow
        if outside:
            raise ValueError(f"side-effect tools not on the allow-list: {sorted(outside)}")

    phases = frozenset({Phase.ON_ACTION})

    @property
    def name(self) -> str:
        return "guard"

    @property
    def side_effect_tools(self) -> frozenset[str]:
        return frozenset(self.side_effects)

    def idempotency_key(self, call: ToolCall) -> str | None:
        """The call's idempotency key when it is a side-effect tool, else None."""
        rule = self.side_effects.get(call.tool)
        return _key_of(call, rule) if rule is not None else None

    def check(self, point: Checkpoint) -> Stop | None:
        call = point.call
        if point.phase is not Phase.ON_ACTION or call is None:
            return None
        verdict = self.judge(call, point.state)
        if verdict is None:
            return None
        reason, detail, question = verdict
        return self._stop(reason, point, detail, question=question)

    def judge(self, call: ToolCall, state: RunState) -> tuple[StopReason, str, str | None] | None:
        """Return ``(reason, detail, question)`` when the call must not run, else None."""
        label = f"{call.tool}({display(dict(call.args), 60)})"
        block, human = StopReason.POLICY_BLOCK, StopReason.NEEDS_HUMAN
        if call.tool not in self.allow:
            return block, f"{call.tool} is not on the allow-list", None
        rule = self.side_effects.get(call.tool)
        if rule is not None:
            key = _key_of(call, rule)
            if key is None:
                return block, f"{call.tool} has side effects and needs an idempotency key", None
            earlier = state._idempotency.get(key)
            if earlier is not None and earlier[0] != canonical_bytes([call.tool, call.args]):
                return block, f"idempotency key {key!r} reused with different arguments", None
            if rule.amount_arg is not None and (rule.max_amount is not None
                                                or rule.escalate_above is not None):
                amount = call.args.get(rule.amount_arg)
                if isinstance(amount, bool) or not isinstance(amount, int | float):
                    return block, f"{call.tool}: {rule.amount_arg} must be a number", None
                if rule.max_amount is not None and amount > rule.max_amount:
                    return (block, f"{call.tool}: {rule.amount_arg}={amount:g} exceeds the "
                            f"maximum {rule.max_amount:g}", None)
                approved = call.tool in state.approvals  # a person approved it (resume)
                if (rule.escalate_above is not None and amount > rule.escalate_above
                        and not approved):
                    return (human, f"{call.tool}: {rule.amount_arg}={amount:g} is over the "
                            f"{rule.escalate_above:g} approval threshold",
                            f"Approve {label}? Policy requires a person above "
                            f"{rule.escalate_above:g}.")
            if (rule.requires_approval and call.tool not in self.approvals
                    and call.tool not in state.approvals):
                return (human, f"{call.tool} requires approval and none was given",
                        f"Approve {label}? This action needs a person's approval.")
        for custom in self.rules:
            out = custom(call, state)
            if out is None:
                continue
            if isinstance(out, Stop):
                reason, detail, question = out.reason, out.detail, out.question
            else:
                reason, detail = out
                reason = StopReason(reason)
                question = f"{detail} Allow {label}?" if reason is human else None
            if reason not in (block, human):  # a Stop is limited as the tuple form is
                raise ValueError("a guard rule may only return policy_block or needs_human, "
                                 f"not {reason}")
            return reason, detail, question
        return None
