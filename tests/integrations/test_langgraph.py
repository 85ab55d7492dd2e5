"""LangGraph adapter, run for real with LangChain's GenericFakeChatModel scripted per scenario."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode

from runner.integrations import scoped_value
from runner.integrations.langgraph import (
    EctState,
    ect_node,
    ect_route,
    route_after_agent,
)
from tests.integrations.units import ALL, CONTRACT, DAYS, certificate_text, units


@tool
def get_units(store: str, date: str) -> str:
    """Units sold by a store on a date."""
    return json.dumps(units(store, date))  # noqa: TID251 - a tool's text result


def _call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{n}"}])


def _run(script: list[AIMessage]) -> dict[str, Any]:
    model = GenericFakeChatModel(messages=iter(script))

    def agent(state: EctState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(EctState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([get_units]))
    builder.add_node("ect", ect_node(CONTRACT, scoped_value()))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route_after_agent, ["tools", "ect"])
    builder.add_edge("tools", "agent")
    builder.add_conditional_edges("ect", ect_route("agent", max_attempts=2))
    graph = builder.compile()
    out: dict[str, Any] = graph.invoke({"messages": [("user", "Units of S01, March 1-3?")]})
    return out


def _fetch_all(start: int = 0) -> list[AIMessage]:
    return [_call("get_units", {"store": "S01", "date": d}, start + i) for i, d in enumerate(DAYS)]


def _codes(out: dict[str, Any]) -> set[str]:
    return {r["code"] for r in out["ect"]["reasons"]}


def test_premature_finish_is_blocked_with_reason_codes() -> None:
    script = [
        *_fetch_all(),
        AIMessage(content="The total is 28."),  # a finish without a certificate
        _call("submit", {"certificate": certificate_text(ALL, only_total=True)}, 9),
    ]
    out = _run(script)
    assert out["ect"]["decision"] == "continue"
    assert out["ect_attempts"] == 2
    assert _codes(out) == {"coverage.missing_slot"}
    assert out["ect"]["missing_slots"] == ["days"]
    # The directive went back to the agent as the submit call's answer.
    assert "coverage.missing_slot [days]" in out["messages"][-1].content


def test_recovers_after_the_directive_and_completes() -> None:
    script = [
        _call("get_units", {"store": "S01", "date": DAYS[0]}, 0),
        _call("submit", {"certificate": certificate_text(["r-0001"])}, 1),
        *_fetch_all(2)[1:],
        _call("submit", {"certificate": certificate_text(["r-0001", "r-0002", "r-0003"])}, 9),
    ]
    out = _run(script)
    assert out["ect"] == {"decision": "complete", "reasons": [], "missing_slots": []}
    assert out["ect_attempts"] == 2
    first = next(m for m in out["messages"] if getattr(m, "name", None) == "submit")
    assert "scope.cardinality" in first.content  # the directive named what was missing


def test_receipts_from_another_run_are_blocked() -> None:
    other = _run([*_fetch_all(), _call("submit", {"certificate": certificate_text(ALL)}, 9)])
    assert other["ect"]["decision"] == "complete"
    # A new run that fetched one day only cites the other run's receipts r-0002 and r-0003.
    script = [
        _call("get_units", {"store": "S01", "date": DAYS[0]}, 0),
        _call("submit", {"certificate": certificate_text(ALL)}, 1),
        _call("submit", {"certificate": certificate_text(ALL)}, 2),
    ]
    out = _run(script)
    assert out["ect"]["decision"] == "continue"
    assert "evidence.unknown_receipt" in _codes(out)
