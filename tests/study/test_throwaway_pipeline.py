"""A pipeline is one class plus one entry in the pipeline table (issue 40): this file is the
"one file", its ``ENTRY`` the "one entry". Registered for the test only, the throwaway pipeline
goes through the whole study like a shipped one: the spec accepts it, the schedule crosses it
with the checkpoints and seeds, a 4-cell run commits it to a real store (real bubblewrap for
every tool call, the simulated provider for its critic), replay reproduces every cell, and the
analysis labels it. When the ``with`` block ends the table is as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.analysis._common import POLICY_LABELS
from runner.policies import (
    PIPELINES,
    FinishAction,
    PipelineDecision,
    PipelineEntry,
    PipelineParams,
    PipelineState,
    PipelineVerdict,
    UnknownPolicy,
    build_critic_request,
    critic_spec,
    make_pipeline,
    parse_critic_verdict,
    registered,
)
from runner.providers import Provider
from runner.study import SpecError, load_spec, read_schedule, replay_store, study_paths
from tests.study.support import bodies, make_study, run

_VERDICTS: dict[str, PipelineVerdict] = {"accept": "complete", "reject": "continue",
                                         "stuck": "stuck"}


class SecondOpinion:
    """Asks the critic core's model critic on every finish: no fast path, no repeat check."""

    name = "second_opinion"

    def __init__(self, provider: Provider | None, params: PipelineParams) -> None:
        assert provider is not None  # make_pipeline refuses a critic-backed pipeline without one
        self._provider, self._params = provider, params

    async def on_finish(self, state: PipelineState, action: FinishAction) -> PipelineDecision:
        cell = self._params.cell
        request = build_critic_request(
            "critic_core", contract=state.contract, trace=state.trace, ledger=state.ledger,
            proposal=action.certificate_obj, finish_requested=True,
            generation=self._params.generation,
            metadata=cell.metadata(critic="critic_core") if cell is not None else {},
            decision=state.decisions_used)
        result = await self._provider.generate(request, observer=self._params.observer)
        verdict = parse_critic_verdict(result)
        if verdict is None:
            return PipelineDecision("continue", (), None, 1, (result,))
        directive = (f"A second opinion rejected your finish: {verdict.reason}"
                     if verdict.verdict == "reject" else None)
        return PipelineDecision(_VERDICTS[verdict.verdict], (), directive, 1, (result,))


ENTRY = PipelineEntry(name="second_opinion", label="Second opinion", factory=SecondOpinion,
                      critic=critic_spec("critic_core"))

POLICIES = '"critic_core", "controller", "full_trace", "ect"'


@pytest.fixture
def second_opinion() -> Iterator[PipelineEntry]:
    with registered(ENTRY):
        yield ENTRY
    assert "second_opinion" not in PIPELINES


def test_a_registered_pipeline_runs_a_study_end_to_end(second_opinion: PipelineEntry,
                                                       tmp_path: Path) -> None:
    spec_path = make_study(tmp_path / "study",
                           edits={f"policies = [{POLICIES}]":
                                  'policies = ["controller", "second_opinion"]'})
    rows = read_schedule(study_paths(spec_path).schedule)
    # the schedule crosses it like any pipeline: 6 tasks x 2 checkpoints x 1 seed x 2 policies
    assert len(rows) == 24
    assert [r.policy for r in rows[:4]] == ["controller", "second_opinion"] * 2

    store = tmp_path / "v2.db"
    summary = run(spec_path, store, limit=4)
    assert (summary.committed, summary.halted) == (4, None)
    assert summary.tool_calls > 0 and summary.provider_attempts > 0
    committed = bodies(store)
    assert [b["row"] for b in committed] == [1, 2, 3, 4]
    assert [b["schedule_row"]["policy"] for b in committed] == [r.policy for r in rows[:4]]

    replayed = replay_store(store, spec_path)
    assert (replayed.cells, replayed.reproduced, replayed.mismatches) == (4, 4, [])
    assert POLICY_LABELS["second_opinion"] == "Second opinion"


def test_the_table_is_restored_after_the_block(tmp_path: Path) -> None:
    with registered(ENTRY):
        assert list(PIPELINES)[-1] == "second_opinion"
        assert "second_opinion" in POLICY_LABELS
    assert list(PIPELINES) == ["critic_core", "controller", "full_trace", "ect"]
    with pytest.raises(UnknownPolicy, match="unknown pipeline 'second_opinion'"):
        make_pipeline("second_opinion", None)
    spec_path = tmp_path / "v2.toml"
    text = (Path(__file__).resolve().parents[2] / "schedules" / "v2.toml").read_text("utf-8")
    spec_path.write_text(text.replace(f"policies = [{POLICIES}]",
                                      'policies = ["second_opinion"]'), "utf-8")
    with pytest.raises(SpecError, match="unknown policy 'second_opinion'"):
        load_spec(spec_path)


def test_an_entry_that_clashes_with_the_table_is_refused() -> None:
    with pytest.raises(UnknownPolicy, match="already registered"):
        with registered(PipelineEntry(name="ect", label="again", factory=SecondOpinion)):
            pass
    with pytest.raises(UnknownPolicy, match="treatment"):
        with registered(PipelineEntry(name="x", label="x", factory=SecondOpinion,
                                      gate="treatment")):
            pass
    assert list(PIPELINES) == ["critic_core", "controller", "full_trace", "ect"]
