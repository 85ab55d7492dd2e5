"""Termination policies: the static arms, the closed-loop pipelines and their table, planner I/O,
frozen prompts and the simulated planner/critic behaviour (docs/protocol.md, part 2; the ECT
paper's policies)."""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from runner._lazy import lazy_exports as _lazy_exports

if _TYPE_CHECKING:
    from runner.policies._actions import (
        ESCALATE_TOOL,
        FINISH_TOOL,
        CellIdentity,
        EscalateAction,
        FinishAction,
        InvalidAction,
        PlannerAction,
        ToolCallAction,
        action_from_json,
        build_planner_request,
        parse_planner_action,
        planner_tool_decls,
    )
    from runner.policies._common import POLICY_REASON_CODES
    from runner.policies._critics import CriticVerdict, build_critic_request, parse_critic_verdict
    from runner.policies._errors import CriticCoreInvariantBroken, PolicyError, UnknownPolicy
    from runner.policies._pipelines import (
        PIPELINE_VERDICTS,
        STUCK_RECOVERY_DIRECTIVE,
        Pipeline,
        PipelineDecision,
        PipelineParams,
        PipelineState,
        PipelineVerdict,
        ect_directive,
        make_pipeline,
    )
    from runner.policies._prompts import PROMPT_NAMES, load_prompt, prompt_digests
    from runner.policies._registry import (
        CRITICS,
        PIPELINES,
        CriticSight,
        CriticSpec,
        GateRole,
        PipelineEntry,
        critic_spec,
        gate_pipeline,
        pipeline_entry,
        registered,
    )
    from runner.policies._simulated import CriticBehaviour, PlannerBehaviour, simulated_responder
    from runner.policies._static import (
        ABLATIONS,
        DEFAULT_STATIC_GENERATION,
        STATIC_ARMS,
        StaticDecision,
        decide_static,
    )
    from runner.policies._views import (
        CRITIC_VIEW_FORMAT,
        PLANNER_VIEW_FORMAT,
        PlannerView,
        embed_view,
        extract_view,
    )

# Each name is imported from its module on first use (runner/_lazy.py), so a command loads only
# the modules it uses; the same names as above, by module:
_EXPORTS: dict[str, tuple[str, ...]] = {
    "_actions": (
        "ESCALATE_TOOL", "FINISH_TOOL", "CellIdentity", "EscalateAction", "FinishAction",
        "InvalidAction", "PlannerAction", "ToolCallAction", "action_from_json",
        "build_planner_request", "parse_planner_action", "planner_tool_decls",
    ),
    "_common": ("POLICY_REASON_CODES",),
    "_critics": ("CriticVerdict", "build_critic_request", "parse_critic_verdict"),
    "_errors": ("CriticCoreInvariantBroken", "PolicyError", "UnknownPolicy"),
    "_pipelines": (
        "PIPELINE_VERDICTS", "STUCK_RECOVERY_DIRECTIVE", "Pipeline", "PipelineDecision",
        "PipelineParams", "PipelineState", "PipelineVerdict", "ect_directive", "make_pipeline",
    ),
    "_prompts": ("PROMPT_NAMES", "load_prompt", "prompt_digests"),
    "_registry": (
        "CRITICS", "PIPELINES", "CriticSight", "CriticSpec", "GateRole", "PipelineEntry",
        "critic_spec", "gate_pipeline", "pipeline_entry", "registered",
    ),
    "_simulated": ("CriticBehaviour", "PlannerBehaviour", "simulated_responder"),
    "_static": (
        "ABLATIONS", "DEFAULT_STATIC_GENERATION", "STATIC_ARMS", "StaticDecision", "decide_static",
    ),
    "_views": (
        "CRITIC_VIEW_FORMAT", "PLANNER_VIEW_FORMAT", "PlannerView", "embed_view", "extract_view",
    ),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [
    "ABLATIONS",
    "CRITICS",
    "CRITIC_VIEW_FORMAT",
    "DEFAULT_STATIC_GENERATION",
    "ESCALATE_TOOL",
    "FINISH_TOOL",
    "PIPELINES",
    "PIPELINE_VERDICTS",
    "PLANNER_VIEW_FORMAT",
    "POLICY_REASON_CODES",
    "PROMPT_NAMES",
    "STATIC_ARMS",
    "STUCK_RECOVERY_DIRECTIVE",
    "CellIdentity",
    "CriticBehaviour",
    "CriticCoreInvariantBroken",
    "CriticSight",
    "CriticSpec",
    "CriticVerdict",
    "EscalateAction",
    "FinishAction",
    "GateRole",
    "InvalidAction",
    "Pipeline",
    "PipelineDecision",
    "PipelineEntry",
    "PipelineParams",
    "PipelineState",
    "PipelineVerdict",
    "PlannerAction",
    "PlannerBehaviour",
    "PlannerView",
    "PolicyError",
    "StaticDecision",
    "ToolCallAction",
    "UnknownPolicy",
    "action_from_json",
    "build_critic_request",
    "build_planner_request",
    "critic_spec",
    "decide_static",
    "ect_directive",
    "embed_view",
    "extract_view",
    "gate_pipeline",
    "load_prompt",
    "make_pipeline",
    "parse_critic_verdict",
    "parse_planner_action",
    "pipeline_entry",
    "planner_tool_decls",
    "prompt_digests",
    "registered",
    "simulated_responder",
]
