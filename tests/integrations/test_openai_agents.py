"""OpenAI Agents SDK adapter, run for real with a scripted custom ``Model`` (no network)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    ModelResponse,
    OutputGuardrailTripwireTriggered,
    Runner,
    Usage,
    function_tool,
)
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from runner.integrations import scoped_value
from runner.integrations.openai_agents import EctGate
from tests.integrations.units import ALL, CONTRACT, DAYS, certificate_text, units


class ScriptedModel(Model):
    """Replies with the next scripted turn: tool calls, or a plain text answer."""

    def __init__(self, turns: list[Any]) -> None:
        self.turns = list(turns)
        self.seen: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any) -> ModelResponse:
        self.seen.append(input)
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            output: list[Any] = [ResponseOutputMessage(
                id="m", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(text=turn, type="output_text", annotations=[])])]
        else:
            output = [ResponseFunctionToolCall(
                id=f"fc_{i}", call_id=f"call_{len(self.turns)}_{i}", type="function_call",
                name=name, arguments=json.dumps(args))  # noqa: TID251 - tool-call text
                for i, (name, args) in enumerate(turn)]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def get_units(store: str, date: str) -> str:
    """Units sold by a store on a date."""
    return json.dumps(units(store, date))  # noqa: TID251 - a tool's text result


def _run(turns: list[Any]) -> tuple[EctGate, Any]:
    gate = EctGate(CONTRACT, scoped_value())
    agent = Agent(
        name="units", instructions="Answer with evidence.", model=ScriptedModel(turns),
        tools=[get_units, gate.submit_tool], tool_use_behavior=gate.tool_use_behavior,
        output_guardrails=[gate.output_guardrail],
    )  # fmt: skip
    try:
        # asyncio.run closes its loop (run_sync deliberately leaves the thread's loop open).
        result = asyncio.run(
            Runner.run(agent, "Units of S01, March 1-3?", hooks=gate.hooks, max_turns=8)
        )
    except OutputGuardrailTripwireTriggered as e:
        return gate, e
    return gate, result


FETCH = [[("get_units", {"store": "S01", "date": d})] for d in DAYS]


def test_premature_finish_is_blocked_with_reason_codes() -> None:
    gate, out = _run([*FETCH, "The total is 28 units."])
    assert isinstance(out, OutputGuardrailTripwireTriggered)
    assert gate.decision.decision == "continue"
    assert set(gate.decision.codes) == {"coverage.missing_slot"}
    assert gate.decision.missing_slots == ("total", "days")
    info = out.guardrail_result.output.output_info
    assert info is None or info == gate.decision.to_json()
    assert len(gate.session.receipts) == 3  # receipts came from the SDK's tool events


def test_recovers_after_the_directive_and_completes() -> None:
    partial = [("submit", {"certificate": certificate_text(ALL, only_total=True)})]
    full = [("submit", {"certificate": certificate_text(ALL)})]
    _gate, out = _run([*FETCH, partial, full])
    final = json.loads(out.final_output)
    assert final["decision"] == {"decision": "complete", "reasons": [], "missing_slots": []}
    assert final["certificate"]["claims"][1]["slot"] == "days"
    # The model read the directive (the submit tool's output) before recovering.
    outputs = [i for i in out.to_input_list() if i.get("type") == "function_call_output"]
    assert any("coverage.missing_slot [days]" in str(i["output"]) for i in outputs)


def test_receipts_from_another_run_are_blocked() -> None:
    first, done = _run([*FETCH, [("submit", {"certificate": certificate_text(ALL)})]])
    assert json.loads(done.final_output)["decision"]["decision"] == "complete"
    cited = [("submit", {"certificate": certificate_text(ALL)})]
    gate, out = _run([FETCH[0], cited, "Done: 28 units over 3 days."])
    assert isinstance(out, OutputGuardrailTripwireTriggered)
    assert "evidence.unknown_receipt" in gate.decision.codes
    assert "scope.cardinality" in gate.decision.codes
    # A full certificate carried over from the first run fails its binding to this ledger.
    assert first.session.last_certificate is not None
    assert "binding.ledger_digest_mismatch" in gate.session.check(first.session.last_certificate).codes
