"""ECT for the OpenAI Agents SDK (``pip install '.[openai-agents]'`` in the checkout).

:class:`EctGate` (one per run) gives an agent three things:

* a ``submit`` function tool: the agent finishes by submitting claims; the tool verifies them
  and returns the verifier's directive as its output, which the model reads next turn;
* a ``tool_use_behavior`` that ends the run only when a submitted certificate verifies (the
  final output is canonical JSON text ``{"certificate": {...}, "decision": {...}}``);
* an output guardrail that trips on any other final output (the model answering in plain text
  is a premature finish) by re-verifying what it is given. The SDK raises
  ``OutputGuardrailTripwireTriggered``; the ``continue`` decision, reason codes included, is
  ``gate.decision`` and the guardrail's ``output_info`` (which the SDK may redact from the
  exception when the blocked turn had side effects; ``gate.decision`` is always there).

Receipts come from the SDK's own tool events: :meth:`EctGate.hooks` is a ``RunHooks`` whose
``on_tool_end`` reads the call id and arguments from the ``ToolContext`` and the tool's output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    FunctionToolResult,
    GuardrailFunctionOutput,
    OutputGuardrail,
    RunContextWrapper,
    RunHooks,
    ToolsToFinalOutputResult,
    function_tool,
)
from agents.tool_context import ToolContext

from runner.canonical import canonical_bytes, loads_strict
from runner.ect import Contract, Decision
from runner.errors import FormatError
from runner.integrations._receipts import Extractor, ToolEvent
from runner.integrations._session import EctSession, directive_text

__all__ = ["EctGate"]

SUBMIT = "submit"


class _Hooks(RunHooks[Any]):
    def __init__(self, session: EctSession) -> None:
        self.session = session

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Any, result: object
    ) -> None:
        if not isinstance(context, ToolContext) or tool.name == SUBMIT:
            return
        try:
            args = json.loads(context.tool_arguments or "{}")
        except ValueError:
            args = {"arguments": context.tool_arguments}
        self.session.record(
            ToolEvent(call_id=context.tool_call_id, tool=tool.name, args=args, result=result)
        )


class EctGate:
    """The ECT gate for one agent run.

    Args:
        contract: the trusted contract of the task.
        extract: which values each tool result holds (see ``scoped_value``).

    Use ``Agent(..., tools=[*your_tools, gate.submit_tool],
    tool_use_behavior=gate.tool_use_behavior, output_guardrails=[gate.output_guardrail])`` and
    ``Runner.run(agent, task, hooks=gate.hooks)``.
    """

    def __init__(self, contract: Contract | Mapping[str, Any], extract: Extractor) -> None:
        self.session = EctSession(contract, extract, submit_tool=SUBMIT)
        self.hooks: RunHooks[Any] = _Hooks(self.session)
        self.submit_tool: FunctionTool = self._make_submit()
        self.output_guardrail: OutputGuardrail[Any] = OutputGuardrail(
            guardrail_function=self._guard, name="ect"
        )

    @property
    def decision(self) -> Decision:
        """The last decision (every slot missing when nothing was submitted yet)."""
        if self.session.last_decision is None:
            return self.session.unsubmitted()
        return self.session.last_decision

    def _make_submit(self) -> FunctionTool:
        session = self.session

        @function_tool(name_override=SUBMIT)
        def submit(certificate: str) -> str:
            """Finish with a certificate: JSON text {"claims": [{"slot", "value", "evidence":
            [receipt ids], "transform": {"op", "params"}}]}. Receipt ids are r-0001, r-0002, ...
            in the order your tool results arrived. The run ends only if it verifies; otherwise
            this returns what is missing.

            Args:
                certificate: the claims as JSON text.
            """
            return directive_text(session.check(certificate))

        return submit

    def tool_use_behavior(
        self, context: RunContextWrapper[Any], results: list[FunctionToolResult]
    ) -> ToolsToFinalOutputResult:
        """End the run only when this turn's ``submit`` produced a ``complete`` decision."""
        submitted = any(r.tool.name == SUBMIT for r in results)
        decision = self.session.last_decision
        cert = self.session.last_certificate
        if submitted and decision is not None and decision.complete and cert is not None:
            payload = {"certificate": cert, "decision": decision.to_json()}
            return ToolsToFinalOutputResult(
                is_final_output=True, final_output=canonical_bytes(payload).decode("utf-8")
            )
        return ToolsToFinalOutputResult(is_final_output=False)

    def _guard(
        self, context: RunContextWrapper[Any], agent: Agent[Any], output: Any
    ) -> GuardrailFunctionOutput:
        # Re-verify whatever is about to become the final output: only a certificate that
        # verifies against this contract and this run's ledger passes.
        ok = False
        try:
            obj = loads_strict(output) if isinstance(output, str) else None
        except FormatError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("certificate"), dict):
            ok = self.session.check(obj["certificate"]).complete
        return GuardrailFunctionOutput(
            output_info=self.decision.to_json(), tripwire_triggered=not ok
        )
