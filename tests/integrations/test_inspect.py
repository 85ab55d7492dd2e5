"""Inspect AI adapter, run for real with Inspect's ``mockllm/model`` and scripted outputs."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.tool import Tool, tool

from runner.integrations import scoped_value
from runner.integrations.inspect import ect_agent, ect_scorer
from tests.integrations.units import ALL, CONTRACT, DAYS, certificate_text, units

# Inspect's sync eval() leaves anyio memory streams to the garbage collector; that is inside the
# framework (no stream of ours), so only exactly that warning is tolerated here.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Unclosed <MemoryObjectReceiveStream:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObjectReceiveStream.__del__"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]


@tool
def get_units() -> Tool:
    async def execute(store: str, date: str) -> str:
        """Units sold by a store on a date.

        Args:
            store: store id, e.g. S01
            date: ISO date
        """
        return json.dumps(units(store, date))  # noqa: TID251 - a tool's text result

    return execute


# Explicit usage: otherwise mockllm counts tokens with tiktoken, which downloads its encoding.
USAGE = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)


def _call(name: str, args: dict[str, Any], n: int) -> ModelOutput:
    out = ModelOutput.for_tool_call("mockllm/model", name, args, tool_call_id=f"call_{n}")
    out.usage = USAGE
    return out


def _say(text: str) -> ModelOutput:
    out = ModelOutput.from_content("mockllm/model", text)
    out.usage = USAGE
    return out


FETCH = [_call("get_units", {"store": "S01", "date": d}, i) for i, d in enumerate(DAYS)]


def _run(outputs: list[ModelOutput], tmp_path: Path) -> Any:
    task = Task(
        dataset=[Sample(input="Units of S01, March 1-3?", metadata={"ect_contract": CONTRACT})],
        solver=ect_agent([get_units()], scoped_value(), max_attempts=2),
        scorer=ect_scorer(scoped_value()),
    )
    model = get_model("mockllm/model", custom_outputs=outputs)
    [log] = eval(task, model=model, log_dir=str(tmp_path), display="none")
    gc.collect()  # let the framework's leftover streams go now, under this module's filter
    assert log.status == "success", log.error
    assert log.samples is not None
    return log.samples[0]


def _ect(sample: Any) -> dict[str, Any]:
    score = next(iter(sample.scores.values()))
    return {"value": score.value, **score.metadata["ect"]}


def test_premature_finish_is_blocked_with_reason_codes(tmp_path: Path) -> None:
    outputs = [*FETCH, _say("28 units."), _say("I am sure: 28.")]
    result = _ect(_run(outputs, tmp_path))
    assert result["value"] == "I" and result["decision"] == "continue"
    assert {r["code"] for r in result["reasons"]} == {"coverage.missing_slot"}
    assert result["missing_slots"] == ["total", "days"]


def test_recovers_after_the_directive_and_completes(tmp_path: Path) -> None:
    outputs = [
        *FETCH,
        _call("submit", {"certificate": certificate_text(ALL, total=27)}, 7),
        _call("submit", {"certificate": certificate_text(ALL)}, 8),
    ]
    sample = _run(outputs, tmp_path)
    assert _ect(sample) == {"value": "C", "decision": "complete", "reasons": [], "missing_slots": []}
    directive = next(m for m in sample.messages if getattr(m, "function", None) == "submit")
    assert "replay.mismatch [total]" in directive.text  # the model was told what was wrong


def test_receipts_from_another_run_are_blocked(tmp_path: Path) -> None:
    done = _run([*FETCH, _call("submit", {"certificate": certificate_text(ALL)}, 7)], tmp_path)
    assert _ect(done)["value"] == "C"
    # Another sample fetched one day only and cites the first run's receipt ids.
    outputs = [FETCH[0], _call("submit", {"certificate": certificate_text(ALL)}, 1),
               _call("submit", {"certificate": certificate_text(ALL)}, 2)]  # fmt: skip
    result = _ect(_run(outputs, tmp_path / "second"))
    assert result["value"] == "I"
    assert "evidence.unknown_receipt" in {r["code"] for r in result["reasons"]}
