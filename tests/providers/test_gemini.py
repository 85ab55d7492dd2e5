"""The Gemini adapter driven through the REAL google-genai client against a local server."""

from __future__ import annotations

import base64
import inspect
import os

import anyio
import httpx
import pytest
from google.genai import errors as genai_errors

from runner.canonical import loads_strict
from runner.providers import (
    GENAI_EXCEPTION_KINDS,
    RETRYABLE_KINDS,
    EgressGuardTransport,
    EgressRefused,
    GeminiProvider,
    Message,
    Part,
    PriceTable,
    RetryPolicy,
)
from tests.providers.conftest import SCHEMA, Journal, gemini_ok, make_request
from tests.providers.fakeserver import Close, Reply, Stall, StallAfterHead


def run(coro_fn, *args, **kwargs):
    return anyio.run(lambda: coro_fn(*args, **kwargs))


def provider(server, credential, **kw) -> GeminiProvider:
    kw.setdefault("timeout_s", 10.0)
    return GeminiProvider(credential, base_url=server.url, **kw)


def test_request_shape_path_key_and_body(server, credential, canary):
    server.play(Reply.json(gemini_ok()))
    p = provider(server, credential)
    result = run(p.generate, make_request(schema=True))
    assert result.ok and result.failure is None
    seen = server.seen[0]
    assert seen.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert seen.headers["x-goog-api-key"] == canary
    body = loads_strict(seen.body)
    gen = body["generationConfig"]
    assert gen["temperature"] == 0.2
    assert gen["seed"] == 11
    assert gen["maxOutputTokens"] == 512
    assert gen["candidateCount"] == 1
    assert gen["responseMimeType"] == "application/json"
    assert gen["responseJsonSchema"] == SCHEMA
    decl = body["tools"][0]["functionDeclarations"][0]
    assert decl["name"] == "get_metric"
    assert decl["parameters_json_schema"]["required"] == ["entity", "date"]
    assert body["systemInstruction"]["parts"][0]["text"] == "You are the planner."
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Find the revenue of store-01."}]}
    ]
    # nothing SDK-side leaks into the wire body
    for sdk_only in (
        "automaticFunctionCalling",
        "automatic_function_calling",
        "automaticContinuation",
        "automatic_continuation",
    ):
        assert sdk_only not in seen.body.decode()
    r = result.response
    assert r.function_calls[0].name == "get_metric"
    assert dict(r.function_calls[0].args) == {"entity": "store-01", "date": "2024-03-01"}
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (40, 12, 52)
    assert r.model_version == "gemini-2.5-flash-001" and r.response_id == "resp-1"
    assert r.provider == "gemini" and r.simulated is False
    (a,) = result.attempts
    assert a.status == 200 and a.error_class is None and a.retry is False
    assert a.cell_id == "cell-0007" and a.usage == r.usage
    (raw,) = result.raw
    assert raw.request_bytes == seen.body
    assert a.response_sha256 is not None and raw.response_bytes is not None
    assert result.cost_usd(PriceTable(0.30, 2.50)) == pytest.approx((40 * 0.30 + 12 * 2.50) / 1e6)


def test_structured_text_is_parsed(server, credential):
    body = gemini_ok()
    body["candidates"][0]["content"]["parts"] = [{"text": '{"action": "finish"}'}]
    server.play(Reply.json(body))
    result = run(provider(server, credential).generate, make_request(tools=False, schema=True))
    assert result.response.structured == {"action": "finish"}
    assert result.response.text == '{"action": "finish"}'


@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (
            Reply.json(
                {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}},
                429,
                **{"Retry-After": "1"},
            ),
            "rate_limited",
            429,
        ),
        (
            Reply.json({"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}, 500),
            "server_error",
            500,
        ),
        (
            Reply.json({"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}, 503),
            "server_error",
            503,
        ),
        (
            Reply.json(
                {"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}, 400
            ),
            "client_error",
            400,
        ),
        (Reply(200, b'{"candidates": [', {"Content-Type": "application/json"}), "unparseable", 200),
        (
            Reply(
                200, b'{"candidates": [], "candidates": []}', {"Content-Type": "application/json"}
            ),
            "unparseable",
            200,
        ),
        (
            Reply.json({"candidates": [], "promptFeedback": {"blockReason": "SAFETY"}}),
            "empty_response",
            200,
        ),
    ],
    ids=["429", "500", "503", "400", "malformed", "dup-keys", "blocked"],
)
def test_http_failures_are_typed_and_transport_ones_retried_once(server, credential, reply,
                                                                kind, status):
    server.play(reply, reply, Reply.json(gemini_ok()))
    journal = Journal(server)
    result = run(provider(server, credential).generate, make_request(), observer=journal)
    assert not result.ok
    assert result.failure.kind == kind
    assert result.failure.status == status
    n = 2 if kind in RETRYABLE_KINDS else 1  # transport: one identical retry, then final
    assert len(result.attempts) == n and len(server.seen) == n
    for a in result.attempts:
        assert a.status == status and a.error_class == kind
    assert [a.retry for a in result.attempts] == [False, True][:n]
    if kind == "rate_limited":
        assert result.failure.retry_after_s == 1.0 and result.attempts[0].retry_after_s == 1.0
    assert [e[0] for e in journal.events] == ["begin", "end"] * n


def test_timeout_before_response_is_retried_once(server, credential):
    server.play(Stall(30.0), Stall(30.0))
    result = run(provider(server, credential, timeout_s=0.5).generate, make_request())
    assert result.failure.kind == "timeout_before_response"
    assert len(result.attempts) == 2 and len(server.seen) == 2
    assert result.attempts[0].response_sha256 is None


def test_timeout_after_output_began_is_retried_once(server, credential):
    server.play(StallAfterHead(30.0), StallAfterHead(30.0))
    # the head is sent at once, but a busy machine may take a while to deliver it
    result = run(provider(server, credential, timeout_s=2.0).generate, make_request())
    assert result.failure.kind == "timeout_after_output"
    a, b = result.attempts
    assert a.status == 200 and a.error_class == "timeout_after_output" and b.retry
    assert result.raw[0].response_bytes == b'{"candidates": ['


def test_a_hung_request_then_the_retry_answers(server, credential):
    server.play(Stall(30.0), Reply.json(gemini_ok()))
    result = run(provider(server, credential, timeout_s=2.0).generate, make_request())
    assert result.ok and [a.retry for a in result.attempts] == [False, True]


def test_closed_before_response_retries_once_identically(server, credential):
    server.play(Close(), Reply.json(gemini_ok()))
    journal = Journal(server)
    result = run(provider(server, credential).generate, make_request(), observer=journal)
    assert result.ok
    first, second = result.attempts
    assert first.error_class == "closed_before_response" and first.retry is False
    assert second.status == 200 and second.retry is True
    assert first.request_sha256 == second.request_sha256
    assert server.seen[0].body == server.seen[1].body
    assert result.raw[0].request_bytes == result.raw[1].request_bytes
    assert first.attempt_id != second.attempt_id
    # begin is journaled before each attempt reaches the server, end after it
    assert [(e[0], e[1].attempt_no, e[2]) for e in journal.events] == [
        ("begin", 1, 0),
        ("end", 1, 1),
        ("begin", 2, 1),
        ("end", 2, 2),
    ]
    assert journal.events[0][1].ended_utc is None and journal.events[1][1].ended_utc is not None


def test_closed_twice_gives_up_after_exactly_one_retry(server, credential):
    server.play(Close(), Close(), Reply.json(gemini_ok()))
    result = run(provider(server, credential).generate, make_request())
    assert result.failure.kind == "closed_before_response"
    assert [a.retry for a in result.attempts] == [False, True]
    assert len(server.seen) == 2
    assert result.attempts[0].request_sha256 == result.attempts[1].request_sha256


def test_connection_refused_retries_once(credential):
    with socket_port() as port:
        pass  # the port is now closed: nothing listens
    p = GeminiProvider(credential, base_url=f"http://127.0.0.1:{port}", timeout_s=10.0)
    result = run(p.generate, make_request())
    assert result.failure.kind == "connect_failed"
    assert [a.retry for a in result.attempts] == [False, True]


def test_retry_disabled_by_policy(server, credential):
    server.play(Close(), Reply.json(gemini_ok()))
    p = provider(server, credential, retry_policy=RetryPolicy(max_retries=0))
    result = run(p.generate, make_request())
    assert result.failure.kind == "closed_before_response" and len(result.attempts) == 1


def test_observer_begin_runs_before_send_and_its_error_propagates(server, credential):
    class Broken:
        async def begin(self, record):
            raise OSError("journal unavailable")

        async def end(self, record):
            raise AssertionError("never")

    server.play(Reply.json(gemini_ok()))
    with pytest.raises(OSError, match="journal unavailable"):
        run(provider(server, credential).generate, make_request(), observer=Broken())
    assert server.seen == []


def test_concurrent_calls_keep_their_own_attempts(server, credential):
    server.play(*[Reply.json(gemini_ok()) for _ in range(4)])
    p = provider(server, credential)
    results: dict[int, object] = {}

    async def one(seed: int) -> None:
        results[seed] = await p.generate(make_request(seed=seed))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for seed in range(4):
                tg.start_soon(one, seed)

    anyio.run(main)
    assert len(server.seen) == 4
    for seed, result in results.items():
        (a,) = result.attempts
        assert loads_strict(result.raw[0].request_bytes)["generationConfig"]["seed"] == seed
        assert a.request_sha256 != results[(seed + 1) % 4].attempts[0].request_sha256


def test_thought_signatures_round_trip_exactly(server, credential):
    sig1 = base64.b64encode(b"\x00\x01signature-one\xff").decode()
    sig2 = base64.b64encode(b"second-signature").decode()
    model_content = {
        "role": "model",
        "parts": [
            {"text": "I should look up the metric.", "thought": True, "thoughtSignature": sig1},
            {
                "functionCall": {
                    "name": "get_metric",
                    "args": {"entity": "store-01", "date": "2024-03-01"},
                },
                "thoughtSignature": sig2,
            },
        ],
    }
    body = gemini_ok()
    body["candidates"][0]["content"] = model_content
    server.play(Reply.json(body), Reply.json(gemini_ok()))
    p = provider(server, credential)
    first = run(p.generate, make_request())
    assert first.ok
    r = first.response
    assert r.text is None  # thought text is not answer text
    history = (
        make_request().messages[0],
        r.message,
        Message("user", (Part.of_response("get_metric", {"ok": True, "result": {"value": 3}}),)),
    )
    second = run(p.generate, make_request(messages=history))
    assert second.ok
    sent = loads_strict(server.seen[1].body)["contents"]
    # The SDK re-encodes bytes fields with the URL-safe base64 alphabet (proto3 JSON accepts
    # both); the signature BYTES and everything else come back exactly.
    assert _decode_signatures(sent[1]) == _decode_signatures(model_content)
    assert [p["thoughtSignature"] for p in sent[1]["parts"]] != [sig1, sig2]  # really re-encoded
    assert sent[2]["parts"][0]["functionResponse"]["name"] == "get_metric"


def test_implicit_environment_is_removed(server, credential, monkeypatch):
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v1")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://10.255.255.1:9")
    monkeypatch.setenv("GOOGLE_API_KEY", "implicit-key-must-not-be-used")
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("GOOGLE_GENAI_SOMETHING_NEW", "1")
    monkeypatch.setenv("HTTPS_PROXY", "http://10.255.255.1:3128")
    monkeypatch.setenv("http_proxy", "http://10.255.255.1:3128")
    server.play(Reply.json(gemini_ok()))
    p = provider(server, credential)
    for name in (
        "GOOGLE_GENAI_API_VERSION",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_GENAI_SOMETHING_NEW",
        "HTTPS_PROXY",
        "http_proxy",
    ):
        assert name not in os.environ
        assert name in p.removed_env
    result = run(p.generate, make_request())
    assert result.ok
    assert server.seen[0].path.startswith("/v1beta/")
    assert server.seen[0].headers["x-goog-api-key"] != "implicit-key-must-not-be-used"


def test_sdk_gets_both_injected_guarded_clients(server, credential):
    p = provider(server, credential)
    api = p._client._api_client
    assert api._httpx_client is p._sync_http
    assert api._async_httpx_client is p._async_http
    assert p._sync_http._trust_env is False and p._async_http._trust_env is False
    assert api._http_options.retry_options.attempts == 1
    assert api._http_options.timeout == 10_000
    assert api._http_options.api_version == "v1beta"
    assert api.vertexai is False
    assert not api._use_aiohttp()
    # the sync client (unused by generate, present so the SDK never builds its own) is guarded
    with pytest.raises(EgressRefused):
        p._sync_http.get("http://127.0.0.1:1/elsewhere")


def test_guard_must_match_base_url(server, credential):
    with pytest.raises(EgressRefused):
        GeminiProvider(
            credential, base_url=server.url, guard=EgressGuardTransport("https://example.org")
        )


def test_every_genai_exception_class_is_mapped():
    classes = [
        c
        for _, c in inspect.getmembers(genai_errors, inspect.isclass)
        if issubclass(c, BaseException) and c.__module__.startswith("google.genai")
    ]
    assert genai_errors.APIError in classes and len(classes) >= 8
    unmapped = [c.__name__ for c in classes if c not in GENAI_EXCEPTION_KINDS]
    assert unmapped == [], (
        f"google-genai grew exception classes the adapter does not map: {unmapped}"
    )


def test_every_httpx_exception_class_is_mapped():
    from runner.providers import HTTPX_EXCEPTION_KINDS

    classes = [getattr(httpx, n) for n in httpx.__all__]
    classes = [c for c in classes if inspect.isclass(c) and issubclass(c, BaseException)]
    unmapped = [c.__name__ for c in classes if c not in HTTPX_EXCEPTION_KINDS]
    assert unmapped == []


def _decode_signatures(content: dict) -> dict:
    parts = []
    for part in content["parts"]:
        part = dict(part)
        sig = part.pop("thoughtSignature")
        part["signature_bytes"] = base64.b64decode(sig.replace("-", "+").replace("_", "/"))
        parts.append(part)
    return {**content, "parts": parts}


class socket_port:
    """Reserve a free port, then release it so connecting is refused."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
