"""Retry policy as data, failure classification, cost, typed values, the public surface."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

import runner.providers as providers
from runner.errors import FormatError, ProviderError
from runner.providers import (
    FAILURE_KINDS,
    MAX_RETRY_AFTER_S,
    MODEL_OUTPUT_KINDS,
    RETRYABLE_KINDS,
    TRANSPORT_KINDS,
    GenerationConfig,
    Part,
    PriceTable,
    ProviderFailure,
    RetryPolicy,
    Usage,
    classify_httpx_error,
    failure_class,
    parse_retry_after,
)


def test_default_policy_is_the_protocol():
    p = RetryPolicy()
    j = p.to_json()
    assert j["max_retries"] == 1 and j["identical_request"] is True
    assert set(j["retry_on"]) == RETRYABLE_KINDS
    # transport failures are retried once; model-output failures and requests that were never
    # sent (or a 4xx the server will answer again) are final
    for kind in ("rate_limited", "server_error", "timeout_after_output",
                 "timeout_before_response", "unparseable", "transport_after_output",
                 "closed_before_response", "connect_failed"):
        assert p.should_retry(kind, 0) and not p.should_retry(kind, 1)
        assert failure_class(kind) == "transport"
    for kind in ("empty_response", "malformed_output", "simulated", "client_error",
                 "egress_refused", "request_invalid"):
        assert kind in j["final"] and not p.should_retry(kind, 0)
    for kind in ("empty_response", "malformed_output", "simulated"):
        assert failure_class(kind) == "model_output"
    assert set(FAILURE_KINDS) == TRANSPORT_KINDS | MODEL_OUTPUT_KINDS
    assert RetryPolicy.from_json(j) == p


def test_retry_waits_for_retry_after_within_a_cap():
    p = RetryPolicy()
    assert p.wait_s(None) == 0.0 and p.wait_s(3.0) == 3.0
    assert p.wait_s(3600.0) == MAX_RETRY_AFTER_S
    assert RetryPolicy(delay_s=2.0).wait_s(1.0) == 2.0


def test_policy_refuses_retrying_model_output_or_more_than_once():
    with pytest.raises(ValueError):
        RetryPolicy(retry_on=frozenset({"malformed_output"}))
    with pytest.raises(ValueError):
        RetryPolicy(retry_on=frozenset({"empty_response"}))
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=2)
    bad = RetryPolicy().to_json() | {"retry_on": ["empty_response"]}
    with pytest.raises(FormatError):
        RetryPolicy.from_json(bad)
    with pytest.raises(FormatError):
        RetryPolicy.from_json(RetryPolicy().to_json() | {"final": []})


def test_classification_depends_on_whether_the_response_began():
    req = httpx.Request("POST", "http://x")
    assert (
        classify_httpx_error(httpx.ConnectError("refused", request=req), response_started=False)
        == "connect_failed"
    )
    assert (
        classify_httpx_error(httpx.ReadTimeout("t", request=req), response_started=False)
        == "timeout_before_response"
    )
    assert (
        classify_httpx_error(httpx.ReadTimeout("t", request=req), response_started=True)
        == "timeout_after_output"
    )
    closed = httpx.RemoteProtocolError(
        "Server disconnected without sending a response.", request=req
    )
    assert classify_httpx_error(closed, response_started=False) == "closed_before_response"
    assert (
        classify_httpx_error(httpx.RemoteProtocolError("bad header"), response_started=False)
        == "protocol_error"
    )
    assert (
        classify_httpx_error(httpx.ReadError("reset"), response_started=True)
        == "transport_after_output"
    )
    for kinds in providers.HTTPX_EXCEPTION_KINDS.values():
        assert set(kinds) <= set(FAILURE_KINDS)
    assert {k for k in providers.GENAI_EXCEPTION_KINDS.values() if k} <= set(FAILURE_KINDS)


def test_retry_after_forms():
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("30") == 30.0
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:45 GMT", now=now) == 45.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_price_table():
    t = PriceTable(0.30, 2.50)
    assert t.cost_usd(Usage(1_000_000, 1_000_000, 2_000_000)) == pytest.approx(2.80)
    assert PriceTable.from_json(t.to_json()) == t
    with pytest.raises(FormatError):
        PriceTable.from_json({"input_per_mtok": -1, "output_per_mtok": 0})
    with pytest.raises(FormatError):
        PriceTable.from_json({"input_per_mtok": 1})


def test_typed_values_validate():
    with pytest.raises(ValueError):
        GenerationConfig(temperature=3.0, seed=1, max_output_tokens=10)
    with pytest.raises(TypeError):
        GenerationConfig(temperature=0.2, seed=True, max_output_tokens=10)
    with pytest.raises(ValueError):
        Part()
    with pytest.raises(ValueError):
        ProviderFailure("nonsense", "x")
    err = ProviderFailure("rate_limited", "quota", status=429).as_error()
    assert isinstance(err, ProviderError) and "rate_limited (HTTP 429)" in str(err)


def test_exported_members():
    public = {n for n in dir(providers) if not n.startswith("_")} - _module_names()
    assert set(providers.__all__) == public


def _module_names() -> set[str]:
    import types

    return {n for n in dir(providers) if isinstance(getattr(providers, n), types.ModuleType)}
