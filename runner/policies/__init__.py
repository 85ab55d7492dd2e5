"""Termination policies: the static arms, the closed-loop pipelines, planner I/O, frozen prompts
and the simulated planner/critic behaviour (docs/protocol.md, part 2; the ECT paper's policies)."""

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
    PIPELINES,
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

__all__ = [
    "ABLATIONS",
    "CRITIC_VIEW_FORMAT",
    "DEFAULT_STATIC_GENERATION",
    "ESCALATE_TOOL",
    "FINISH_TOOL",
    "PIPELINES",
    "PLANNER_VIEW_FORMAT",
    "POLICY_REASON_CODES",
    "PROMPT_NAMES",
    "STATIC_ARMS",
    "STUCK_RECOVERY_DIRECTIVE",
    "CellIdentity",
    "CriticBehaviour",
    "CriticCoreInvariantBroken",
    "CriticVerdict",
    "EscalateAction",
    "FinishAction",
    "InvalidAction",
    "Pipeline",
    "PipelineDecision",
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
    "decide_static",
    "ect_directive",
    "embed_view",
    "extract_view",
    "load_prompt",
    "make_pipeline",
    "parse_critic_verdict",
    "parse_planner_action",
    "planner_tool_decls",
    "prompt_digests",
    "simulated_responder",
]
