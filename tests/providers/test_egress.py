"""The egress guard refuses every origin but the configured one, for sync and async clients."""

from __future__ import annotations

import anyio
import httpx
import pytest

from runner.providers import EgressGuardTransport, EgressRefused, Origin
from tests.providers.fakeserver import FakeServer, Reply


@pytest.fixture
def two_servers():
    with FakeServer() as allowed, FakeServer() as other:
        yield allowed, other


def test_origin_parsing_fills_default_ports():
    assert Origin.parse("https://Generativelanguage.googleapis.com/v1beta") == Origin(
        "https", "generativelanguage.googleapis.com", 443
    )
    assert Origin.parse("http://127.0.0.1:8080/x") == Origin("http", "127.0.0.1", 8080)
    with pytest.raises(EgressRefused):
        Origin.parse("ftp://example.org")


def test_sync_guard(two_servers):
    allowed, other = two_servers
    allowed.play(Reply.json({"ok": True}))
    guard = EgressGuardTransport(allowed.url)
    with httpx.Client(transport=guard, trust_env=False, headers={"connection": "close"}) as c:
        assert c.post(allowed.url + "/a", content=b"{}").status_code == 200
        with pytest.raises(EgressRefused, match="not the configured provider origin"):
            c.post(other.url + "/b", content=b"{}")
        with pytest.raises(EgressRefused):  # same host, other scheme
            c.get(allowed.url.replace("http://", "https://"))
        with pytest.raises(EgressRefused):  # same host, other port
            c.get(f"http://127.0.0.1:{other.port}/")
    assert [s.path for s in allowed.seen] == ["/a"]
    assert other.seen == []


def test_async_guard(two_servers):
    allowed, other = two_servers
    allowed.play(Reply.json({"ok": True}))
    guard = EgressGuardTransport(allowed.url)

    async def main() -> None:
        async with httpx.AsyncClient(
            transport=guard, trust_env=False, headers={"connection": "close"}
        ) as c:
            assert (await c.post(allowed.url + "/a", content=b"{}")).status_code == 200
            with pytest.raises(EgressRefused):
                await c.post(other.url + "/b", content=b"{}")
            with pytest.raises(EgressRefused):
                await c.get(f"http://localhost:{allowed.port}/")  # other host name

    anyio.run(main)
    assert [s.path for s in allowed.seen] == ["/a"]
    assert other.seen == []


def test_guard_refusal_through_the_provider_is_a_typed_failure(two_servers, credential):
    """A refused request never reaches any server and comes back as egress_refused."""
    from runner.providers import OpenAICompatProvider
    from tests.providers.conftest import make_request

    allowed, other = two_servers
    p = OpenAICompatProvider(allowed.url + "/v1", model="m", timeout_s=10.0)
    p.base_url = other.url + "/v1"  # simulate a mis-set URL after construction
    result = anyio.run(p.generate, make_request())
    assert result.failure is not None and result.failure.kind == "egress_refused"
    assert result.attempts[0].error_class == "egress_refused"
    assert result.attempts[0].status is None and result.raw[0].response_bytes is None
    assert allowed.seen == [] and other.seen == []


def test_credential_never_sent_in_clear_text_off_this_machine(credential):
    from runner.providers import GeminiProvider, OpenAICompatProvider

    with pytest.raises(EgressRefused, match="plain http"):
        GeminiProvider(credential, base_url="http://generativelanguage.googleapis.com")
    with pytest.raises(EgressRefused, match="plain http"):
        OpenAICompatProvider("http://10.1.2.3:8000/v1", credential=credential, model="m")
    # loopback is fine, and without a credential any origin is
    OpenAICompatProvider("http://10.1.2.3:8000/v1", model="m")
    GeminiProvider(credential, base_url="http://[::1]:8080")
    GeminiProvider(credential, base_url="http://localhost:8080")
