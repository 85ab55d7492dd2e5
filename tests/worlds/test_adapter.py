"""The trusted adapter: typed receipts with digests, one call at a time."""

from __future__ import annotations

from runner.ect import Ledger, Receipt, args_digest, response_digest, value_digest
from runner.worlds import build_world, ledger_from_trace, to_receipts, tools, world_snapshot
from runner.worlds._adapter import TraceCall

SNAP = world_snapshot("w04")
WORLD = build_world("w04")
STORE = WORLD.store_ids[1]


def _receipts(
    tool_id: str, args: dict, response: dict | None = None, first: int = 1
) -> list[Receipt]:
    if response is None:
        response = tools.call_tool(SNAP, tool_id, args)
    return to_receipts("w04-lookup-0", "c-0007", tool_id, args, response, first_index=first)


def test_get_metric_receipt_fields_and_digests() -> None:
    args = {"entity": STORE, "attribute": "revenue", "date": "2026-03-03"}
    response = tools.call_tool(SNAP, "get_metric", args)
    (r,) = _receipts("get_metric", args, response, first=5)
    assert r.receipt_id == "r-0005" and r.call_id == "c-0007" and r.task_id == "w04-lookup-0"
    assert r.tool_id == "get_metric" and r.source_path == "/result/value"
    assert r.args_sha256 == args_digest(args)
    assert r.response_sha256 == response_digest(response)
    assert r.value == WORLD.value(STORE, "revenue", "2026-03-03")
    assert r.value_sha256 == value_digest(r.value)
    assert (r.exec_status, r.validation) == ("ok", "valid")
    assert r.scope.key == (STORE, "revenue", "store", "2026-03-03")
    assert Receipt.from_json(r.to_json()) == r


def test_get_series_yields_one_receipt_per_day() -> None:
    args = {"entity": STORE, "attribute": "units", "start": "2026-03-10", "end": "2026-03-16"}
    rs = _receipts("get_series", args, first=3)
    assert [r.receipt_id for r in rs] == [f"r-{i:04d}" for i in range(3, 10)]
    assert [r.scope.date for r in rs] == [f"2026-03-{d}" for d in range(10, 17)]
    assert [r.source_path for r in rs] == [f"/result/points/{i}/value" for i in range(7)]
    assert [r.value for r in rs] == [WORLD.value(STORE, "units", r.scope.date) for r in rs]


def test_membership_receipts() -> None:
    rs = _receipts("list_entities", {"level": "store"})
    assert len(rs) == len(WORLD.stores)
    for r, (store, region) in zip(rs, WORLD.stores, strict=True):
        assert r.scope.key == (store, "parent", "store", None) and r.value == region
    assert _receipts("list_entities", {"level": "region"}) == []
    (p,) = _receipts("get_parent", {"entity": STORE})
    assert p.scope.attribute == "parent" and p.value == WORLD.parent(STORE)
    assert p.source_path == "/result/parent"
    assert _receipts("get_parent", {"entity": "R1"}) == []


def test_nested_error_becomes_error_receipts_per_requested_scope() -> None:
    nested = {"ok": True, "result": {"error": {"code": "upstream_unavailable", "message": "x"}}}
    args = {"entity": STORE, "attribute": "units", "start": "2026-03-01", "end": "2026-03-03"}
    rs = _receipts("get_series", args, nested)
    assert [(r.exec_status, r.value, r.scope.date) for r in rs] == [
        ("error", None, "2026-03-01"),
        ("error", None, "2026-03-02"),
        ("error", None, "2026-03-03"),
    ]
    assert all(r.source_path == "/result/error" for r in rs)
    out_of_world = {"entity": STORE, "attribute": "units", "date": "2027-01-01"}
    (r,) = _receipts("get_metric", out_of_world)
    assert r.exec_status == "error" and r.scope.date == "2027-01-01"


def test_stale_read_is_invalid() -> None:
    (store, attr, day), old = next(iter(sorted(WORLD.corrections.items())))
    stale = {
        "ok": True,
        "result": {
            "entity": store,
            "attribute": attr,
            "level": "store",
            "date": day,
            "value": old,
            "revision": 1,
            "superseded": True,
        },
    }
    (r,) = _receipts("get_metric", {"entity": store, "attribute": attr, "date": day}, stale)
    assert (r.exec_status, r.validation, r.value) == ("ok", "invalid", old)


def test_refused_and_side_effect_calls_give_no_receipts() -> None:
    assert _receipts("get_metric", {"entity": STORE}) == []
    assert _receipts("record_note", {"key": "k", "value": 1, "idempotency_key": "i"}) == []
    assert _receipts("no_such_tool", {}, {"ok": True, "result": {}}) == []


def test_off_schema_response_is_an_invalid_error_receipt() -> None:
    args = {"entity": STORE, "attribute": "units", "date": "2026-03-02"}
    for junk in ({"ok": True, "result": {"value": "lots"}}, {"weird": 1}, {"ok": True}):
        (r,) = _receipts("get_metric", args, junk)
        assert (r.exec_status, r.validation, r.value) == ("error", "invalid", None)


def test_ledger_from_trace_numbers_receipts_in_call_order() -> None:
    calls = [
        ("get_parent", {"entity": STORE}),
        (
            "get_series",
            {"entity": STORE, "attribute": "units", "start": "2026-03-01", "end": "2026-03-02"},
        ),
    ]
    trace = [
        TraceCall(f"c-{i + 1:04d}", t, a, tools.call_tool(SNAP, t, a))
        for i, (t, a) in enumerate(calls)
    ]
    ledger = ledger_from_trace("w04-lookup-0", trace)
    assert [(r.receipt_id, r.call_id) for r in ledger.receipts] == [
        ("r-0001", "c-0001"),
        ("r-0002", "c-0002"),
        ("r-0003", "c-0002"),
    ]
    assert Ledger.from_json(ledger.to_json()) == ledger
    assert ledger_from_trace("w04-lookup-0", trace) == ledger
