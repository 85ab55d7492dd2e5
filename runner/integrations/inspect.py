"""ECT for Inspect AI (``pip install '.[inspect]'`` in the checkout): a solver/submit-tool pair and a scorer.

* :func:`ect_agent` is a tool-use loop whose only way to finish is the ``submit`` tool: each
  submission is verified against the sample's contract and the ledger built from the sample's
  own tool-call events so far, and the verifier's directive comes back as the submit call's
  result (the next message the model reads). A reply without tool calls is a premature finish:
  the directive comes back as a user message. The loop ends on ``complete``, after
  ``max_attempts`` rejected finishes, or after ``max_turns`` model calls.
* :func:`ect_scorer` scores a sample by verifying the certificate the agent last submitted
  against the sample's contract and the ledger of the tool events before that submission:
  ``C`` only on ``complete``; the decision (reason codes included) is in the score's metadata.

Receipts come from Inspect's own tool-call records: each ``ChatMessageAssistant.tool_calls``
entry and the ``ChatMessageTool`` that answered it. The contract is the sample's
``metadata["ect_contract"]`` (the key is configurable).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    execute_tools,
    get_model,
)
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import Tool, tool

from runner.ect import Decision
from runner.integrations._receipts import Extractor, ToolEvent
from runner.integrations._session import EctSession, directive_text

__all__ = ["ect_agent", "ect_scorer", "ect_submit", "tool_events"]

SUBMIT = "submit"
CONTRACT_KEY = "ect_contract"


def tool_events(messages: Sequence[ChatMessage]) -> list[ToolEvent]:
    """Inspect's tool-call records as :class:`ToolEvent` s, in the order results arrived."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    events = []
    for m in messages:
        if isinstance(m, ChatMessageAssistant):
            for call in m.tool_calls or []:
                calls[call.id] = (call.function, dict(call.arguments or {}))
        elif isinstance(m, ChatMessageTool) and m.tool_call_id in calls:
            name, args = calls[m.tool_call_id]
            events.append(
                ToolEvent(
                    call_id=m.tool_call_id,
                    tool=name,
                    args=args,
                    result=None if m.error else m.text,
                    error=m.error.message if m.error else None,
                )
            )
    return events


def _session(state: TaskState, extract: Extractor, key: str) -> EctSession:
    if key not in state.metadata:
        raise ValueError(f"sample has no metadata[{key!r}] (its ECT contract)")
    return EctSession(state.metadata[key], extract, submit_tool=SUBMIT)


def _last_submission(messages: Sequence[ChatMessage]) -> tuple[int, Any] | None:
    """Index and arguments of the last submit call, or None."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, ChatMessageAssistant):
            for call in reversed(m.tool_calls or []):
                if call.function == SUBMIT:
                    return i, (call.arguments or {}).get("certificate")
    return None


def _check_state(state: TaskState, extract: Extractor, key: str) -> Decision:
    session = _session(state, extract, key)
    found = _last_submission(state.messages)
    if found is None:
        session.record_all(tool_events(state.messages))
        return session.unsubmitted()
    index, submission = found
    session.record_all(tool_events(state.messages[:index]))
    return session.check(submission)


def ect_submit(state: TaskState, extract: Extractor, *, contract_key: str = CONTRACT_KEY) -> Tool:
    """The submit tool for one sample (built by :func:`ect_agent`; it reads ``state``)."""

    @tool(name=SUBMIT)
    def submit() -> Tool:
        async def execute(certificate: str) -> str:
            """Finish with a certificate. The run ends only if it verifies; otherwise this
            returns what is missing.

            Args:
                certificate: JSON text {"claims": [{"slot", "value", "evidence": [receipt
                    ids], "transform": {"op", "params"}}]}; receipt ids are r-0001, r-0002,
                    ... in the order of your tool results.
            """
            decision = _check_state(state, extract, contract_key)
            state.metadata["ect_decision"] = decision.to_json()
            return directive_text(decision)

        return execute

    return submit()


@solver
def ect_agent(
    tools: Sequence[Tool],
    extract: Extractor,
    *,
    contract_key: str = CONTRACT_KEY,
    max_turns: int = 12,
    max_attempts: int = 3,
) -> Solver:
    """A tool-use loop that may only finish with a certificate that verifies."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.tools = [*tools, ect_submit(state, extract, contract_key=contract_key)]
        attempts = 0
        for _ in range(max_turns):
            output = await get_model().generate(state.messages, state.tools)
            state.output = output
            state.messages.append(output.message)
            if not output.message.tool_calls:
                attempts += 1
                decision = _check_state(state, extract, contract_key)
                state.metadata["ect_decision"] = decision.to_json()
                state.messages.append(
                    ChatMessageUser(
                        content="You stopped without a verified certificate. Call submit.\n"
                        + directive_text(decision)
                    )
                )
            else:
                result = await execute_tools(state.messages, state.tools)
                state.messages.extend(result.messages)
                if any(c.function == SUBMIT for c in output.message.tool_calls):
                    attempts += 1
                    if (state.metadata.get("ect_decision") or {}).get("decision") == "complete":
                        break
            if attempts >= max_attempts:
                break
        return state

    return solve


@scorer(metrics=[accuracy()])
def ect_scorer(extract: Extractor, *, contract_key: str = CONTRACT_KEY) -> Scorer:
    """``C`` iff the last submitted certificate verifies; the decision is in the metadata."""

    async def score(state: TaskState, target: Target) -> Score:
        decision = _check_state(state, extract, contract_key)
        return Score(
            value=CORRECT if decision.complete else INCORRECT,
            answer=decision.decision,
            explanation=directive_text(decision),
            metadata={"ect": decision.to_json()},
        )

    return score
