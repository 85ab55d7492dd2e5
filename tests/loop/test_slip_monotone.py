"""Raising a slip rate of the simulated planner never makes it do better.

The charter's rule for the simulator: it must be able to make any pipeline look worse, and
raising an error rate never helps one. The planner draws every uniform a reply may use up front
in a fixed order (coupled draws), so for one request a higher rate only adds that slip. What
holds, and what is tested here:

- per request, strictly: over every planner request of ECT's 144 rows of the frozen schedule
  (tools in-process, as in ``test_instrument.py``), a reply that is right under a raised rate
  (a finish the verifier accepts, or the call still needed) is right under the lower rate;
- per run, in expectation only: a cell is not monotone on its own (after a slip the next
  request differs, and so do its draws), so ECT's S over the 144 paired rows can move by a cell
  or two against a small step (measured: ``p_wrong_call`` 0.05 -> 0.25 gave 117 -> 118);
  raising any slip rate from 0 to 0.5 lowers it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.ect import Contract, Ledger, verify_json
from runner.loop import score
from runner.policies import CriticBehaviour, PlannerBehaviour, simulated_responder
from runner.policies._actions import FINISH_TOOL
from runner.policies._common import call_key
from runner.policies._simulated import _missing_calls
from runner.policies._views import extract_view
from runner.providers import ProviderRequest, SimulatedProvider, simulated_rng
from runner.study import load_spec, read_schedule, with_overrides
from runner.study._cell import run_cell_trajectory
from runner.worlds import closed_loop_checkpoints, execute_calls

REPO = Path(__file__).resolve().parents[2]
SPEC = load_spec(REPO / "schedules" / "v2.toml")
ROWS = [r for r in read_schedule(REPO / "schedules" / "v2.schedule.jsonl") if r.policy == "ect"]
CHECKPOINTS = {cp.checkpoint_id: cp for cp in closed_loop_checkpoints()}
SLIPS = ("p_wrong_scope_call", "p_repeat_call", "p_wrong_call", "p_arithmetic_error",
         "p_corrupt_value", "p_cite_missing_receipt", "p_invalid_output")


def ect_supported(overrides: dict[str, float],
                  sink: list[ProviderRequest] | None = None) -> int:
    """ECT's supported completions over its 144 rows with the planner's ``overrides`` (every
    request appended to ``sink``)."""
    spec = with_overrides(SPEC, {f"simulated.planner.{k}": v for k, v in overrides.items()})
    planner = PlannerBehaviour.from_json(spec.simulated.get("planner", {}))
    critic = CriticBehaviour.from_json(spec.simulated.get("critic", {}))
    provider = SimulatedProvider(simulated_responder(planner, critic))
    generate = provider.generate

    async def capture(request: ProviderRequest, *, observer: Any = None) -> Any:
        if sink is not None:
            sink.append(request)
        return await generate(request, observer=observer)

    provider.generate = capture  # type: ignore[method-assign]

    async def tool(world_id: str, tool_id: str, args: Any) -> Any:
        return execute_calls(world_id, [(tool_id, dict(args))])[0].response

    async def run() -> int:
        n = 0
        for row in ROWS:
            t = await run_cell_trajectory(spec, row, CHECKPOINTS[row.checkpoint_id], provider, tool)
            n += score(t, row).supported_completion
        return n

    assert len(ROWS) == 144
    return int(anyio.run(run))


@pytest.fixture(scope="module")
def planner_requests() -> list[ProviderRequest]:
    sink: list[ProviderRequest] = []
    ect_supported({}, sink)
    out = [r for r in sink if r.role == "planner"]
    assert len(out) > 300
    return out


def _right(request: ProviderRequest, planner: PlannerBehaviour) -> bool:
    """Whether the planner's reply to ``request`` is right: a finish whose certificate the
    verifier accepts, or the first call still needed."""
    reply = simulated_responder(planner, CriticBehaviour())(request, simulated_rng(request))
    if len(reply.function_calls) != 1:
        return False
    call = reply.function_calls[0]
    text = "\n".join(p.text or "" for m in request.messages if m.role == "user" for p in m.parts)
    _, view = extract_view(text)
    if call.name == FINISH_TOOL:
        cert = {"format": "ect.certificate/1", **call.args["certificate"]}
        return verify_json(view["contract"], view["ledger"], cert).complete
    missing = _missing_calls(Contract.from_json(view["contract"]),
                             Ledger.from_json(view["ledger"]), list(view["trace"]))
    return bool(missing) and call_key(call.name, call.args) == call_key(*missing[0])


@pytest.mark.parametrize("name", SLIPS)
def test_per_request_a_raised_slip_rate_is_never_right_where_the_lower_was_wrong(
        name: str, planner_requests: list[ProviderRequest]) -> None:
    base = PlannerBehaviour.from_json(SPEC.simulated.get("planner", {}))
    right = {rate: [_right(r, dataclasses.replace(base, **{name: rate}))
                    for r in planner_requests]
             for rate in (0.0, 0.05, 0.5, 1.0)}
    for low, high in ((0.0, 0.05), (0.05, 0.5), (0.5, 1.0)):
        better = [i for i, (a, b) in enumerate(zip(right[low], right[high], strict=True))
                  if b and not a]
        assert better == [], (name, low, high, better[:5])
    assert sum(right[1.0]) < sum(right[0.0]), name  # the slip happens: it is not inert


@pytest.mark.parametrize("name", SLIPS)
def test_raising_a_slip_rate_from_zero_to_half_lowers_ects_supported_completions(
        name: str) -> None:
    assert ect_supported({name: 0.5}) < ect_supported({name: 0.0})


def test_the_spec_names_every_slip_parameter() -> None:
    assert set(SLIPS) <= set(PlannerBehaviour().to_json())
