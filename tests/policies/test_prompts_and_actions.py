"""Frozen prompts, blinded requests, planner request building and action parsing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from runner.policies import (
    FINISH_TOOL,
    PROMPT_NAMES,
    CellIdentity,
    EscalateAction,
    FinishAction,
    InvalidAction,
    PlannerView,
    ToolCallAction,
    build_planner_request,
    extract_view,
    load_prompt,
    parse_planner_action,
    prompt_digests,
)
from runner.providers import (
    FunctionCall,
    GenerationConfig,
    Message,
    ProviderResponse,
    Usage,
)
from runner.worlds.tools import TOOL_SCHEMAS
from tests.policies import _fixtures as fx

GEN = GenerationConfig(temperature=0.2, seed=7, max_output_tokens=512)
PROMPTS = Path(__file__).resolve().parents[2] / "runner" / "policies" / "prompts"


def test_prompt_digests_are_the_file_hashes_and_stable() -> None:
    digests = prompt_digests()
    assert sorted(digests) == sorted(PROMPT_NAMES) == sorted(p.stem for p in PROMPTS.glob("*.txt"))
    for name, d in digests.items():
        assert d == "sha256:" + hashlib.sha256((PROMPTS / f"{name}.txt").read_bytes()).hexdigest()
    assert prompt_digests() == digests
    with pytest.raises(ValueError):
        load_prompt("../planner")


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_prompts_name_no_labels(name: str) -> None:
    text = load_prompt(name).lower()
    for word in ("split", "fault", "gold", "held-out", "heldout", "oracle"):
        assert word not in text


def _response(*calls: FunctionCall, text: str | None = None) -> ProviderResponse:
    return ProviderResponse(
        text=text,
        structured=None,
        function_calls=tuple(calls),
        finish_reason="STOP",
        usage=Usage(),
        model_version="m",
        response_id="r",
        provider="test",
        simulated=True,
        message=Message("model", ()),
    )


def test_planner_request_declares_tools_finish_escalate_and_embeds_the_view() -> None:
    trace = fx.clean_trace()
    view = PlannerView(fx.CONTRACT, trace, fx.ledger_of(trace), directive="fix slot units")
    req = build_planner_request(view, GEN, CellIdentity("c1", 7))
    names = [t.name for t in req.tools]
    assert names == [*sorted(TOOL_SCHEMAS), "finish", "escalate"]
    assert req.role == "planner" and req.system == load_prompt("planner")
    fmt, obj = extract_view(req.messages[-1].parts[0].text or "")
    assert fmt == "ect.planner-view/1"
    assert obj["directive"] == "fix slot units"
    assert [c["receipt_ids"] for c in obj["trace"]] == [["r-1"], ["r-2"]]
    assert obj["task"]["descriptor"]["required_slots"] == ["units", "revenue"]
    # Same inputs, same request bytes.
    assert build_planner_request(view, GEN, CellIdentity("c1", 7)).canonical() == req.canonical()


def test_parse_planner_action_valid_forms() -> None:
    a = parse_planner_action(_response(FunctionCall("get_metric", {"entity": "S01"})))
    assert a == ToolCallAction("get_metric", {"entity": "S01"})
    cert = {"task_id": "t", "descriptor_digest": "x", "ledger_digest": "y", "claims": []}
    f = parse_planner_action(_response(FunctionCall(FINISH_TOOL, {"certificate": cert})))
    assert isinstance(f, FinishAction)
    assert f.certificate_obj == {**cert, "format": "ect.certificate/1"}
    e = parse_planner_action(_response(FunctionCall("escalate", {"question": "which one?"})))
    assert e == EscalateAction("which one?")


class _Weird:
    def __iter__(self):  # a mapping-looking object that explodes
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    "response",
    [
        None,
        _response(text="I am done."),
        _response(FunctionCall("get_metric", {}), FunctionCall("finish", {"certificate": {}})),
        _response(FunctionCall("rm_rf", {})),
        _response(FunctionCall("finish", {})),
        _response(FunctionCall("finish", {"certificate": "all good"})),
        _response(FunctionCall("finish", {"certificate": {}, "extra": 1})),
        _response(FunctionCall("escalate", {"question": "   "})),
        _response(FunctionCall("escalate", {"question": 3})),
        _response(FunctionCall("get_metric", ["not", "an", "object"])),  # type: ignore[arg-type]
        _response(FunctionCall("get_metric", {1: "x"})),  # type: ignore[dict-item]
        _response(FunctionCall("get_metric", _Weird())),  # type: ignore[arg-type]
    ],
)
def test_parse_planner_action_malformed_is_invalid_never_raises(response: ProviderResponse | None) -> None:
    action = parse_planner_action(response)
    assert isinstance(action, InvalidAction)
    assert action.detail and "\n" not in action.detail
