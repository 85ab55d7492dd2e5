"""The framework-independent kit: receipts from tool calls, sessions, the control stopping rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.control import Budget, Finish, RunController, StopReason, ToolCall, ToolResult
from runner.ect import ReceiptScope, args_digest, response_digest, value_digest
from runner.errors import FormatError
from runner.integrations import (
    EctSession,
    Evidence,
    ToolEvent,
    build_receipt,
    directive_text,
    ect_stopping_rule,
    json_pointer,
    safe_call_id,
    scoped_value,
)
from tests.integrations.units import ALL, CONTRACT, DAYS, claims, units

SCOPE = ReceiptScope("S01", "units", "store", "2026-03-01")


def test_a_receipt_carries_what_the_tool_said_and_hashes_the_call() -> None:
    result = {"points": [{"v": 5}, {"v": 7}]}
    r = build_receipt("t", "r-0001", "call#abc", "get", {"x": 1}, result,
                      path="/points/1/v", scope=SCOPE)  # fmt: skip
    assert r.value == 7 and r.value_sha256 == value_digest(7)
    assert r.args_sha256 == args_digest({"x": 1}) and r.response_sha256 == response_digest(result)
    assert r.call_id == safe_call_id("call#abc") and r.call_id.startswith("c-")  # '#': not an id
    assert safe_call_id("call_1") == "call_1"
    failed = build_receipt("t", "r-0002", "c", "get", {}, {"error": "x"}, path="/v", scope=SCOPE,
                           ok=False)  # fmt: skip
    assert failed.exec_status == "error" and failed.value is None and failed.source_path == ""
    with pytest.raises(FormatError):
        build_receipt("t", "r-3", "c", "get", {}, result, path="/points/2/v", scope=SCOPE)
    with pytest.raises(FormatError):  # an object is not an ECT value
        build_receipt("t", "r-3", "c", "get", {}, result, path="/points/0", scope=SCOPE)


def test_json_pointer_follows_rfc_6901() -> None:
    doc = {"a/b": {"m~n": [10, 20]}, "": 1}
    assert json_pointer(doc, "/a~1b/m~0n/1") == 20
    assert json_pointer(doc, "/") == 1 and json_pointer(doc, "") == doc
    for bad in ("a", "/a~1b/m~0n/01", "/a~1b/m~0n/-", "/nope"):
        with pytest.raises(FormatError):
            json_pointer(doc, bad)


def _session(*days: str, store: str = "S01") -> EctSession:
    s = EctSession(CONTRACT, scoped_value())
    for i, day in enumerate(days):
        s.record(ToolEvent(f"c-{i}", "get_units", {"store": store, "date": day},
                           json.dumps(units(store, day))))  # noqa: TID251  # fmt: skip
    return s


def test_session_records_receipts_and_skips_what_is_not_evidence() -> None:
    s = _session(*DAYS)
    assert [r.receipt_id for r in s.receipts] == ALL
    assert s.record(ToolEvent("c-9", "get_units", {}, "not json")) == ()
    assert s.record(ToolEvent("c-9", "submit", {}, "{}")) == ()
    assert s.record(ToolEvent("c-9", "get_units", {}, None, error="boom")) == ()
    assert len(s.receipts) == 3 and s.skipped
    assert s.check({"claims": claims(ALL)}).complete
    assert s.check(claims(ALL)).complete  # a bare list of claims is sealed the same way


def test_session_refuses_malformed_and_foreign_certificates() -> None:
    s = _session(*DAYS)
    assert s.check("{not json").codes == ("adapter.malformed_json",)
    assert s.check({"claim": []}).codes == ("adapter.malformed_certificate",)
    assert s.check(None).codes == ("adapter.malformed_certificate",)  # submit without arguments
    assert s.check('{"claims": [], "claims": []}').codes == ("adapter.malformed_json",)
    hostile = s.check({"claims": [{"slot": "total", "value": {"$eval": 1}}]})
    assert hostile.codes == ("adapter.malformed_certificate",) and not hostile
    sealed = s.seal(claims(ALL))
    other = _session(*DAYS[:2])
    assert "binding.ledger_digest_mismatch" in other.check(sealed).codes
    assert s.check(sealed).complete


def test_directive_names_missing_slots_and_reasons() -> None:
    d = _session(*DAYS).check({"claims": claims(ALL, only_total=True)})
    text = directive_text(d)
    assert "Missing or failing slots: days." in text
    assert "- coverage.missing_slot [days]: required slot 'days' has no claim" in text


def test_extractor_constants_and_tool_filter() -> None:
    ex = scoped_value("/n", entity="/who", attribute="units", level="store", date=None,
                      tools=["count"])  # fmt: skip
    [ev] = ex(ToolEvent("c", "count", {}, {"who": "S02", "n": 4}))
    assert ev == Evidence("/n", ReceiptScope("S02", "units", "store", None))
    assert list(ex(ToolEvent("c", "other", {}, {"who": "S02", "n": 4}))) == []


# --- ect_stopping_rule in runner.control ------------------------------------------------------


def _execute(call: ToolCall) -> ToolResult:
    return ToolResult.success(units(call.args["store"], call.args["date"]))


def _controller() -> RunController:
    rule = ect_stopping_rule(CONTRACT, scoped_value())
    return RunController(Budget(max_steps=10, max_tokens=100_000), rules=[rule])


def _agent(fetch: list[tuple[str, str]], finishes: list[Any]) -> Any:
    def decide(state: Any) -> Any:
        n = sum(1 for r in state.trace if r.kind == "tool")
        if n < len(fetch):
            store, day = fetch[n]
            return ToolCall("get_units", {"store": store, "date": day})
        rejected = sum(1 for r in state.trace if r.kind == "finish_rejected")
        return Finish(finishes[min(rejected, len(finishes) - 1)])

    return decide


S01 = [("S01", d) for d in DAYS]


def test_rule_blocks_a_premature_finish_with_the_missing_slot() -> None:
    seen: list[Any] = []
    controller = _controller()
    decide = _agent(S01, [{"claims": claims(ALL, only_total=True)}])

    def spy(state: Any) -> Any:
        seen.append(state.directive.missing if state.directive else ())
        return decide(state)

    result = controller.run("units", spy, _execute)
    assert not result.completed
    assert result.reason is StopReason.NO_PROGRESS  # the same rejected finish, again and again
    assert ("days",) in seen  # the directive named the missing slot
    rejected = [r for r in result.trace if r.kind == "finish_rejected"]
    assert rejected and "coverage.missing_slot [days]" in rejected[0].note


def test_rule_accepts_after_recovery() -> None:
    decide = _agent(S01, [{"claims": claims(ALL, total=30)}, {"claims": claims(ALL)}])
    result = _controller().run("units", decide, _execute)
    assert result.completed and result.output == {"claims": claims(ALL)}


def test_rule_blocks_receipts_from_another_run() -> None:
    # This run fetched one day; it cites three receipt ids another run produced.
    result = _controller().run("units", _agent(S01[:1], [{"claims": claims(ALL)}]), _execute)
    assert not result.completed
    rejected = [r for r in result.trace if r.kind == "finish_rejected"]
    assert rejected and "evidence.unknown_receipt" in rejected[0].note


def test_rule_escalates_conflicting_receipts() -> None:
    def execute(call: ToolCall) -> ToolResult:
        out = units("S01", call.args["date"])
        if call.args.get("again"):
            out["value"] += 1  # a second source disagrees about March 1
        return ToolResult.success(out)

    def decide(state: Any) -> Any:
        n = sum(1 for r in state.trace if r.kind == "tool")
        if n < 3:
            return ToolCall("get_units", {"store": "S01", "date": DAYS[n]})
        if n == 3:
            return ToolCall("get_units", {"store": "S01", "date": DAYS[0], "again": True})
        return Finish({"claims": claims(ALL)})

    result = _controller().run("units", decide, execute)
    assert result.reason is StopReason.NEEDS_HUMAN
    assert result.stop.question and "disagree" in result.stop.question


def test_public_surface_and_lazy_frameworks() -> None:
    import subprocess
    import sys

    import runner.integrations

    assert set(runner.integrations.__all__) == {
        "EctSession", "Evidence", "Extractor", "ToolEvent", "build_receipt", "directive_text",
        "ect_stopping_rule", "json_pointer", "safe_call_id", "scoped_value", "session_from_trace",
    }  # fmt: skip
    code = (
        "import sys, runner.integrations; "
        "print([m for m in ('inspect_ai', 'agents', 'langgraph', 'langchain_core', 'msgspec') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    assert out.stdout.strip() == "[]"
