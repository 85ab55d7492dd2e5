"""A decision record holds a typed action and a :class:`DecisionVerdict`, and writes the JSON
every store so far holds (the verdicts are the same strings, the action the same object)."""

from __future__ import annotations

from typing import Any

import pytest

from runner.canonical import RecordFormatError, canonical_bytes, loads_strict
from runner.ect import Reason
from runner.loop import DecisionRecord, DecisionVerdict, PipelineJudgement
from runner.policies import FinishAction, InvalidAction, ToolCallAction

# The verdict strings of the record format (digest domain ect/record/v1).
RECORD_STRINGS = {"executed", "tool_failed", "stopped", "continue", "deduplicated",
                  "finish_complete", "finish_continue", "finish_stuck", "finish_needs_human"}


def test_the_verdicts_are_the_record_strings() -> None:
    assert {v.value for v in DecisionVerdict} == RECORD_STRINGS
    assert all(v == v.value for v in DecisionVerdict)  # str-valued: compares as its string


def test_finish_verdicts_and_tool_verdicts() -> None:
    finishes = {v for v in DecisionVerdict if v.is_finish}
    assert {v.value for v in finishes} == {s for s in RECORD_STRINGS if s.startswith("finish_")}
    assert {v for v in DecisionVerdict if v.rejected_finish} == finishes - {
        DecisionVerdict.FINISH_COMPLETE}
    assert {v for v in DecisionVerdict if v.ran_tool} == {DecisionVerdict.EXECUTED,
                                                          DecisionVerdict.TOOL_FAILED}
    for decision in ("complete", "continue", "stuck", "needs_human"):
        verdict = DecisionVerdict.of_finish(decision)  # type: ignore[arg-type]  # a str here
        assert verdict.value == f"finish_{decision}"


RECORDS = [
    DecisionRecord(1, ToolCallAction("get_metric", {"entity": "S01"}), DecisionVerdict.EXECUTED,
                   tool_response={"ok": True, "value": 3}),
    DecisionRecord(2, ToolCallAction("get_metric", {}), DecisionVerdict.TOOL_FAILED,
                   tool_error="sandbox: killed", provider_ok=True),
    DecisionRecord(3, FinishAction({"claims": []}), DecisionVerdict.FINISH_CONTINUE,
                   pipeline=PipelineJudgement("continue", (Reason("critic.reject", None, "no"),),
                                              "more", 1)),
    DecisionRecord(4, InvalidAction("provider failure (server_error)"), DecisionVerdict.CONTINUE,
                   provider_ok=False),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.verdict.value)
def test_a_decision_record_reads_back_what_it_wrote(record: DecisionRecord) -> None:
    obj = record.to_json()
    assert obj["verdict"] == record.verdict.value and type(obj["verdict"]) is str
    assert obj["action"] == record.action.to_json()
    read = DecisionRecord.from_json(loads_strict(canonical_bytes(obj)))
    assert read == record
    assert canonical_bytes(read.to_json()) == canonical_bytes(obj)


def _obj(**over: Any) -> dict[str, Any]:
    return {**RECORDS[0].to_json(), **over}


@pytest.mark.parametrize(("obj", "message"), [
    (_obj(verdict="finish_maybe"), "decision.verdict: unknown verdict 'finish_maybe'"),
    (_obj(verdict=None), "decision.verdict: expected a string, got null"),
    (_obj(action={"kind": "tool_call", "tool_id": "x"}), "decision.action: missing field 'args'"),
    (_obj(action=None), "decision.action: expected an object, got null"),
    (_obj(pipeline={"decision": "maybe", "reasons": [], "directive": None, "model_calls": 0}),
     "decision.pipeline.decision: unknown pipeline decision 'maybe'"),
    (_obj(pipeline={"decision": "stuck", "reasons": [{"code": "x", "slot": None}],
                    "directive": None, "model_calls": 0}),
     "decision.pipeline.reasons[0]: missing field 'detail'"),
    (_obj(pipeline={"decision": "stuck", "reasons": [], "directive": None, "model_calls": -1}),
     "decision.pipeline.model_calls: must be >= 0"),
    (_obj(action={"kind": "finish", "certificate": {}, "why": 1}),
     "decision.action: unknown field 'why'"),
])
def test_a_malformed_decision_is_refused_naming_the_path(obj: Any, message: str) -> None:
    with pytest.raises(RecordFormatError) as err:
        DecisionRecord.from_json(obj)
    assert str(err.value).startswith(message), str(err.value)
