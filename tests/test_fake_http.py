"""The one fake HTTP server of the tests (tests/fake_http.py), driven by a real httpx client.

Each action does what a provider test relies on; the three fakes (scripted, paid API, small
OpenAI) are configurations of it, and no other test module starts an HTTP server of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.fake_http import (
    Close,
    FakeHTTPServer,
    Reply,
    Seen,
    Stall,
    StallAfterHead,
    Truncated,
)
from tests.fake_provider import FakeProvider, Faults
from tests.providers.fakeserver import FakeServer
from tests.study.fake_openai import FakeOpenAI

TESTS = Path(__file__).resolve().parent


def test_every_request_is_recorded_in_arrival_order_and_answered() -> None:
    def respond(request: Seen) -> Reply:
        return Reply.json({"n": request.n}, 201, **{"X-Seen": request.path})

    with FakeHTTPServer(respond) as server, httpx.Client(base_url=server.origin) as client:
        first = client.post("/a", content=b"one", headers={"X-Key": "k"})
        second = client.post("/b", content=b"two")
    assert (first.status_code, first.json(), first.headers["x-seen"]) == (201, {"n": 1}, "/a")
    assert first.headers["content-type"] == "application/json"
    assert second.json() == {"n": 2}
    assert [(s.method, s.path, s.body, s.n) for s in server.seen] == [
        ("POST", "/a", b"one", 1), ("POST", "/b", b"two", 2)]
    assert server.seen[0].headers["x-key"] == "k"  # header names lower-cased


@pytest.mark.parametrize(("action", "error"), [
    (Close(), httpx.RemoteProtocolError),
    (Stall(5.0), httpx.ReadTimeout),
    (StallAfterHead(5.0), httpx.ReadTimeout),
    (Truncated(b'{"a": "' + b"x" * 100 + b'"}'), httpx.RemoteProtocolError),
])
def test_each_failure_action_fails_the_client_as_a_broken_server_would(
        action: Close | Stall | StallAfterHead | Truncated, error: type[Exception]) -> None:
    with FakeHTTPServer(lambda request: action) as server, \
            httpx.Client(base_url=server.origin, timeout=0.5) as client:
        with pytest.raises(error):
            client.post("/v1/x", content=b"{}")
    assert len(server.seen) == 1


def test_the_script_plays_in_order_then_answers_500() -> None:
    with FakeServer() as server, httpx.Client(base_url=server.url, timeout=2.0) as client:
        server.play(Reply.json({"ok": 1}), Reply(429, b"{}", {"Retry-After": "3"}))
        got = [client.post("/p", content=b"x") for _ in range(3)]
    assert [r.status_code for r in got] == [200, 429, 500]
    assert got[1].headers["retry-after"] == "3"


def test_the_paid_api_scripts_faults_by_arrival_with_retry_after() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    faults = Faults(at={1: "429", 2: "malformed", 3: "503"})
    with FakeProvider(faults) as server, httpx.Client(base_url=server.url, timeout=2.0) as client:
        got = [client.post("/chat/completions", json=body) for _ in range(4)]
    assert [r.status_code for r in got] == [429, 200, 503, 200]
    assert got[0].headers["retry-after"] == "1"
    assert got[1].content.startswith(b"<html>")  # a 200 that is not JSON
    assert got[3].json()["object"] == "chat.completion"
    assert dict(server.stats) == {"429": 1, "malformed": 1, "503": 1, "ok": 1}
    assert [s.n for s in server.seen] == [1, 2, 3, 4]


def test_the_small_openai_server_plans_then_finishes() -> None:
    with FakeOpenAI() as server, httpx.Client(base_url=server.url, timeout=2.0) as client:
        critic = client.post("/chat/completions", json={"model": "m", "messages": []})
    assert critic.json()["choices"][0]["message"]["content"] == \
        '{"reason":"fine","verdict":"accept"}'
    assert server.seen[0].path == "/v1/chat/completions"


def test_no_other_test_module_starts_an_http_server() -> None:
    server = re.compile(r"\bhttp\.server\b|\bThreadingHTTPServer\b|\bBaseHTTPRequestHandler\b")
    found = sorted(p.relative_to(TESTS).as_posix() for p in TESTS.rglob("*.py")
                   if p.name != "test_fake_http.py" and server.search(p.read_text("utf-8")))
    assert found == ["fake_http.py"]
