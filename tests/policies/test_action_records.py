"""Planner actions own their JSON form (what a cell record keeps of a decision) and read it back
strictly; a cell's identity writes each request's metadata."""

from __future__ import annotations

from typing import Any

import pytest

from runner.canonical import RecordFormatError, canonical_bytes, loads_strict
from runner.policies import (
    CellIdentity,
    EscalateAction,
    FinishAction,
    InvalidAction,
    PlannerAction,
    PlannerView,
    ToolCallAction,
    action_from_json,
    build_planner_request,
)
from runner.providers import GenerationConfig
from runner.worlds import closed_loop_checkpoints

CERT = {"format": "ect/certificate/v1", "task_id": "t", "claims": [{"slot": "a", "value": 1}]}

# The record's form of each action, as the cell records of every store so far hold it.
WRITTEN: list[tuple[PlannerAction, dict[str, Any]]] = [
    (ToolCallAction("get_metric", {"entity": "S01", "date": "2026-03-01"}),
     {"kind": "tool_call", "tool_id": "get_metric",
      "args": {"entity": "S01", "date": "2026-03-01"}}),
    (FinishAction(CERT), {"kind": "finish", "certificate": CERT}),
    (EscalateAction("which source?"), {"kind": "escalate", "question": "which source?"}),
    (InvalidAction("no function call in the response"),
     {"kind": "invalid", "detail": "no function call in the response"}),
]


@pytest.mark.parametrize(("action", "written"), WRITTEN, ids=lambda x: getattr(x, "kind", None))
def test_each_action_writes_the_record_form_and_reads_it_back(
        action: PlannerAction, written: dict[str, Any]) -> None:
    assert action.to_json() == written
    read = action_from_json(loads_strict(canonical_bytes(written)), "decision.action")
    assert read == action and type(read) is type(action)
    assert canonical_bytes(read.to_json()) == canonical_bytes(written)
    assert type(action).from_json(written) == action


@pytest.mark.parametrize(("obj", "message"), [
    ([], "decision.action: expected an object, got array"),
    ({"tool_id": "x", "args": {}}, "decision.action: missing field 'kind'"),
    ({"kind": 3}, "decision.action.kind: expected a string, got number"),
    ({"kind": "dance"}, "decision.action.kind: unknown action kind 'dance'"),
    ({"kind": "tool_call", "tool_id": "x"}, "decision.action: missing field 'args'"),
    ({"kind": "tool_call", "tool_id": "x", "args": None},
     "decision.action.args: expected an object, got null"),
    ({"kind": "finish", "certificate": CERT, "extra": 1}, "decision.action: unknown field 'extra'"),
    ({"kind": "finish", "certificate": "complete"},
     "decision.action.certificate: expected an object or null, got string"),
    ({"kind": "escalate", "question": None}, "decision.action.question: expected a string"),
    ({"kind": "invalid"}, "decision.action: missing field 'detail'"),
])
def test_a_malformed_action_is_refused_naming_the_path(obj: Any, message: str) -> None:
    with pytest.raises(RecordFormatError) as err:
        action_from_json(obj, "decision.action")
    assert str(err.value).startswith(message), str(err.value)


def test_a_cell_identity_writes_the_request_metadata() -> None:
    cell = CellIdentity("cell-0007", 42)
    assert cell.metadata() == {"cell_id": "cell-0007", "seed": 42}
    assert cell.metadata(decision=3) == {"cell_id": "cell-0007", "seed": 42, "decision": 3}
    assert cell.metadata(critic="full_trace", decision=2) == {
        "cell_id": "cell-0007", "seed": 42, "critic": "full_trace", "decision": 2}


def test_a_planner_request_carries_the_cell_and_its_decision_as_before() -> None:
    clean = next(c for c in closed_loop_checkpoints() if c.kind == "clean")
    view = PlannerView(clean.task.contract, clean.trace, clean.ledger, decision=2)
    gen = GenerationConfig(temperature=0.2, seed=42, max_output_tokens=512)
    request = build_planner_request(view, gen, CellIdentity("cell-0007", 42))
    # the mapping the loop used to build by hand: {**{"cell_id", "seed"}, "decision": n}
    assert request.metadata == {"cell_id": "cell-0007", "seed": 42, "decision": 2}


def test_an_action_read_as_another_kind_is_refused() -> None:
    with pytest.raises(RecordFormatError,
                       match=r"^action.kind: expected 'tool_call', got 'finish'"):
        ToolCallAction.from_json({"kind": "finish", "tool_id": "x", "args": {}})
