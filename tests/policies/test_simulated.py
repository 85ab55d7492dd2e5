"""The simulated planner and critics: determinism, parameters, and competent-but-fallible play."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from runner.ect import verify_json
from runner.errors import FormatError
from runner.policies import (
    CellIdentity,
    CriticBehaviour,
    EscalateAction,
    FinishAction,
    InvalidAction,
    PlannerBehaviour,
    PlannerView,
    ToolCallAction,
    build_planner_request,
    parse_planner_action,
    simulated_responder,
)
from runner.providers import GenerationConfig, ProviderRequest, SimulatedProvider
from runner.worlds import plan_calls
from tests.policies import _fixtures as fx

QUIET = dict(
    p_premature_finish=0.0, p_wrong_scope_call=0.0, p_corrupt_value=0.0,
    p_cite_missing_receipt=0.0, p_repeat_call=0.0, p_follow_directive=1.0,
    p_wrong_call=0.0, p_arithmetic_error=0.0,
    p_escalate_on_conflict=0.0, p_invalid_output=0.0,
)


def request(trace: tuple[Any, ...], *, seed: int = 3, directive: str | None = None) -> ProviderRequest:
    view = PlannerView(fx.CONTRACT, trace, fx.ledger_of(trace), directive=directive)
    gen = GenerationConfig(temperature=0.2, seed=seed, max_output_tokens=512)
    return build_planner_request(view, gen, CellIdentity(f"cell-{seed}", seed))


def act(req: ProviderRequest, **planner: float) -> Any:
    provider = SimulatedProvider(simulated_responder(PlannerBehaviour(**{**QUIET, **planner}), CriticBehaviour()))
    result = anyio.run(provider.generate, req)
    assert result.response is not None and result.response.simulated
    return parse_planner_action(result.response), result


def test_same_seed_and_request_same_bytes() -> None:
    req = request(fx.clean_trace()[:1], seed=5)
    provider = SimulatedProvider(simulated_responder(PlannerBehaviour(), CriticBehaviour()))
    a = anyio.run(provider.generate, req)
    b = anyio.run(SimulatedProvider(simulated_responder(PlannerBehaviour(), CriticBehaviour())).generate, req)
    assert a.raw[0].response_bytes == b.raw[0].response_bytes
    # Across seeds the default (noisy) planner does not always do the same thing.
    kinds = {type(act(request(fx.clean_trace()[:1], seed=s), **PlannerBehaviour().to_json())[0]) for s in range(30)}
    assert {ToolCallAction, FinishAction} <= kinds


def test_planner_makes_the_next_missing_call() -> None:
    trace = fx.clean_trace()[:1]
    action, _ = act(request(trace))
    assert isinstance(action, ToolCallAction)
    done = {(c.tool_id, tuple(sorted(c.args.items()))) for c in trace}
    todo = [(t, a) for t, a in plan_calls(fx.CONTRACT) if (t, tuple(sorted(a.items()))) not in done]
    assert (action.tool_id, action.args) == todo[0]


def test_planner_finishes_with_a_certificate_ect_accepts() -> None:
    trace = fx.clean_trace()
    action, _ = act(request(trace))
    assert isinstance(action, FinishAction)
    d = verify_json(fx.CONTRACT.to_json(), fx.ledger_of(trace).to_json(), action.certificate_obj)
    assert d.complete, d.reasons


@pytest.mark.parametrize(
    ("noise", "family"),
    [({"p_corrupt_value": 1.0}, "replay"), ({"p_cite_missing_receipt": 1.0}, "evidence")],
)
def test_planner_synthesis_noise_is_caught_by_ect(noise: dict[str, float], family: str) -> None:
    trace = fx.clean_trace()
    action, _ = act(request(trace), **noise)
    assert isinstance(action, FinishAction)
    d = verify_json(fx.CONTRACT.to_json(), fx.ledger_of(trace).to_json(), action.certificate_obj)
    assert not d.complete and family in d.families


def test_premature_finish_is_fluent_and_a_directive_is_followed() -> None:
    trace = fx.clean_trace()[:1]
    action, _ = act(request(trace), p_premature_finish=1.0)
    assert isinstance(action, FinishAction)
    slots = [c["slot"] for c in action.certificate_obj["claims"]]
    assert slots == ["units", "revenue"]  # every slot filled: it looks complete
    d = verify_json(fx.CONTRACT.to_json(), fx.ledger_of(trace).to_json(), action.certificate_obj)
    assert not d.complete
    followed, _ = act(request(trace, directive="Missing slots: revenue"), p_premature_finish=1.0)
    assert isinstance(followed, ToolCallAction)
    ignored, _ = act(request(trace, directive="Missing slots: revenue"), p_premature_finish=1.0,
                     p_follow_directive=0.0)
    assert isinstance(ignored, FinishAction)


def test_planner_call_noise() -> None:
    trace = fx.clean_trace()[:1]
    repeat, _ = act(request(trace), p_repeat_call=1.0)
    assert (repeat.tool_id, repeat.args) == (trace[0].tool_id, trace[0].args)
    right, _ = act(request(trace))
    wrong, _ = act(request(trace), p_wrong_scope_call=1.0)
    assert isinstance(wrong, ToolCallAction) and wrong.tool_id == right.tool_id
    assert wrong.args != right.args


def test_planner_invalid_output_and_escalation() -> None:
    action, _ = act(request(fx.clean_trace()), p_invalid_output=1.0)
    assert isinstance(action, InvalidAction)
    conflict = (*fx.clean_trace(), fx.call("c-3", "units", value=6))
    action, _ = act(request(conflict), p_escalate_on_conflict=1.0)
    assert isinstance(action, EscalateAction)


def test_a_request_without_a_view_gets_a_text_reply() -> None:
    req = request(fx.clean_trace())
    from runner.providers import Message

    bare = ProviderRequest(role="planner", system="", messages=(Message.user_text("hello"),),
                           tools=req.tools, response_schema=None, generation=req.generation)
    action, _ = act(bare)
    assert isinstance(action, InvalidAction)


def test_behaviour_parameters_round_trip_strictly() -> None:
    p = PlannerBehaviour(p_premature_finish=0.5)
    assert PlannerBehaviour.from_json(p.to_json()) == p
    assert CriticBehaviour.from_json({}) == CriticBehaviour()
    assert CriticBehaviour.from_json(CriticBehaviour().to_json()) == CriticBehaviour()
    for bad in ({"p_premature_finish": 1.5}, {"p_premature_finish": True}, {"p_vibes": 0.1},
                {"p_premature_finish": "0.5"}, []):
        with pytest.raises(FormatError):
            PlannerBehaviour.from_json(bad)
    with pytest.raises(FormatError):
        CriticBehaviour(p_accept_unsupported=-0.1)


def test_a_followed_directive_does_not_stop_the_planner_slipping() -> None:
    """Following a directive changes what the planner knows, never whether it can err."""
    trace = fx.clean_trace()
    directive = "The ECT verifier returned continue.\nReasons:\n- replay.mismatch [slot units]"
    for noise, family in (({"p_corrupt_value": 1.0}, "replay"),
                          ({"p_cite_missing_receipt": 1.0}, "evidence")):
        action, _ = act(request(trace, directive=directive), p_follow_directive=1.0, **noise)
        assert isinstance(action, FinishAction)
        d = verify_json(fx.CONTRACT.to_json(), fx.ledger_of(trace).to_json(),
                        action.certificate_obj)
        assert not d.complete and family in d.families, noise


def _derived_checkpoint() -> Any:
    from runner.worlds import closed_loop_checkpoints
    for cp in closed_loop_checkpoints():
        if cp.kind == "clean" and any(
                spec.transforms[0].op != "identity" for spec in cp.task.contract.slots.values()):
            return cp
    raise AssertionError("no closed-loop task with a derived slot")


def test_arithmetic_is_the_planners_own_and_errs_at_its_rate() -> None:
    cp = _derived_checkpoint()
    view = PlannerView(cp.task.contract, tuple(cp.trace), cp.ledger, directive="Reasons: ...")
    req = build_planner_request(view, GenerationConfig(temperature=0.2, seed=1, max_output_tokens=512),
                                CellIdentity("derived", 1))
    verdicts = {}
    for rate in (0.0, 1.0):
        action, _ = act(req, p_arithmetic_error=rate)
        assert isinstance(action, FinishAction)
        d = verify_json(cp.task.contract.to_json(), cp.ledger.to_json(), action.certificate_obj)
        verdicts[rate] = d
    assert verdicts[0.0].complete, verdicts[0.0].reasons
    assert not verdicts[1.0].complete and {r.code for r in verdicts[1.0].reasons} == {"replay.mismatch"}
    # Copying a value (identity) is no arithmetic: the identity-only task is unaffected.
    action, _ = act(request(fx.clean_trace()), p_arithmetic_error=1.0)
    assert verify_json(fx.CONTRACT.to_json(), fx.ledger_of(fx.clean_trace()).to_json(),
                       action.certificate_obj).complete
