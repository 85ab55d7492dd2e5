"""The simulated provider: deterministic bytes, same interface, labelled simulated."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from runner.canonical import canonical_bytes
from runner.providers import (
    FunctionCall,
    PriceTable,
    ProviderFailure,
    SimulatedProvider,
    SimulatedReply,
    default_responder,
    example_from_schema,
)
from tests.providers.conftest import SCHEMA, Journal, make_request

_SNIPPET = """
import anyio, hashlib
from runner.canonical import canonical_bytes
from runner.providers import SimulatedProvider
from tests.providers.conftest import make_request
from tests.providers.test_simulated import noisy_responder
r = anyio.run(SimulatedProvider(noisy_responder).generate, make_request(seed={seed}))
print(fingerprint_hex := hashlib.sha256(
    r.raw[0].request_bytes + b"|" + r.raw[0].response_bytes + b"|"
    + canonical_bytes([a.stable_json() for a in r.attempts])).hexdigest())
"""


def noisy_responder(request, rng):
    """Uses the rng heavily, so determinism of the seeding is really exercised."""
    draws = [rng.random() for _ in range(5)]
    if draws[0] < 0.5:
        return SimulatedReply(text=f"finish {draws[1]:.12f}")
    return SimulatedReply(
        function_calls=(FunctionCall("get_metric", {"x": round(draws[2], 9)}, "c1"),)
    )


def fingerprint(result) -> bytes:
    return (
        result.raw[0].request_bytes
        + b"|"
        + result.raw[0].response_bytes
        + b"|"
        + canonical_bytes([a.stable_json() for a in result.attempts])
    )


def test_byte_identical_across_runs_and_instances():
    a = anyio.run(SimulatedProvider(noisy_responder).generate, make_request(seed=5))
    b = anyio.run(SimulatedProvider(noisy_responder).generate, make_request(seed=5))
    assert fingerprint(a) == fingerprint(b)
    assert canonical_bytes(a.response.to_json()) == canonical_bytes(b.response.to_json())
    assert a.attempts[0].attempt_id == b.attempts[0].attempt_id
    assert a.attempts[0].latency_s == 0.0


def test_byte_identical_across_processes(repo_root):
    import hashlib

    here = anyio.run(SimulatedProvider(noisy_responder).generate, make_request(seed=9))
    expected = hashlib.sha256(fingerprint(here)).hexdigest()
    out = subprocess.run(
        [sys.executable, "-c", _SNIPPET.format(seed=9)],
        capture_output=True,
        text=True,
        check=True,
        cwd=repo_root,
        env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "123"},
    )
    assert out.stdout.strip() == expected


def test_seed_and_request_change_the_draws():
    seen = {
        canonical_bytes(
            anyio.run(
                SimulatedProvider(noisy_responder).generate, make_request(seed=s)
            ).response.to_json()
        )
        for s in range(12)
    }
    assert len(seen) == 12


def test_labelled_simulated_with_records_and_raw_json():
    journal = Journal()
    result = anyio.run(lambda: SimulatedProvider().generate(make_request(), observer=journal))
    r = result.response
    assert r.simulated is True and r.provider == "simulated"
    assert r.model_version.startswith("simulated-")
    (a,) = result.attempts
    assert a.simulated is True and a.model == "simulated-1" and a.status == 200
    assert [e[0] for e in journal.events] == ["begin", "end"]
    assert result.raw[0].request_bytes == make_request().canonical()
    assert result.raw[0].response_bytes == canonical_bytes(r.to_json())
    # usage is a function of byte lengths
    assert r.usage.input_tokens == -(-len(result.raw[0].request_bytes) // 4)
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert result.cost_usd(PriceTable(1.0, 1.0)) == pytest.approx(r.usage.total_tokens / 1e6)


def test_default_responder_calls_first_tool_with_schema_args():
    r = anyio.run(SimulatedProvider().generate, make_request()).response
    (call,) = r.function_calls
    assert call.name == "get_metric" and set(call.args) == {"entity", "date"}


def test_default_responder_structured_and_text():
    r = anyio.run(SimulatedProvider().generate, make_request(tools=False, schema=True)).response
    assert r.structured == {"action": "call"}
    r2 = anyio.run(SimulatedProvider().generate, make_request(tools=False)).response
    assert r2.text == "simulated reply" and r2.function_calls == ()


def test_scripted_failure_is_a_typed_failure():
    def failing(request, rng):
        return SimulatedReply(failure=ProviderFailure("simulated", "scripted 429", status=429))

    result = anyio.run(SimulatedProvider(failing).generate, make_request())
    assert not result.ok and result.failure.kind == "simulated"
    assert result.attempts[0].error_class == "simulated" and result.attempts[0].usage is None


def test_model_name_must_say_simulated():
    with pytest.raises(ValueError):
        SimulatedProvider(model="gemini-2.5-flash")


def test_example_from_schema_shapes():
    assert example_from_schema(SCHEMA) == {"action": "call"}
    assert example_from_schema({"type": "array", "items": {"type": "integer"}, "minItems": 2}) == [
        0,
        0,
    ]
    assert example_from_schema({"type": ["null", "number"], "minimum": 1.5}) == 1.5
    assert default_responder(make_request(), None).function_calls[0].name == "get_metric"


def test_draws_are_common_random_numbers_across_cells_and_pipelines():
    """Metadata never reaches a model, so it never moves a draw: the same request with the
    same generation seed gets the same reply whichever cell or pipeline sends it; another
    generation seed (on the wire) is another draw."""
    import dataclasses

    base = make_request(seed=5)
    replies = set()
    for cell in ("w10-lookup-0:clean:s0:ect", "w10-lookup-0:clean:s0:controller"):
        for extra in ({}, {"critic": "full_trace", "decision": 2}):
            request = dataclasses.replace(base, metadata={"cell_id": cell, "seed": 5, **extra})
            result = anyio.run(SimulatedProvider(noisy_responder).generate, request)
            replies.add(canonical_bytes([result.response.text,
                                         [c.to_json() for c in result.response.function_calls]]))
    assert len(replies) == 1
    seeds = [dataclasses.replace(base, generation=dataclasses.replace(base.generation, seed=s))
             for s in range(6, 12)]
    moved = set()
    for r in seeds:
        reply = anyio.run(SimulatedProvider(noisy_responder).generate, r).response
        moved.add(canonical_bytes([reply.text, [c.to_json() for c in reply.function_calls]]))
    assert len(moved) > 1
