"""Every provider record reads what it writes: ``from_json(to_json())`` gives back an equal value
with the same JSON, and a malformed object is refused with an error naming the path."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest

from runner.canonical import RecordFormatError, canonical_bytes, loads_strict
from runner.providers import (
    AttemptRecord,
    FunctionCall,
    FunctionResponse,
    GenerationConfig,
    Message,
    Part,
    ProviderFailure,
    ProviderRequest,
    ProviderResponse,
    ProviderResult,
    RawExchange,
    SimulatedProvider,
    SimulatedReply,
    ToolDecl,
    Usage,
)
from tests.providers.conftest import TOOL, make_request

DIGEST = "sha256:" + "ab" * 32

CALL = FunctionCall("get_metric", {"entity": "store-01", "date": "2026-03-01"}, "call-1")
RESPONSE = ProviderResponse(
    text="thinking",
    structured={"action": "call", "n": [1, 2.5, None]},
    function_calls=(CALL,),
    finish_reason="STOP",
    usage=Usage(10, 5, 15),
    model_version="m-1",
    response_id="r-1",
    provider="gemini",
    simulated=False,
    message=Message("model", (Part.of_text("thinking"), Part(function_call=CALL))),
)
ATTEMPT = AttemptRecord(
    attempt_id="a-1", cell_id="cell-0007", provider="gemini", model="gemini-2.5-flash",
    simulated=False, attempt_no=1, request_sha256=DIGEST, response_sha256=DIGEST,
    started_utc="2026-01-01T00:00:00Z", ended_utc="2026-01-01T00:00:01Z", latency_s=0.25,
    status=200, error_class=None, retry=False, usage=Usage(10, 5, 15), retry_after_s=None,
)
IN_FLIGHT = AttemptRecord(
    attempt_id="a-2", cell_id=None, provider="openai", model="gpt", simulated=False,
    attempt_no=2, request_sha256=DIGEST, response_sha256=None, started_utc="2026-01-01T00:00:00Z",
    ended_utc=None, latency_s=None, status=None, error_class=None, retry=True, usage=None,
    retry_after_s=1.5,
)
FAILURE = ProviderFailure("server_error", "HTTP 503", 503, 2.0, "HTTP 503")

RECORDS: list[tuple[Any, Any]] = [
    (GenerationConfig(temperature=0.2, seed=7, max_output_tokens=512), GenerationConfig),
    (GenerationConfig(temperature=1, seed=-3, max_output_tokens=1, top_p=0.5), GenerationConfig),
    (TOOL, ToolDecl),
    (CALL, FunctionCall),
    (FunctionCall("finish", {}, None), FunctionCall),
    (FunctionResponse("get_metric", {"ok": True, "value": 3}, "call-1"), FunctionResponse),
    (Part.of_text(""), Part),
    (Part(function_call=CALL), Part),
    (Part.of_response("get_metric", {"ok": False}), Part),
    (Message.user_text("hello"), Message),
    (RESPONSE.message, Message),
    (make_request(), ProviderRequest),
    (make_request(tools=False, schema=True), ProviderRequest),
    (Usage(), Usage),
    (Usage(1, 2, 3), Usage),
    (RESPONSE, ProviderResponse),
    (ATTEMPT, AttemptRecord),
    (IN_FLIGHT, AttemptRecord),
    (FAILURE, ProviderFailure),
    (ProviderFailure("timeout_before_response", "timed out"), ProviderFailure),
]


@pytest.mark.parametrize(("value", "cls"), RECORDS, ids=lambda x: type(x).__name__)
def test_every_record_reads_back_what_it_wrote(value: Any, cls: Any) -> None:
    obj = value.to_json()
    # through canonical bytes, as the journal and the store keep it
    read = cls.from_json(loads_strict(canonical_bytes(obj)))
    assert read == value
    assert canonical_bytes(read.to_json()) == canonical_bytes(obj)


def test_a_provider_result_reads_back_with_its_raw_exchanges() -> None:
    raw = (RawExchange(b"{}", b'{"ok":true}'),)
    ok = ProviderResult(RESPONSE, None, (ATTEMPT,), raw)
    assert ProviderResult.from_json(ok.to_json(), raw) == ok
    failed = ProviderResult(None, FAILURE, (IN_FLIGHT,), (RawExchange(b"{}", None),))
    assert ProviderResult.from_json(failed.to_json(), failed.raw) == failed
    with pytest.raises(RecordFormatError, match=r"^result: attempts and raw exchanges must align"):
        ProviderResult.from_json(ok.to_json(), ())
    with pytest.raises(RecordFormatError, match=r"^result: a ProviderResult has exactly one"):
        ProviderResult.from_json({**ok.to_json(), "failure": FAILURE.to_json()}, raw)


def test_a_simulated_exchange_reads_back_from_its_journal_form() -> None:
    provider = SimulatedProvider(lambda request, rng: SimulatedReply(
        text="done", function_calls=(FunctionCall("finish", {"certificate": {}}),)))
    result = anyio.run(provider.generate, make_request())
    assert result.response is not None
    (attempt,) = result.attempts
    assert AttemptRecord.from_json(loads_strict(canonical_bytes(attempt.to_json()))) == attempt
    read = ProviderResponse.from_json(loads_strict(canonical_bytes(result.response.to_json())))
    assert read == result.response
    assert ProviderResult.from_json(result.to_json(), result.raw) == result


def _mutated(obj: dict[str, Any], where: list[str | int], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node: Any = out
    for key in where[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[where[-1]]
    else:
        node[where[-1]] = value
    return out


_DELETE = object()

REJECTED: list[tuple[Any, list[str | int], Any, str]] = [
    (ATTEMPT, ["surprise"], 1, "attempt: unknown field 'surprise'"),
    (ATTEMPT, ["retry"], _DELETE, "attempt: missing field 'retry'"),
    (ATTEMPT, ["attempt_no"], True, "attempt.attempt_no: expected an integer, got boolean"),
    (ATTEMPT, ["latency_s"], "0.2", "attempt.latency_s: expected a number, got string"),
    (ATTEMPT, ["request_sha256"], "abc", "attempt.request_sha256: expected a 'sha256:"),
    (ATTEMPT, ["usage", "input_tokens"], -1, "attempt.usage.input_tokens: must be >= 0"),
    (ATTEMPT, ["usage", "cached"], 0, "attempt.usage: unknown field 'cached'"),
    (RESPONSE, ["function_calls", 0, "args"], None,
     "response.function_calls[0].args: expected an object, got null"),
    (RESPONSE, ["message", "role"], "system",
     "response.message.role: expected 'user' or 'model', got 'system'"),
    (RESPONSE, ["message", "parts", 1], {"text": "a", "function_call": {}},
     "response.message.parts[1]: expected an object with exactly one of"),
    (RESPONSE, ["message", "parts", 0], {"image": "x"},
     "response.message.parts[0]: unknown field 'image'"),
    (RESPONSE, ["simulated"], 0, "response.simulated: expected a boolean, got number"),
    (RESPONSE, ["usage"], None, "response.usage: expected an object, got null"),
    (make_request(), ["generation", "temperature"], 3.0,
     "request.generation: temperature must be within [0, 2]"),
    (make_request(), ["generation", "seed"], 1.5, "request.generation.seed: expected an integer"),
    (make_request(), ["tools", 0, "parameters"], [],
     "request.tools[0].parameters: expected an object or null, got array"),
    (make_request(), ["messages"], [], "request: a request needs at least one message"),
    (make_request(), ["metadata"], None, "request.metadata: expected an object, got null"),
    (FAILURE, ["kind"], "gremlins", "failure.kind: unknown failure kind 'gremlins'"),
    (FAILURE, ["status"], "503", "failure.status: expected an integer, got string"),
]


@pytest.mark.parametrize(("value", "where", "bad", "message"), REJECTED,
                         ids=lambda x: x if isinstance(x, str) else None)
def test_a_malformed_record_is_refused_naming_the_path(value: Any, where: list[str | int],
                                                        bad: Any, message: str) -> None:
    obj = _mutated(value.to_json(), where, bad)
    with pytest.raises(RecordFormatError) as err:
        type(value).from_json(obj)
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize("cls", [GenerationConfig, ToolDecl, FunctionCall, FunctionResponse, Part,
                                 Message, ProviderRequest, Usage, ProviderResponse, AttemptRecord,
                                 ProviderFailure])
def test_a_non_object_is_refused(cls: Any) -> None:
    with pytest.raises(RecordFormatError, match=r"expected an object"):
        cls.from_json([1], "x")
