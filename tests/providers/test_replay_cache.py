"""What resume may replay instead of paying again: only complete, well-formed successes."""

from __future__ import annotations

import dataclasses

from runner.canonical import raw_digest
from runner.providers import AttemptRecord, ReplayCache
from runner.providers._http import replayable

GOOD = b'{"choices": []}'
REQUEST = raw_digest(b'{"model": "m"}')


def _attempt(body: bytes | None, *, status: int | None = 200,
             error_class: str | None = None) -> AttemptRecord:
    return AttemptRecord(
        attempt_id="a1", cell_id="c", provider="openai", model="m", simulated=False,
        attempt_no=1, request_sha256=REQUEST,
        response_sha256=raw_digest(body) if body is not None else None,
        started_utc="2026-01-01T00:00:00Z", ended_utc="2026-01-01T00:00:01Z", latency_s=1.0,
        status=status, error_class=error_class, retry=False, usage=None, retry_after_s=None)


def test_a_well_formed_success_is_replayable() -> None:
    assert replayable(_attempt(GOOD), GOOD)
    # a model-output failure is the model's answer (never retried): replayable too
    assert replayable(_attempt(GOOD, error_class="empty_response"), GOOD)


def test_anything_but_a_well_formed_success_is_not() -> None:
    malformed = b"<html>upstream proxy error</html>"
    truncated = GOOD[: len(GOOD) // 2]
    assert not replayable(_attempt(malformed, error_class="unparseable"), malformed)
    # even when the journal missed the error class, a body that does not parse is refused
    assert not replayable(_attempt(malformed), malformed)
    assert not replayable(_attempt(truncated, error_class="transport_after_output"), truncated)
    assert not replayable(_attempt(GOOD, status=503, error_class="server_error"), GOOD)
    assert not replayable(_attempt(GOOD, status=None, error_class="timeout_before_response"),
                          GOOD)
    # bytes that are not the journaled ones
    assert not replayable(_attempt(GOOD), b'{"other": 1}')


def test_the_cache_keeps_only_replayable_entries_and_serves_each_once() -> None:
    cache = ReplayCache()
    malformed = b"not json"
    assert not cache.add("c", _attempt(malformed, error_class="unparseable"), malformed)
    assert cache.add("c", _attempt(GOOD), GOOD)
    assert (len(cache), cache.refused) == (1, 1)
    hit = cache.take("c", REQUEST)
    assert hit is not None and hit[1] == GOOD
    assert cache.take("c", REQUEST) is None and cache.replayed == 1
    assert cache.take("other", REQUEST) is None
    assert dataclasses.asdict(hit[0])["status"] == 200
