"""The configuration of a trajectory (:class:`TrajectoryConfig`, its :class:`StopRules`) and
the rules it puts in force, apart from the engine in ``_trajectory``: the study's spec, lock and
preflight read them without loading the engine's controller, pipelines and providers."""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.canonical import JsonRecord, JsonValue
from runner.providers import GenerationConfig, PriceTable

__all__ = ["StopRules", "TrajectoryConfig", "stop_rules_in_force"]


@dataclass(frozen=True)
class StopRules(JsonRecord):
    """Stop controls beyond the paper's protocol, each off unless set (the frozen study's choice).

    The ECT paper's closed loop has two limits only: four decisions and three additional tool
    calls (:class:`TrajectoryConfig`). ``runner.control`` offers more, and keeps them on by
    default for any other agent loop; here each must be asked for:

    - ``no_progress``: ``runner.control``'s default :class:`~runner.control.NoProgressDetector`
      (the third identical action, or the third identical empty result, ends ``no_progress``);
    - ``token_ceiling``: tokens per trajectory, planner and critics together (``token_budget``);
    - ``side_effect_call_limit``: calls of each side-effect tool (``record_note``), below the
      total call limit (``tool_limit``).
    """

    no_progress: bool = False
    token_ceiling: int | None = None
    side_effect_call_limit: int | None = None

    def __post_init__(self) -> None:
        for name in ("token_ceiling", "side_effect_call_limit"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"StopRules.{name} must be None (off) or an integer >= 1")

@dataclass(frozen=True)
class TrajectoryConfig:
    """The protocol's limits (4 decisions, 3 additional tool calls), the stop rules beyond it
    (:class:`StopRules`, all off by default), the generation config and the price table."""

    max_decisions: int = 4
    max_additional_tool_calls: int = 3
    stop_rules: StopRules = field(default_factory=StopRules)
    generation: GenerationConfig = field(
        default_factory=lambda: GenerationConfig(temperature=0.2, seed=0, max_output_tokens=2048))
    price: PriceTable | None = None


def stop_rules_in_force(config: TrajectoryConfig) -> dict[str, JsonValue]:
    """Every rule that can end a trajectory under ``config`` (the study lock and the run header
    record this): the protocol's two limits, the controls beyond it (``null``/``false``: off),
    and the stops that are not rules but events of the run itself."""
    return {
        "protocol": {"max_decisions": config.max_decisions,
                     "max_additional_tool_calls": config.max_additional_tool_calls},
        "beyond_protocol": config.stop_rules.to_json(),
        "events": {
            "goal_met": "the termination pipeline answered complete",
            "no_progress": "the termination pipeline answered stuck",
            "needs_human": "the planner escalated, or the pipeline answered needs_human",
            "tool_error": "a sandboxed tool call failed (infrastructure, not a tool's answer)",
            "policy_block": "the planner called a tool that is not one of the synthetic tools",
        },
    }
