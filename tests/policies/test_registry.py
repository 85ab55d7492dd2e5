"""The pipeline table is the one place a pipeline is named (issue 40): what used to be spelled
out beside it (critic prompts and headers, the frozen prompt set, pipeline verdicts, the
analysis's labels and gates, the frozen spec's policies) is read from it."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from runner.analysis._closed import COMPARATOR, TREATMENT
from runner.analysis._common import POLICY_LABELS
from runner.loop._decision import _PIPELINE_VERDICTS
from runner.policies import (
    CRITICS,
    PIPELINES,
    PROMPT_NAMES,
    STATIC_ARMS,
    PipelineVerdict,
    build_critic_request,
    critic_spec,
    load_prompt,
    prompt_digests,
)
from runner.providers import GenerationConfig
from runner.study import load_spec
from tests.policies import _fixtures as fx

REPO = Path(__file__).resolve().parents[2]


def test_every_model_backed_pipeline_names_a_known_critic() -> None:
    for entry in PIPELINES.values():
        if entry.critic is not None:
            assert CRITICS[entry.critic.kind] == entry.critic
            assert load_prompt(entry.critic.prompt)
    assert list(CRITICS) == ["self_check", "critic_core", "full_trace"]
    assert PIPELINES["ect"].critic is None  # the verifier calls no model


def test_a_critic_request_carries_its_entrys_prompt_and_header() -> None:
    trace = fx.clean_trace()
    gen = GenerationConfig(temperature=0.2, seed=1, max_output_tokens=64)
    for kind in CRITICS:
        req = build_critic_request(
            kind, contract=fx.CONTRACT, trace=trace, ledger=fx.ledger_of(trace),
            proposal=None, finish_requested=True, generation=gen, metadata={})
        spec = critic_spec(kind)
        assert req.system == load_prompt(spec.prompt)
        assert (req.messages[0].parts[0].text or "").startswith(spec.header + "\n\n")


def test_the_prompt_set_is_the_planners_and_the_critics() -> None:
    assert PROMPT_NAMES == ("critic_core", "full_trace_critic", "planner", "self_check")
    assert tuple(prompt_digests()) == PROMPT_NAMES


def test_verdicts_labels_and_gates_come_from_the_table() -> None:
    assert _PIPELINE_VERDICTS == get_args(PipelineVerdict)
    assert (TREATMENT, COMPARATOR) == ("ect", "controller")
    assert {p: POLICY_LABELS[p] for p in PIPELINES} == {p: e.label for p, e in PIPELINES.items()}
    assert set(STATIC_ARMS) | set(PIPELINES) == set(POLICY_LABELS)


def test_the_frozen_spec_runs_every_pipeline_in_table_order() -> None:
    assert load_spec(REPO / "schedules" / "v2.toml").policies == tuple(PIPELINES)
