"""The public surface of runner.policies, and what each critic view shows."""

from __future__ import annotations

import runner.policies as policies
from runner.policies import build_critic_request, extract_view
from runner.providers import GenerationConfig
from tests.policies import _fixtures as fx

EXPORTED = {
    "ABLATIONS", "CRITIC_VIEW_FORMAT", "DEFAULT_STATIC_GENERATION", "ESCALATE_TOOL", "FINISH_TOOL",
    "PIPELINES", "PLANNER_VIEW_FORMAT", "POLICY_REASON_CODES", "PROMPT_NAMES", "STATIC_ARMS",
    "STUCK_RECOVERY_DIRECTIVE", "PlannerAction", "CriticBehaviour", "CriticCoreInvariantBroken",
    "CriticVerdict", "EscalateAction", "FinishAction", "InvalidAction", "Pipeline",
    "PipelineDecision", "PipelineParams", "PipelineState", "PlannerBehaviour", "PlannerView",
    "PolicyError", "StaticDecision", "ToolCallAction", "UnknownPolicy", "build_critic_request",
    "build_planner_request", "decide_static", "ect_directive", "embed_view", "extract_view",
    "load_prompt", "make_pipeline", "parse_critic_verdict", "parse_planner_action",
    "planner_tool_decls", "prompt_digests", "simulated_responder",
    "CellIdentity", "PipelineVerdict", "action_from_json",
    # the pipeline table
    "CRITICS", "PIPELINE_VERDICTS", "CriticSight", "CriticSpec", "GateRole", "PipelineEntry", "critic_spec",
    "gate_pipeline", "pipeline_entry", "registered",
}


def test_exported_members() -> None:
    assert set(policies.__all__) == EXPORTED
    assert len(policies.__all__) == len(EXPORTED)  # no duplicates


def test_critic_views_differ_in_what_they_show() -> None:
    trace = fx.clean_trace()
    ledger = fx.ledger_of(trace)
    cert = fx.clean_certificate(ledger).to_json()
    gen = GenerationConfig(temperature=0.2, seed=1, max_output_tokens=64)
    views = {}
    for kind in ("critic_core", "full_trace", "self_check"):
        req = build_critic_request(kind, contract=fx.CONTRACT, trace=trace, ledger=ledger,
                                   proposal=cert, finish_requested=True, generation=gen, metadata={})
        views[kind] = extract_view(req.messages[0].parts[0].text or "")[1]
        assert views[kind]["proposal"] == cert
    assert [c["call_id"] for c in views["full_trace"]["trace"]] == ["c-1", "c-2"]
    assert [c["call_id"] for c in views["critic_core"]["trace"]] == ["c-2"]
    assert "trace" not in views["self_check"] and "ledger" not in views["self_check"]
    assert "contract" not in views["self_check"]
