"""The typed provider interface: requests, responses, attempt records, results (docs/providers.md).

Every value here is a frozen dataclass with ``to_json()`` (a :class:`runner.canonical.JsonRecord`:
its fields are declared once); the JSON forms are what the attempt journal and the store keep.
Each record also reads what it writes: ``from_json`` is strict
(every field present, nothing extra, each of its JSON type), raises
:class:`runner.canonical.RecordFormatError` naming the path, and gives back a value whose
``to_json()`` equals the object read. Nothing here ever holds the credential.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from runner.canonical import (
    OMIT,
    Count,
    Digest,
    JsonRecord,
    NonEmptyStr,
    RecordFormatError,
    canonical_bytes,
    spec,
)
from runner.providers._cost import PriceTable
from runner.providers._errors import ProviderFailure

__all__ = [
    "AttemptObserver",
    "AttemptRecord",
    "FunctionCall",
    "FunctionResponse",
    "GenerationConfig",
    "Message",
    "Part",
    "Provider",
    "ProviderRequest",
    "ProviderResponse",
    "ProviderResult",
    "RawExchange",
    "ToolDecl",
    "Usage",
]

Role = Literal["user", "model"]

@dataclass(frozen=True)
class GenerationConfig(JsonRecord):
    """Sampling parameters; frozen in the study lock."""

    temperature: float
    seed: int
    max_output_tokens: int
    top_p: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, int | float):
            raise TypeError("temperature must be a number")
        if not (0.0 <= float(self.temperature) <= 2.0) or not math.isfinite(self.temperature):
            raise ValueError("temperature must be within [0, 2]")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError("seed must be an int")
        if not (-(2**31) <= self.seed < 2**31):
            raise ValueError("seed must fit in a signed 32-bit integer")
        if isinstance(self.max_output_tokens, bool) or not isinstance(self.max_output_tokens, int):
            raise TypeError("max_output_tokens must be an int")
        if self.max_output_tokens <= 0:
            raise ValueError("max_output_tokens must be positive")
        if self.top_p is not None and not (0.0 < float(self.top_p) <= 1.0):
            raise ValueError("top_p must be within (0, 1]")

    _path = "generation"


@dataclass(frozen=True)
class ToolDecl(JsonRecord):
    """A function the model may call; ``parameters`` is a JSON schema object."""

    _path = "tool"

    name: NonEmptyStr
    description: str
    parameters: Mapping[str, Any]

@dataclass(frozen=True)
class FunctionCall(JsonRecord):
    _path = "function_call"

    name: str
    args: Mapping[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class FunctionResponse(JsonRecord):
    _path = "function_response"

    name: str
    response: Mapping[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class Part(JsonRecord):
    """Exactly one of ``text``, ``function_call``, ``function_response``."""

    _path = "part"

    text: str | None = field(default=None, metadata=OMIT)
    function_call: FunctionCall | None = field(default=None, metadata=OMIT)
    function_response: FunctionResponse | None = field(default=None, metadata=OMIT)

    def __post_init__(self) -> None:
        set_fields = sum(
            x is not None for x in (self.text, self.function_call, self.function_response)
        )
        if set_fields != 1:
            raise ValueError("a Part holds exactly one of text, function_call, function_response")

    @classmethod
    def of_text(cls, text: str) -> Part:
        return cls(text=text)

    @classmethod
    def of_call(cls, name: str, args: Mapping[str, Any], id: str | None = None) -> Part:
        return cls(function_call=FunctionCall(name, args, id))

    @classmethod
    def of_response(cls, name: str, response: Mapping[str, Any], id: str | None = None) -> Part:
        return cls(function_response=FunctionResponse(name, response, id))

    @classmethod
    def _object_of(cls, obj: object, path: str, allowed: tuple[str, ...],
                   required: tuple[str, ...]) -> Mapping[str, Any]:
        # one key, one of the three, before any of them is read (the shape, not a layout)
        if not isinstance(obj, dict) or len(obj) != 1:
            raise RecordFormatError(path, "expected an object with exactly one of "
                                    "text, function_call, function_response")
        return super()._object_of(obj, path, allowed, required)


@dataclass(frozen=True)
class Message(JsonRecord):
    """One turn of the conversation.

    ``native`` is the provider's own object for a model turn (a google-genai ``Content`` with its
    thought signatures, or an OpenAI assistant message dict). Adapters replay it unchanged on the
    next turn; it is not part of ``to_json()`` or of equality.
    """

    _path = "message"

    role: Role
    parts: tuple[Part, ...]
    native: object | None = field(default=None, compare=False, repr=False,
                                  metadata=spec(skip=True))

    def __post_init__(self) -> None:
        if self.role not in ("user", "model"):
            raise ValueError("Message.role must be 'user' or 'model'")
        if not isinstance(self.parts, tuple):
            raise TypeError("Message.parts must be a tuple")

    @classmethod
    def user_text(cls, text: str) -> Message:
        return cls("user", (Part.of_text(text),))

@dataclass(frozen=True)
class ProviderRequest(JsonRecord):
    """A typed request. ``metadata`` carries cell_id, seed, ... and never the credential."""

    _path = "request"

    role: NonEmptyStr
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolDecl, ...]
    response_schema: Mapping[str, Any] | None
    generation: GenerationConfig
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.messages, tuple) or not isinstance(self.tools, tuple):
            raise TypeError("messages and tools must be tuples")
        if not self.messages:
            raise ValueError("a request needs at least one message")

    @property
    def cell_id(self) -> str | None:
        value = self.metadata.get("cell_id")
        return value if isinstance(value, str) else None

    def canonical(self) -> bytes:
        """RFC 8785 bytes of :meth:`to_json` (FormatError if metadata is not JSON)."""
        return canonical_bytes(self.to_json())


@dataclass(frozen=True)
class Usage(JsonRecord):
    _path = "usage"

    input_tokens: Count = 0
    output_tokens: Count = 0
    total_tokens: Count = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
        )

@dataclass(frozen=True)
class ProviderResponse(JsonRecord):
    """A parsed response; ``message`` is what the caller appends to the history."""

    _path = "response"

    text: str | None
    structured: Any | None
    function_calls: tuple[FunctionCall, ...]
    finish_reason: str | None
    usage: Usage
    model_version: str | None
    response_id: str | None
    provider: NonEmptyStr
    simulated: bool
    message: Message

# Fields of an attempt record that depend on the wall clock or on random ids; they are kept in
# the journal but excluded from anything that must be identical across runs.
VOLATILE_ATTEMPT_FIELDS = ("attempt_id", "started_utc", "ended_utc", "latency_s")


@dataclass(frozen=True)
class AttemptRecord(JsonRecord):
    """One HTTP attempt (or one simulated exchange). ``ended_utc`` is None while in flight.

    ``request_sha256``/``response_sha256`` are ``"sha256:" + hex(sha256(raw bytes))`` of the
    exact bytes in the matching :class:`RawExchange`, so they equal the store's blob digests.
    """

    _path = "attempt"

    attempt_id: NonEmptyStr
    cell_id: str | None
    provider: NonEmptyStr
    model: str
    simulated: bool
    attempt_no: Count
    request_sha256: Digest
    response_sha256: Digest | None
    started_utc: str
    ended_utc: str | None
    latency_s: float | None
    status: int | None
    error_class: str | None
    retry: bool
    usage: Usage | None
    retry_after_s: float | None

    def stable_json(self) -> dict[str, Any]:
        """:meth:`to_json` without the wall-clock and random fields (safe to digest)."""
        out = self.to_json()
        for name in VOLATILE_ATTEMPT_FIELDS:
            del out[name]
        return out


@dataclass(frozen=True)
class RawExchange:
    """The exact request body sent and response body received (None if none arrived)."""

    request_bytes: bytes
    response_bytes: bytes | None


@dataclass(frozen=True)
class ProviderResult(JsonRecord):
    """Exactly one of ``response``/``failure`` is set; ``attempts`` and ``raw`` align 1:1."""

    response: ProviderResponse | None
    failure: ProviderFailure | None
    attempts: tuple[AttemptRecord, ...]
    # kept apart, by digest: not part of the JSON
    raw: tuple[RawExchange, ...] = field(metadata=spec(skip=True))

    def __post_init__(self) -> None:
        if (self.response is None) == (self.failure is None):
            raise ValueError("a ProviderResult has exactly one of response and failure")
        if len(self.attempts) != len(self.raw):
            raise ValueError("attempts and raw exchanges must align")

    @property
    def ok(self) -> bool:
        return self.response is not None

    @property
    def usage(self) -> Usage:
        """Usage summed over every attempt (failed attempts usually count zero)."""
        total = Usage()
        for a in self.attempts:
            if a.usage is not None:
                total = total + a.usage
        return total

    def cost_usd(self, price_table: PriceTable) -> float:
        """Sum of :meth:`PriceTable.cost_usd` over every attempt's usage."""
        return sum(
            (price_table.cost_usd(a.usage) for a in self.attempts if a.usage is not None), 0.0
        )

    @classmethod
    def from_json(cls, obj: object, raw: tuple[RawExchange, ...],  # type: ignore[override]
                  path: str = "result") -> ProviderResult:
        """A result as :meth:`to_json` wrote it (for the audit: raw bytes are referenced by
        digest, not inlined), with its raw exchanges (the caller gives them back: one per
        attempt)."""
        return cls._read_json(obj, path, raw=raw)


@runtime_checkable
class AttemptObserver(Protocol):
    """Journal hook: ``begin`` is awaited before an attempt is sent, ``end`` after it ends.

    An exception raised by the observer propagates out of ``generate()`` and, from ``begin``,
    prevents the attempt from being sent.
    """

    async def begin(self, record: AttemptRecord) -> None: ...

    async def end(self, record: AttemptRecord) -> None: ...


@runtime_checkable
class Provider(Protocol):
    name: str
    model: str
    simulated: bool

    async def generate(
        self, request: ProviderRequest, *, observer: AttemptObserver | None = None
    ) -> ProviderResult: ...
