"""The four closed-loop pipelines on crafted finish states."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest

from runner.policies import (
    PIPELINES,
    STUCK_RECOVERY_DIRECTIVE,
    CellIdentity,
    FinishAction,
    PipelineDecision,
    PipelineParams,
    PipelineState,
    UnknownPolicy,
    make_pipeline,
)
from runner.providers import GenerationConfig
from tests.policies import _fixtures as fx
from tests.policies._providers import Forbidden, scripted

PARAMS = PipelineParams(
    generation=GenerationConfig(temperature=0.2, seed=11, max_output_tokens=256),
    cell=CellIdentity("cell-1", 11),
)


def state(trace: tuple[Any, ...] | None = None, **kw: Any) -> PipelineState:
    trace = fx.clean_trace() if trace is None else trace
    return PipelineState(fx.CONTRACT, trace, fx.ledger_of(trace), **kw)


def finish(st: PipelineState, claims: dict[str, tuple[Any, tuple[str, ...]]] | None = None) -> FinishAction:
    cert = fx.clean_certificate(st.ledger) if claims is None else fx.certificate(st.ledger, claims)
    return FinishAction(cert.to_json())


def run(pipeline: Any, st: PipelineState, action: FinishAction) -> PipelineDecision:
    return anyio.run(pipeline.on_finish, st, action)


def test_critic_core_fast_paths_need_no_model() -> None:
    p = make_pipeline("critic_core", Forbidden(), PARAMS)  # type: ignore[arg-type]
    st = state()
    d = run(p, st, finish(st))
    assert (d.decision, d.model_calls, d.codes) == ("complete", 0, ("critic.fast_path_slots_filled",))
    # An unsupported finish (a forged receipt, a wrong value) still passes the fast path.
    d = run(p, st, finish(st, {"units": (99, ("r-404",)), "revenue": (1, ("r-2",))}))
    assert d.decision == "complete"
    d = run(p, st, finish(st, {}))
    assert d.codes == ("critic.fast_path_successful_call",)


def _no_success_state() -> PipelineState:
    trace = tuple(dataclasses.replace(c, response={"ok": False, "error": {}}) for c in fx.clean_trace())
    return state(trace)


@pytest.mark.parametrize(
    ("verdict", "expected"), [("accept", "complete"), ("reject", "continue"), ("stuck", "stuck")]
)
def test_critic_core_llm_path(verdict: str, expected: str) -> None:
    provider, rec = scripted(verdict, reason="slot revenue is unsupported")
    p = make_pipeline("critic_core", provider, PARAMS)
    st = _no_success_state()
    d = run(p, st, finish(st, {}))
    assert (d.decision, d.model_calls, len(d.provider_results)) == (expected, 1, 1)
    req = rec.requests[0]
    assert req.role == "critic" and req.metadata["cell_id"] == "cell-1"
    if expected == "continue":
        assert d.directive is not None and "slot revenue is unsupported" in d.directive


def test_provider_failure_and_junk_map_to_continue() -> None:
    for kw in ({"failure": True}, {"text": "sure"}):
        provider, _ = scripted(**kw)  # type: ignore[arg-type]
        for name in ("critic_core", "full_trace"):
            st = _no_success_state()
            d = run(make_pipeline(name, provider, PARAMS), st, finish(st, {}))
            assert d.decision == "continue" and d.model_calls == 1, (name, kw)
            assert d.codes[0] in ("critic.provider_failure", "critic.unparseable")


def _repeat_state(**kw: Any) -> PipelineState:
    trace = (*fx.clean_trace(), fx.call("c-3", "revenue", value=700))
    return state(trace, **kw)


def test_critic_core_stuck_and_controller_recovers_once() -> None:
    st = _repeat_state()
    assert run(make_pipeline("critic_core", Forbidden(), PARAMS), st, finish(st)).decision == "stuck"  # type: ignore[arg-type]
    ctl = make_pipeline("controller", Forbidden(), PARAMS)  # type: ignore[arg-type]
    first = run(ctl, st, finish(st))
    assert first.decision == "continue" and first.directive == STUCK_RECOVERY_DIRECTIVE
    assert "controller.stuck_recovery" in first.codes
    assert run(ctl, st, finish(st)).decision == "stuck"
    # Outside stuck states the controller is the critic core.
    ok = state()
    assert run(make_pipeline("controller", Forbidden(), PARAMS), ok, finish(ok)).decision == "complete"  # type: ignore[arg-type]
    # A fresh controller has its recovery attempt again.
    assert run(make_pipeline("controller", Forbidden(), PARAMS), st, finish(st)).decision == "continue"  # type: ignore[arg-type]


def test_full_trace_always_asks_and_sees_the_whole_trace() -> None:
    provider, rec = scripted("reject", reason="revenue looks wrong")
    st = state()
    d = run(make_pipeline("full_trace", provider, PARAMS), st, finish(st))
    assert d.decision == "continue" and d.model_calls == 1
    assert "revenue looks wrong" in (d.directive or "")
    text = rec.requests[0].messages[0].parts[0].text or ""
    assert '"call_id":"c-1"' in text and '"call_id":"c-2"' in text


def test_ect_complete_continue_directive_needs_human_stuck() -> None:
    ect = make_pipeline("ect", None, PARAMS)
    st = state()
    assert run(ect, st, finish(st)).decision == "complete"

    d = run(ect, st, finish(st, {"units": (5, ("r-1",))}))
    assert d.decision == "continue" and d.model_calls == 0
    assert "coverage.missing_slot" in d.codes
    assert d.directive is not None and "coverage.missing_slot" in d.directive and "revenue" in d.directive

    d = run(ect, st, FinishAction({"claims": "everything is fine"}))
    assert d.decision == "continue" and any(c.startswith("adapter.") for c in d.codes)

    conflict = state((*fx.clean_trace(), fx.call("c-3", "units", value=6)))
    d = run(ect, conflict, finish(conflict))
    assert d.decision == "needs_human" and "evidence.conflicting_receipts" in d.codes

    rep = _repeat_state(calls_used=3, decisions_used=4)
    d = run(ect, rep, finish(rep, {"units": (5, ("r-1",))}))
    assert d.decision == "stuck"
    rep = _repeat_state(calls_used=1, decisions_used=2)
    assert run(ect, rep, finish(rep, {"units": (5, ("r-1",))})).decision == "continue"


def test_make_pipeline() -> None:
    assert tuple(PIPELINES) == ("critic_core", "controller", "full_trace", "ect")
    for name in PIPELINES:
        provider, _ = scripted("accept")
        assert make_pipeline(name, provider, PARAMS).name == name
    with pytest.raises(UnknownPolicy):
        make_pipeline("vibes", None)
    with pytest.raises(TypeError):
        make_pipeline("full_trace", None)


class _Journal:
    def __init__(self) -> None:
        self.events: list[tuple[str, str | None]] = []

    async def begin(self, record: Any) -> None:
        self.events.append(("begin", record.cell_id))

    async def end(self, record: Any) -> None:
        self.events.append(("end", record.cell_id))


def test_critic_calls_are_journaled_through_the_observer() -> None:
    journal = _Journal()
    provider, _ = scripted("accept")
    params = dataclasses.replace(PARAMS, observer=journal)
    st = state()
    d = run(make_pipeline("full_trace", provider, params), st, finish(st))
    assert d.decision == "complete"
    assert journal.events == [("begin", "cell-1"), ("end", "cell-1")]
