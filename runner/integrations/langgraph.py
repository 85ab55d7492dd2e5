"""ECT for LangGraph (``pip install '.[langgraph]'`` in the checkout): a node and a conditional edge.

The graph routes the agent's turn to :func:`ect_node` whenever the agent calls ``submit`` or
stops calling tools (a finish). The node rebuilds the ledger from LangGraph's own tool events —
each ``AIMessage.tool_calls`` entry and the ``ToolMessage`` that answered it — verifies the
submission, and answers: a ``ToolMessage`` to the submit call (or a ``HumanMessage`` after a
bare finish) carrying the verifier's directive, plus ``state["ect"]`` = the decision.
:func:`ect_route` then goes to ``END`` only on ``complete`` (or after ``max_attempts``
rejected finishes, with the ``continue`` decision in the state), otherwise back to the agent.

A run may only end through the ECT node, so a premature finish never ends the graph as done.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END
from langgraph.graph.message import add_messages

from runner.ect import Contract
from runner.integrations._receipts import Extractor, ToolEvent
from runner.integrations._session import EctSession, directive_text

__all__ = ["EctState", "ect_node", "ect_route", "route_after_agent", "submit_tool"]

SUBMIT = "submit"


class EctState(TypedDict, total=False):
    """Graph state: the message list plus the last ECT decision and the number of attempts."""

    messages: Annotated[list[AnyMessage], add_messages]
    ect: dict[str, Any]
    ect_attempts: int


def _submit(certificate: str) -> str:
    return "submitted"  # never executed: the ECT node answers submit calls


def submit_tool() -> StructuredTool:
    """The ``submit`` tool to bind to the model (the ECT node, not a ToolNode, answers it)."""
    return StructuredTool.from_function(
        _submit,
        name=SUBMIT,
        description=(
            'Finish with a certificate: JSON text {"claims": [{"slot", "value", "evidence": '
            '[receipt ids], "transform": {"op", "params"}}]}. Receipt ids are r-0001, r-0002, '
            "... in the order of your tool calls. The run ends only if it verifies."
        ),
    )


def _events(messages: Sequence[AnyMessage]) -> list[ToolEvent]:
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    events = []
    for m in messages:
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                if call.get("id"):
                    calls[str(call["id"])] = (call["name"], dict(call.get("args") or {}))
        elif isinstance(m, ToolMessage) and m.tool_call_id in calls:
            name, args = calls[m.tool_call_id]
            failed = getattr(m, "status", "success") == "error"
            content = m.content if isinstance(m.content, str) else None
            events.append(
                ToolEvent(
                    call_id=m.tool_call_id,
                    tool=name,
                    args=args,
                    result=None if failed else content,
                    error=str(m.content) if failed else None,
                )
            )
    return events


def route_after_agent(state: Mapping[str, Any]) -> str:
    """Edge after the agent: ``"tools"`` when it called tools other than submit, else
    ``"ect"`` (a submit, or a finish without tool calls, is checked by the ECT node)."""
    last = state["messages"][-1]
    calls = last.tool_calls if isinstance(last, AIMessage) else []
    if calls and all(c["name"] != SUBMIT for c in calls):
        return "tools"
    return "ect"


def ect_node(
    contract: Contract | Mapping[str, Any], extract: Extractor
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """The verifying node. Its state update: the directive message, ``ect`` (the decision as
    JSON) and ``ect_attempts`` (finishes checked so far)."""
    parsed = contract if isinstance(contract, Contract) else Contract.from_json(contract)

    def node(state: Mapping[str, Any]) -> dict[str, Any]:
        messages = list(state["messages"])
        session = EctSession(parsed, extract, submit_tool=SUBMIT)
        session.record_all(_events(messages))
        last = messages[-1] if messages else None
        submit = None
        if isinstance(last, AIMessage):
            submit = next((c for c in last.tool_calls if c["name"] == SUBMIT), None)
        if submit is not None:
            decision = session.check((submit.get("args") or {}).get("certificate"))
            reply: AnyMessage = ToolMessage(
                content=directive_text(decision), tool_call_id=str(submit["id"]), name=SUBMIT
            )
        else:
            decision = session.unsubmitted()
            reply = HumanMessage(
                content="You stopped without a certificate. Call submit.\n"
                + directive_text(decision)
            )
        return {
            "messages": [reply],
            "ect": decision.to_json(),
            "ect_attempts": int(state.get("ect_attempts", 0)) + 1,
        }

    return node


def ect_route(agent: str = "agent", *, max_attempts: int = 3) -> Callable[[Mapping[str, Any]], str]:
    """Edge after the ECT node: ``END`` on ``complete``; after ``max_attempts`` checked
    finishes also ``END`` (the state's ``ect`` decision is then ``continue``: blocked);
    otherwise back to ``agent`` with the directive."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be >= 1")

    def route(state: Mapping[str, Any]) -> str:
        decision = (state.get("ect") or {}).get("decision")
        if decision == "complete" or int(state.get("ect_attempts", 0)) >= max_attempts:
            return str(END)
        return agent

    return route
