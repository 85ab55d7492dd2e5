"""The handoff package (asked, done, found, and the one question, readable in a minute), and
resuming a needs_human run after a person decided."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.canonical import canonical_bytes
from runner.control import (
    Budget,
    Escalate,
    Finish,
    Guard,
    HandoffPackage,
    RunController,
    RunResult,
    RunState,
    SideEffectRule,
    StoppingRule,
    StopReason,
    ToolCall,
    ToolLimits,
    ToolResult,
)
from tests.control.conftest import merge, script, tools
from tests.control.helpers_refunds import refund_controller, refunder


def escalated() -> HandoffPackage:
    rule = StoppingRule("claim", {"shipment_id": lambda s: "shipment_id" in s.data,
                                  "claims_in_window": lambda s: "claims" in s.data})
    c = RunController(Budget(max_steps=9, max_tokens=999), rules=[rule], fold=merge)
    turns = [
        ToolCall("get_shipment", {"ticket": 4471}),
        ToolCall("carrier_pod", {"shipment": "SH-4471203"}),
        Escalate("Carrier says delivered, customer says not: issue the $84.50 credit?",
                 ("carrier proof of delivery has no signature",)),
    ]
    res = c.run("Resolve ticket 4471: parcel not received", script(*turns), tools({
        "get_shipment": ToolResult.success({"shipment_id": "SH-4471203"}),
        "carrier_pod": ToolResult.success({"delivered": "2026-03-14", "signature": None}),
    }))
    assert res.reason is StopReason.NEEDS_HUMAN and res.handoff is not None
    return res.handoff


def test_package_contents() -> None:
    h = escalated()
    assert h.asked == "Resolve ticket 4471: parcel not received"
    assert h.question == "Carrier says delivered, customer says not: issue the $84.50 credit?"
    assert h.done == (
        'get_shipment({"ticket":4471}) -> {"shipment_id":"SH-4471203"}',
        'carrier_pod({"shipment":"SH-4471203"}) -> {"delivered":"2026-03-14","signature":null}',
    )
    assert h.found == ("carrier proof of delivery has no signature",
                       "claim: satisfied shipment_id", "claim: still missing claims_in_window")
    assert (h.steps, h.tool_calls) == (3, 2)


def test_render_is_short_markdown_question_first() -> None:
    text = escalated().render()
    lines = text.splitlines()
    assert lines[0].startswith("## Needs a decision") and "needs_human" in lines[0]
    assert lines[2].startswith("**Question:** Carrier says delivered")
    assert "**Asked:** Resolve ticket 4471" in text and "**Found:**" in text
    assert len(lines) <= 20


def test_to_json_is_canonicalizable() -> None:
    obj = escalated().to_json()
    assert obj["stop_reason"] == "needs_human"
    assert set(obj) == {"run_id", "stop_reason", "stop_detail", "asked", "done", "found",
                        "question", "steps", "tool_calls", "cost_usd"}
    canonical_bytes(obj)


def test_repeats_are_collapsed_and_long_traces_capped() -> None:
    c = RunController(Budget(max_steps=21, max_tokens=999, tool_limits=ToolLimits(default=50)),
                      validate=lambda s, o: True)
    turns = [ToolCall("s", {"q": 0})] + [ToolCall("s", {"q": i}) for i in range(20)]
    res = c.run({"goal": "find x"}, script(*turns), tools({"s": ToolResult.success({"n": 1})}))
    h = res.handoff
    assert h is not None and res.reason is StopReason.STEP_BUDGET
    assert h.done[0] == 's({"q":0}) -> {"n":1} (x2)'  # consecutive repeats collapsed
    assert len(h.done) == 8 and h.done[6] == "... 13 more"
    assert h.done[7].startswith('s({"q":19})')
    assert h.asked == '{"goal":"find x"}'
    assert "larger step budget" in h.question  # a default question per stop reason


def test_guard_forced_escalation_carries_the_policy_question() -> None:
    g = Guard(allow={"refund"}, side_effects={"refund": SideEffectRule(
        amount_arg="amount", escalate_above=50)})
    c = RunController(Budget(max_steps=3, max_tokens=99), guard=g, validate=lambda s, o: True)
    res = c.run("refund order 9", script(ToolCall("refund", {"amount": 84.5},
                                                  idempotency_key="r9")), tools({}))
    assert res.reason is StopReason.NEEDS_HUMAN and res.handoff is not None
    assert res.handoff.question.startswith('Approve refund({"amount":84.5})?')
    assert res.handoff.done == ()
    assert "- nothing" in res.handoff.render()


def test_every_non_goal_stop_has_a_package_with_a_question() -> None:
    c = RunController(Budget(max_steps=2, max_tokens=99), validate=lambda s, o: True)
    res = c.run("t", script(ToolCall("a", {"i": 1}), ToolCall("a", {"i": 2})),
                tools({"a": ToolResult.failure("bad gateway")}))
    assert res.reason is StopReason.TOOL_ERROR
    assert res.handoff is not None and res.handoff.question.endswith("?")
    assert "error: bad gateway" in res.handoff.done[0]


def test_needs_human_resumes_after_approval_and_never_repeats_the_side_effect(tmp_path: Path) -> None:
    paid: list[int] = []

    def execute(call: ToolCall) -> ToolResult:
        paid.append(call.args["amount"])
        return ToolResult.success({"refunded": True})

    first = refund_controller().run("refund 250", refunder, execute)
    assert first.reason is StopReason.NEEDS_HUMAN and first.resumable and paid == []
    assert first.handoff is not None and "Approve refund" in first.handoff.question

    second = first.resume(approvals={"refund"}, answer="approved by finance")
    assert second.reason is StopReason.GOAL_MET and paid == [250]
    assert second.steps == 3  # the budget carried on: the blocked step counts
    assert not second.resumable
    with pytest.raises(ValueError, match="only a needs_human"):
        second.resume(approvals={"refund"})


def test_resume_of_an_async_run(tmp_path: Path) -> None:
    async def execute(call: ToolCall) -> ToolResult:
        return ToolResult.success({"refunded": True})

    async def main() -> RunResult[Any]:
        first = await refund_controller().arun("refund", refunder, execute)
        assert first.reason is StopReason.NEEDS_HUMAN
        return await first.resume(approvals={"refund"})  # type: ignore[no-any-return]

    assert anyio.run(main).reason is StopReason.GOAL_MET


def test_approval_never_lifts_the_maximum() -> None:
    decide = script(ToolCall("refund", {"amount": 5000}, idempotency_key="r-1"))
    first = refund_controller().run("refund", decide, tools({}))
    assert first.reason is StopReason.POLICY_BLOCK and not first.resumable


def test_resume_feeds_the_answer_to_the_model_and_names_a_run_it_cannot_resume() -> None:
    notes: list[tuple[str, ...]] = []

    def decide(state: RunState) -> ToolCall | Finish:
        notes.append(state.directive.notes if state.directive is not None else ())
        return refunder(state)

    first = refund_controller().run("refund 250", decide, tools(
        {"refund": ToolResult.success({"refunded": True})}), run_id="r-9")
    second = first.resume(approvals={"refund"}, answer="approved by finance")
    assert second.reason is StopReason.GOAL_MET
    assert "A person answered: approved by finance" in notes[1]
    with pytest.raises(ValueError) as e:
        second.resume()
    assert str(e.value) == ("run r-9 ended goal_met: only a needs_human result of run()/arun() "
                            "can be resumed")
