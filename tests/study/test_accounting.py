"""The accounting of every journaled attempt (issue 36): what is billed, estimated, unbilled."""

from __future__ import annotations

import pytest

from runner.canonical import raw_digest
from runner.providers import AttemptRecord, PriceTable, Usage
from runner.study import HaltEntry, JournalEntry, account

PRICE = PriceTable(input_per_mtok=1_000_000.0, output_per_mtok=2_000_000.0)  # $1 / $2 a token


def _a(request: bytes, *, status: int | None, kind: str | None = None,
       usage: Usage | None = None, retry: bool = False) -> AttemptRecord:
    return AttemptRecord(
        attempt_id="x", cell_id="c", provider="openai", model="m", simulated=False, attempt_no=1,
        request_sha256=raw_digest(request), response_sha256=None, started_utc="t",
        ended_utc="t", latency_s=0.0, status=status, error_class=kind, retry=retry, usage=usage,
        retry_after_s=None)


def _e(seq: int, cell: str, ended: AttemptRecord | None, begun: AttemptRecord) -> JournalEntry:
    return JournalEntry(seq, cell, seq, begun=begun, ended=ended)


def test_billed_estimated_unbilled_in_flight_and_halts() -> None:
    ok = _a(b"r1", status=200, usage=Usage(10, 5, 15))
    truncated = _a(b"r1", status=200, kind="transport_after_output")  # billed, no usage
    retried_ok = _a(b"r1", status=200, usage=Usage(10, 5, 15), retry=True)
    lonely = _a(b"r2", status=200, kind="unparseable")  # no twin: the mean usage
    busy = _a(b"r3", status=503, kind="server_error")
    other = _a(b"r4", status=200, usage=Usage(30, 15, 45))
    entries = [
        _e(1, "c1", ok, ok),
        _e(2, "c2", truncated, truncated),
        _e(3, "c2", retried_ok, retried_ok),
        _e(4, "c3", lonely, lonely),
        _e(5, "c3", busy, busy),
        _e(6, "c4", None, _a(b"r5", status=None)),  # in flight when the run stopped
        _e(7, "c5", other, other),
        JournalEntry(8, "c3", 3, halt=HaltEntry("t", "c3", 3, "transport", "why")),
    ]
    acc = account(entries, PRICE, committed={"c1", "c2", "c5"})
    assert acc.attempts == 7 and acc.retries == 1 and acc.in_flight == 1
    assert acc.by_kind == {"transport_after_output": 1, "unparseable": 1, "server_error": 1}
    assert acc.unbilled_attempts == 1
    assert acc.billed_attempts == 5 and acc.estimated_attempts == 2
    # usage-priced: 10+10 (r1 twice) and 30 input, 5+5+15 output; estimated: r1's twin (10, 5)
    # and the mean of the attempts with usage ((10+10+30)/3 = 17, (5+5+15)/3 = 8)
    assert acc.estimated_usd == pytest.approx((10 + 2 * 5) + (17 + 2 * 8))
    assert acc.billed_usd == pytest.approx(
        (10 + 10) + 2 * (5 + 5) + 30 + 2 * 15 + acc.estimated_usd)
    assert acc.orphan_attempts == 3  # c3 twice and c4
    assert acc.orphan_usd == pytest.approx(17 + 2 * 8)
    assert [h.cell_id for h in acc.halts] == ["c3"]
    out = acc.to_json()
    assert set(out["cells"]) == {"c2", "c3"}  # only cells with a retry or a failure
    assert out["cells"]["c3"]["failures"] == {"server_error": 1, "unparseable": 1}
