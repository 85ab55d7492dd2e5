"""The static arms on the real 432-snapshot grid, and request blinding.

Held-out only, as in the paper's Table 2. These assert the properties the design guarantees
(ECT: no unsafe complete, no clean non-complete; the critic core: fast paths only, stuck exactly
where the agent loops; the weak signals: complete whenever the agent signals), not tuned counts.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import anyio
import pytest

from runner.policies import (
    CellIdentity,
    CriticBehaviour,
    PlannerBehaviour,
    PlannerView,
    build_planner_request,
    decide_static,
    simulated_responder,
)
from runner.policies._common import last_call_repeats
from runner.providers import GenerationConfig, ProviderRequest, SimulatedProvider
from runner.worlds import closed_loop_checkpoints, static_grid
from tests.policies._providers import Forbidden, Recorder


@cache
def heldout() -> tuple[Any, ...]:
    return tuple(s for s in static_grid() if s.task.split == "heldout")


def run_arm(arm: str, provider: Any, snaps: tuple[Any, ...], **kw: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [await decide_static(arm, s, provider, **kw) for s in snaps]

    return anyio.run(go)


def test_ect_is_safe_and_complete_on_heldout() -> None:
    snaps = heldout()
    assert len(snaps) == 324
    out = run_arm("ect", Forbidden(), snaps)
    unsafe = [s.snapshot_id for s, d in zip(snaps, out, strict=True)
              if s.condition != "C0" and d.decision == "complete"]
    clean_nc = [s.snapshot_id for s, d in zip(snaps, out, strict=True)
                if s.condition == "C0" and d.decision != "complete"]
    assert unsafe == [] and clean_nc == []
    assert {d.decision for s, d in zip(snaps, out, strict=True) if s.condition == "F8"} == {"continue"}
    ablated = run_arm("ect", Forbidden(), snaps, ablate=frozenset({"recovery"}))
    assert [d.decision for s, d in zip(snaps, ablated, strict=True) if d.decision == "stuck"] == [
        "stuck" for s in snaps if s.condition == "F8"
    ]


def test_critic_core_never_calls_the_model_and_follows_its_fast_paths() -> None:
    snaps = tuple(static_grid())
    out = run_arm("critic_core", Forbidden(), snaps)  # Forbidden raises on any model call
    for s, d in zip(snaps, out, strict=True):
        assert d.model_calls == 0
        if last_call_repeats(s.trace):
            assert d.decision == "stuck", s.snapshot_id
        else:
            assert d.decision == ("complete" if s.completion_signal else "continue"), s.snapshot_id


@pytest.mark.parametrize("arm", ["completion_token", "heuristic"])
def test_weak_signals_complete_on_every_signal(arm: str) -> None:
    snaps = heldout()
    for s, d in zip(snaps, run_arm(arm, Forbidden(), snaps), strict=True):
        assert (d.decision == "complete") == s.completion_signal, s.snapshot_id


_LABELS = re.compile(r'"(split|fault|gold|gold_decision|condition|checkpoint_id|snapshot_id)"|heldout|held-out')


def _blinded(req: ProviderRequest, *forbidden: str) -> None:
    text = req.canonical().decode("utf-8")
    assert _LABELS.search(text) is None, _LABELS.search(text)
    for word in forbidden:
        assert word not in text


def test_requests_never_show_split_fault_or_gold() -> None:
    rec = Recorder("accept")
    provider = SimulatedProvider(rec)
    snaps = [s for s in heldout() if s.task.task_id == heldout()[0].task.task_id]
    for arm in ("full_trace", "self_check"):
        run_arm(arm, provider, tuple(snaps))
    assert len(rec.requests) == 2 * len(snaps) - 1  # no self-check without a completion signal
    ids = {s.snapshot_id for s in snaps}
    for req in rec.requests:
        _blinded(req, *ids, "/F", "/C0")
    gen = GenerationConfig(temperature=0.2, seed=1, max_output_tokens=512)
    for cp in closed_loop_checkpoints()[:8]:
        view = PlannerView(cp.task.contract, cp.trace, cp.ledger)
        req = build_planner_request(view, gen, CellIdentity("row-1", 1))
        _blinded(req, cp.checkpoint_id, "incomplete", "closed_loop")


def test_simulated_full_trace_and_self_check_run_on_the_grid() -> None:
    snaps = heldout()
    provider = SimulatedProvider(simulated_responder(PlannerBehaviour(), CriticBehaviour()))
    out = run_arm("full_trace", provider, snaps)
    assert all(d.model_calls == 1 and d.provider_result is not None for d in out)
    assert all(d.provider_result.response.simulated for d in out)
    again = run_arm("full_trace", provider, snaps)
    assert [d.decision for d in out] == [d.decision for d in again]  # deterministic
    faults = [d for s, d in zip(snaps, out, strict=True) if s.condition != "C0"]
    # A fallible critic: it lets some unsupported finishes through, but far fewer than the
    # weak signals (which complete on 252 of the 288 faults).
    unsafe = sum(d.decision == "complete" for d in faults)
    assert 0 < unsafe < 150
