"""The simulated provider: the embedded, deterministic, offline default (docs/providers.md).

Given the same request it returns the same bytes, every time, in every process: the responder
gets a ``random.Random`` seeded from ``sha256("ect/simulated/v2" || canonical(wire request))``,
where the wire request is everything a real model receives (role, system prompt, messages, tools,
response schema and the generation config, whose ``seed`` is the cell's seed) and *not* the
request's ``metadata`` (cell id, pipeline, decision: bookkeeping that never reaches a model). So
the draws are common random numbers: one request with one generation seed is answered the same
way whichever cell or pipeline sends it, as a model with a fixed seed would. It speaks the same typed interface as the
HTTP adapters: one attempt record per call (observer ``begin``/``end`` awaited around it) and a
raw exchange whose bytes are the canonical request JSON and the canonical response JSON.

Token usage is computed from byte lengths (ceil(bytes / 4)); latency is recorded as 0.0; the
timestamps are wall clock and excluded from digests (``AttemptRecord.stable_json``). Every
response says ``simulated: true`` and its model is ``simulated-*``.

Behaviour (planner/critic parameters from the study spec) lives in the responder; the study's
responders come from :mod:`runner.policies`. :func:`default_responder` is for smoke use.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runner.canonical import canonical_bytes
from runner.providers._adapter import ProviderAdapter
from runner.providers._errors import ProviderFailure
from runner.providers._http import CallLog, Outcome
from runner.providers._retry import RetryPolicy
from runner.providers._types import (
    AttemptObserver,
    FunctionCall,
    Message,
    Part,
    ProviderRequest,
    ProviderResponse,
    Usage,
)

if TYPE_CHECKING:
    from runner.providers._registry import AdapterSettings

__all__ = [
    "Responder",
    "SimulatedProvider",
    "SimulatedReply",
    "default_responder",
    "example_from_schema",
    "simulated_rng",
]

_DOMAIN = b"ect/simulated/v1\n"  # response ids (over the whole request, metadata included)
_DRAW_DOMAIN = b"ect/simulated/v2\n"  # the responder's draws (over the wire request only)


@dataclass(frozen=True)
class SimulatedReply:
    """What a responder decides. ``failure`` scripts a provider failure instead of a reply."""

    text: str | None = None
    function_calls: tuple[FunctionCall, ...] = ()
    structured: Any = None
    finish_reason: str = "STOP"
    failure: ProviderFailure | None = None


Responder = Callable[[ProviderRequest, random.Random], SimulatedReply]


def _wire_bytes(request: ProviderRequest) -> bytes:
    """Canonical bytes of what a model receives: the request without its ``metadata``."""
    body = request.to_json()
    del body["metadata"]
    return canonical_bytes(body)


def simulated_rng(request: ProviderRequest) -> random.Random:
    """The responder's generator: a function of the wire request (generation seed included)
    only, never of ``metadata`` (cell id, pipeline), so draws are common random numbers."""
    seed = int.from_bytes(hashlib.sha256(_DRAW_DOMAIN + _wire_bytes(request)).digest(), "big")
    return random.Random(seed)


def _tokens(n_bytes: int) -> int:
    return math.ceil(n_bytes / 4)


def _attempt_id(n: int, request_bytes: bytes) -> str:
    """A simulated attempt's id: a function of the request, so the same call has the same id."""
    return f"sim-{hashlib.sha256(request_bytes).hexdigest()[:24]}-{n}"


def _no_time() -> float:
    return 0.0


class SimulatedProvider(ProviderAdapter):
    """Deterministic, offline provider around a :data:`Responder`."""

    name = "simulated"
    simulated = True

    def __init__(self, responder: Responder | None = None, *, model: str = "simulated-1") -> None:
        if not model.startswith("simulated-"):
            raise ValueError("a simulated model name must start with 'simulated-'")
        self.responder: Responder = responder or default_responder
        self.model = model

    @classmethod
    def from_settings(cls, settings: AdapterSettings) -> SimulatedProvider:
        return cls(settings.responder, model=settings.model)  # sends nothing: no throttle

    def __repr__(self) -> str:
        return f"SimulatedProvider(model={self.model!r})"

    def _call_log(self, request: ProviderRequest, observer: AttemptObserver | None) -> CallLog:
        # one attempt, never retried; its id a function of the request; latency 0.0
        return CallLog(
            provider=self.name,
            model=self.model,
            cell_id=request.cell_id,
            observer=observer,
            policy=RetryPolicy(max_retries=0),
            simulated=True,
            id_factory=_attempt_id,
            clock=_no_time,
        )

    async def _attempt(self, request: ProviderRequest, log: CallLog) -> Outcome:
        request_bytes = request.canonical()
        slot = await log.begin(request_bytes, retry=False)
        reply = self.responder(request, simulated_rng(request))
        if not isinstance(reply, SimulatedReply):
            raise TypeError("a responder must return a SimulatedReply")
        response: ProviderResponse | None = None
        failure = reply.failure
        if failure is not None:
            payload: dict[str, Any] = {"simulated": True, "failure": failure.to_json()}
            slot.response_bytes = canonical_bytes(payload)
            slot.status = failure.status
        else:
            parts: list[Part] = []
            if reply.text is not None:
                parts.append(Part.of_text(reply.text))
            parts.extend(Part(function_call=c) for c in reply.function_calls)
            draft = {
                "text": reply.text,
                "structured": reply.structured,
                "function_calls": [c.to_json() for c in reply.function_calls],
                "finish_reason": reply.finish_reason,
            }
            out_tokens = _tokens(len(canonical_bytes(draft)))
            in_tokens = _tokens(len(request_bytes))
            usage = Usage(in_tokens, out_tokens, in_tokens + out_tokens)
            response_id = (
                "sim-"
                + hashlib.sha256(_DOMAIN + request_bytes + canonical_bytes(draft)).hexdigest()[:32]
            )
            response = ProviderResponse(
                text=reply.text,
                structured=reply.structured,
                function_calls=reply.function_calls,
                finish_reason=reply.finish_reason,
                usage=usage,
                model_version=self.model,
                response_id=response_id,
                provider=self.name,
                simulated=True,
                message=Message("model", tuple(parts)),
            )
            slot.response_bytes = canonical_bytes(response.to_json())
            slot.status = 200
        log.mark_end(slot, latency=0.0)
        return response, failure


# -- the default responder (smoke use) --------------------------------------------------------


def example_from_schema(schema: Mapping[str, Any], *, depth: int = 0) -> Any:
    """A deterministic example value satisfying the simple JSON schema shapes tools use."""
    if depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return example_from_schema(schema[key][0], depth=depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        required = schema.get("required")
        names = required if isinstance(required, list) else sorted(props)
        return {n: example_from_schema(props.get(n, {}), depth=depth + 1) for n in names}
    if kind == "array":
        n = int(schema.get("minItems", 0) or 0)
        item = schema.get("items") or {}
        return [example_from_schema(item, depth=depth + 1) for _ in range(max(n, 1 if item else 0))]
    if kind == "string":
        if schema.get("format") == "date":
            return "2024-01-01"
        return "example".ljust(int(schema.get("minLength", 0) or 0), "x")
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0.0))
    if kind == "boolean":
        return False
    return None


def default_responder(request: ProviderRequest, rng: random.Random) -> SimulatedReply:
    """Calls the first declared tool with schema-derived example arguments; else answers.

    With a response schema it returns a schema-derived example as structured output. ``rng`` is
    unused on purpose: the smoke reply is a fixed function of the request.
    """
    del rng
    if request.tools:
        tool = request.tools[0]
        args = example_from_schema(tool.parameters)
        call = FunctionCall(tool.name, args if isinstance(args, dict) else {}, "sim-call-1")
        return SimulatedReply(function_calls=(call,))
    if request.response_schema is not None:
        value = example_from_schema(request.response_schema)
        return SimulatedReply(text=canonical_bytes(value).decode("utf-8"), structured=value)
    return SimulatedReply(text="simulated reply")
