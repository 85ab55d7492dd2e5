"""The OpenAI-compatible adapter against a local server (real httpx, real sockets)."""

from __future__ import annotations

import anyio
import pytest

from runner.canonical import loads_strict
from runner.providers import RETRYABLE_KINDS, Credential, Message, OpenAICompatProvider, Part
from tests.providers.conftest import SCHEMA, Journal, make_request, openai_ok
from tests.providers.fakeserver import Close, Reply, Stall, StallAfterHead


def provider(server, credential: Credential | None = None, **kw) -> OpenAICompatProvider:
    kw.setdefault("timeout_s", 10.0)
    return OpenAICompatProvider(
        server.url + "/v1", credential=credential, model="local-model", **kw
    )


def gen(p, request, **kw):
    return anyio.run(lambda: p.generate(request, **kw))


def test_request_shape(server, credential, canary):
    server.play(Reply.json(openai_ok()))
    result = gen(provider(server, credential), make_request(schema=True))
    assert result.ok
    seen = server.seen[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {canary}"
    body = loads_strict(seen.body)
    assert body["model"] == "local-model"
    assert body["temperature"] == 0.2 and body["seed"] == 11 and body["max_tokens"] == 512
    assert body["tool_choice"] == "auto"
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "get_metric",
            "description": "Return one metric value.",
            "parameters": make_request().tools[0].parameters,
        },
    }
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": SCHEMA},
    }
    assert body["messages"][0] == {"role": "system", "content": "You are the planner."}
    assert body["messages"][1] == {"role": "user", "content": "Find the revenue of store-01."}
    r = result.response
    assert r.function_calls[0].name == "get_metric" and r.function_calls[0].id == "call_abc"
    assert dict(r.function_calls[0].args) == {"entity": "store-01", "date": "2024-03-01"}
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (30, 7, 37)
    assert r.model_version == "local-model-q4" and r.response_id == "chatcmpl-1"
    assert r.finish_reason == "tool_calls" and r.simulated is False
    assert result.raw[0].request_bytes == seen.body
    assert result.attempts[0].usage == r.usage


def test_json_object_mode_and_no_credential(server):
    server.play(Reply.json(openai_ok()))
    result = gen(provider(server, response_format="json_object"), make_request(schema=True))
    assert result.ok
    body = loads_strict(server.seen[0].body)
    assert body["response_format"] == {"type": "json_object"}
    assert "authorization" not in server.seen[0].headers


def test_assistant_message_replayed_and_tool_result_sent(server):
    server.play(Reply.json(openai_ok()), Reply.json(openai_ok()))
    p = provider(server)
    first = gen(p, make_request())
    history = (
        make_request().messages[0],
        first.response.message,
        Message("user", (Part.of_response("get_metric", {"value": 3}, id="call_abc"),)),
    )
    assert gen(p, make_request(messages=history)).ok
    msgs = loads_strict(server.seen[1].body)["messages"]
    assert msgs[2] == openai_ok()["choices"][0]["message"]
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_abc", "content": '{"value":3}'}


def test_structured_content(server):
    body = openai_ok()
    body["choices"][0]["message"] = {"role": "assistant", "content": '{"action":"call"}'}
    server.play(Reply.json(body))
    result = gen(provider(server), make_request(tools=False, schema=True))
    assert result.response.structured == {"action": "call"}


@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (
            Reply.json({"error": {"message": "slow down"}}, 429, **{"Retry-After": "1"}),
            "rate_limited",
            429,
        ),
        (Reply.json({"error": {"message": "boom"}}, 500), "server_error", 500),
        (Reply.json({"error": {"message": "busy"}}, 503), "server_error", 503),
        (Reply.json({"error": {"message": "no such model"}}, 404), "client_error", 404),
        (Reply(200, b"{not json", {"Content-Type": "application/json"}), "unparseable", 200),
        (
            Reply.json(
                {
                    "id": "x",
                    "choices": [
                        {
                            "message": {
                                "role": "assistant",
                                "tool_calls": [
                                    {"id": "c", "function": {"name": "f", "arguments": "{oops"}}
                                ],
                            }
                        }
                    ],
                }
            ),
            "malformed_output",
            200,
        ),
        (Reply.json({"id": "x", "choices": []}), "empty_response", 200),
    ],
    ids=["429", "500", "503", "404", "malformed", "bad-arguments", "no-choices"],
)
def test_failures_are_typed_and_only_transport_ones_retried_once(server, reply, kind, status):
    # A transport failure (429, 5xx, a body that is not the API's JSON) is retried once, the
    # very same bytes, after the Retry-After wait; a second failure is final. A 4xx other than
    # 429 and a model-output failure (malformed arguments, no choice) are final at once.
    server.play(reply, reply, Reply.json(openai_ok()))
    journal = Journal(server)
    result = gen(provider(server), make_request(), observer=journal)
    assert result.failure is not None and result.failure.kind == kind
    assert result.failure.status == status
    retried = kind in RETRYABLE_KINDS
    n = 2 if retried else 1
    assert len(server.seen) == n and len(result.attempts) == n
    assert result.failure.transport == (kind not in ("malformed_output", "empty_response"))
    for a in result.attempts:
        assert a.error_class == kind and a.status == status
    assert [a.retry for a in result.attempts] == [False, True][:n]
    if retried:
        assert server.seen[0].body == server.seen[1].body
    if kind == "rate_limited":
        assert result.failure.retry_after_s == 1.0 and result.attempts[0].retry_after_s == 1.0
    assert [e[0] for e in journal.events] == ["begin", "end"] * n


@pytest.mark.parametrize(
    "reply",
    [Reply.json({"error": {"message": "busy"}}, 503),
     Reply(200, b"<html>bad gateway</html>", {"Content-Type": "text/html"}),
     Close(), Stall(30.0), StallAfterHead(30.0)],
    ids=["503", "not-json", "closed", "hung", "hung-after-head"],
)
def test_one_transport_failure_then_the_retry_answers(server, reply):
    server.play(reply, Reply.json(openai_ok()))
    result = gen(provider(server, timeout_s=2.0), make_request())
    assert result.ok, result.failure
    assert [a.retry for a in result.attempts] == [False, True]
    assert result.attempts[0].error_class is not None and result.attempts[1].status == 200


def test_timeouts_are_transport_failures_retried_once(server):
    server.play(Stall(30.0), Stall(30.0), StallAfterHead(30.0), StallAfterHead(30.0))
    before = gen(provider(server, timeout_s=0.5), make_request())
    # the head is sent at once, but a busy machine may take a while to deliver it
    after = gen(provider(server, timeout_s=2.0), make_request())
    assert before.failure.kind == "timeout_before_response" and len(before.attempts) == 2
    assert after.failure.kind == "timeout_after_output" and len(after.attempts) == 2
    assert after.attempts[0].status == 200
    assert len(server.seen) == 4


def test_closed_before_response_retries_once_identically(server):
    server.play(Close(), Reply.json(openai_ok()))
    journal = Journal(server)
    result = gen(provider(server), make_request(), observer=journal)
    assert result.ok
    a, b = result.attempts
    assert (a.error_class, a.retry, b.status, b.retry) == (
        "closed_before_response",
        False,
        200,
        True,
    )
    assert a.request_sha256 == b.request_sha256
    assert server.seen[0].body == server.seen[1].body
    assert [(e[0], e[2]) for e in journal.events] == [
        ("begin", 0),
        ("end", 1),
        ("begin", 1),
        ("end", 2),
    ]


def test_closed_twice_is_final_after_one_retry(server):
    server.play(Close(), Close(), Reply.json(openai_ok()))
    result = gen(provider(server), make_request())
    assert result.failure.kind == "closed_before_response"
    assert [x.retry for x in result.attempts] == [False, True] and len(server.seen) == 2


def test_observer_exception_propagates_and_nothing_is_sent(server):
    class Broken:
        async def begin(self, record):
            raise OSError("journal disk full")

        async def end(self, record):
            raise AssertionError("never")

    server.play(Reply.json(openai_ok()))
    with pytest.raises(OSError, match="journal disk full"):
        gen(provider(server), make_request(), observer=Broken())
    assert server.seen == []


def test_identical_requests_are_identical_bytes(server):
    server.play(Reply.json(openai_ok()), Reply.json(openai_ok()))
    p = provider(server)
    a = gen(p, make_request())
    b = gen(p, make_request())
    assert a.raw[0].request_bytes == b.raw[0].request_bytes
    assert a.attempts[0].request_sha256 == b.attempts[0].request_sha256
