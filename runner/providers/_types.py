"""The typed provider interface: requests, responses, attempt records, results (docs/providers.md).

Every value here is a frozen dataclass with ``to_json()``; the JSON forms are what the attempt
journal and the store keep. Each record also reads what it writes: ``from_json`` is strict
(every field present, nothing extra, each of its JSON type), raises
:class:`runner.canonical.RecordFormatError` naming the path, and gives back a value whose
``to_json()`` equals the object read. Nothing here ever holds the credential.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar, runtime_checkable

from runner.canonical import (
    RecordFormatError,
    canonical_bytes,
    read_bool,
    read_digest,
    read_int,
    read_json_object,
    read_list,
    read_number,
    read_object,
    read_opt_digest,
    read_opt_object,
    read_opt_str,
    read_str,
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

_T = TypeVar("_T")


def _opt(reader: Callable[[object, str], _T], value: object, path: str) -> _T | None:
    """``None`` for JSON null, else ``reader(value, path)``."""
    return None if value is None else reader(value, path)


def _build(path: str, factory: Callable[..., _T], /, **fields: object) -> _T:
    """``factory(**fields)``, its own validation failures reported at ``path``."""
    try:
        return factory(**fields)
    except (TypeError, ValueError) as e:
        raise RecordFormatError(path, str(e)) from None


def _list_of(reader: Callable[[object, str], _T], value: object, path: str) -> tuple[_T, ...]:
    return tuple(reader(x, f"{path}[{i}]") for i, x in enumerate(read_list(value, path)))


@dataclass(frozen=True)
class GenerationConfig:
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

    def to_json(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "seed": self.seed,
            "max_output_tokens": self.max_output_tokens,
            "top_p": self.top_p,
        }

    @classmethod
    def from_json(cls, obj: object, path: str = "generation") -> GenerationConfig:
        g = read_object(obj, path, ("temperature", "seed", "max_output_tokens", "top_p"))
        return _build(
            path, cls,
            temperature=read_number(g["temperature"], f"{path}.temperature"),
            seed=read_int(g["seed"], f"{path}.seed"),
            max_output_tokens=read_int(g["max_output_tokens"], f"{path}.max_output_tokens"),
            top_p=_opt(read_number, g["top_p"], f"{path}.top_p"),
        )


@dataclass(frozen=True)
class ToolDecl:
    """A function the model may call; ``parameters`` is a JSON schema object."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }

    @classmethod
    def from_json(cls, obj: object, path: str = "tool") -> ToolDecl:
        t = read_object(obj, path, ("name", "description", "parameters"))
        return cls(
            name=read_str(t["name"], f"{path}.name", nonempty=True),
            description=read_str(t["description"], f"{path}.description"),
            parameters=read_json_object(t["parameters"], f"{path}.parameters"),
        )


@dataclass(frozen=True)
class FunctionCall:
    name: str
    args: Mapping[str, Any]
    id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "args": dict(self.args), "id": self.id}

    @classmethod
    def from_json(cls, obj: object, path: str = "function_call") -> FunctionCall:
        c = read_object(obj, path, ("name", "args", "id"))
        return cls(read_str(c["name"], f"{path}.name"), read_json_object(c["args"], f"{path}.args"),
                   read_opt_str(c["id"], f"{path}.id"))


@dataclass(frozen=True)
class FunctionResponse:
    name: str
    response: Mapping[str, Any]
    id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "response": dict(self.response), "id": self.id}

    @classmethod
    def from_json(cls, obj: object, path: str = "function_response") -> FunctionResponse:
        r = read_object(obj, path, ("name", "response", "id"))
        return cls(read_str(r["name"], f"{path}.name"),
                   read_json_object(r["response"], f"{path}.response"),
                   read_opt_str(r["id"], f"{path}.id"))


@dataclass(frozen=True)
class Part:
    """Exactly one of ``text``, ``function_call``, ``function_response``."""

    text: str | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None

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

    def to_json(self) -> dict[str, Any]:
        if self.text is not None:
            return {"text": self.text}
        if self.function_call is not None:
            return {"function_call": self.function_call.to_json()}
        assert self.function_response is not None
        return {"function_response": self.function_response.to_json()}

    @classmethod
    def from_json(cls, obj: object, path: str = "part") -> Part:
        """One of ``{"text": ...}``, ``{"function_call": ...}``, ``{"function_response": ...}``."""
        if not isinstance(obj, dict) or len(obj) != 1:
            raise RecordFormatError(path, "expected an object with exactly one of text, "
                                          "function_call, function_response")
        (key,) = obj
        if key == "text":
            return cls(text=read_str(obj["text"], f"{path}.text"))
        if key == "function_call":
            return cls(function_call=FunctionCall.from_json(obj[key], f"{path}.{key}"))
        if key == "function_response":
            return cls(function_response=FunctionResponse.from_json(obj[key], f"{path}.{key}"))
        raise RecordFormatError(path, f"unknown field {str(key)[:60]!r}")


@dataclass(frozen=True)
class Message:
    """One turn of the conversation.

    ``native`` is the provider's own object for a model turn (a google-genai ``Content`` with its
    thought signatures, or an OpenAI assistant message dict). Adapters replay it unchanged on the
    next turn; it is not part of ``to_json()`` or of equality.
    """

    role: Role
    parts: tuple[Part, ...]
    native: object | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.role not in ("user", "model"):
            raise ValueError("Message.role must be 'user' or 'model'")
        if not isinstance(self.parts, tuple):
            raise TypeError("Message.parts must be a tuple")

    @classmethod
    def user_text(cls, text: str) -> Message:
        return cls("user", (Part.of_text(text),))

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "parts": [p.to_json() for p in self.parts]}

    @classmethod
    def from_json(cls, obj: object, path: str = "message") -> Message:
        """A message as :meth:`to_json` wrote it (``native`` is not part of the JSON: ``None``)."""
        m = read_object(obj, path, ("role", "parts"))
        role = read_str(m["role"], f"{path}.role")
        parts = _list_of(Part.from_json, m["parts"], f"{path}.parts")
        if role == "user":
            return cls("user", parts)
        if role == "model":
            return cls("model", parts)
        raise RecordFormatError(f"{path}.role", f"expected 'user' or 'model', got {role[:40]!r}")


@dataclass(frozen=True)
class ProviderRequest:
    """A typed request. ``metadata`` carries cell_id, seed, ... and never the credential."""

    role: str
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

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "system": self.system,
            "messages": [m.to_json() for m in self.messages],
            "tools": [t.to_json() for t in self.tools],
            "response_schema": dict(self.response_schema)
            if self.response_schema is not None
            else None,
            "generation": self.generation.to_json(),
            "metadata": dict(self.metadata),
        }

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "role", "system", "messages", "tools", "response_schema", "generation", "metadata")

    @classmethod
    def from_json(cls, obj: object, path: str = "request") -> ProviderRequest:
        r = read_object(obj, path, cls._FIELDS)
        return _build(
            path, cls,
            role=read_str(r["role"], f"{path}.role", nonempty=True),
            system=read_str(r["system"], f"{path}.system"),
            messages=_list_of(Message.from_json, r["messages"], f"{path}.messages"),
            tools=_list_of(ToolDecl.from_json, r["tools"], f"{path}.tools"),
            response_schema=read_opt_object(r["response_schema"], f"{path}.response_schema"),
            generation=GenerationConfig.from_json(r["generation"], f"{path}.generation"),
            metadata=read_json_object(r["metadata"], f"{path}.metadata"),
        )

    def canonical(self) -> bytes:
        """RFC 8785 bytes of :meth:`to_json` (FormatError if metadata is not JSON)."""
        return canonical_bytes(self.to_json())


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }

    @classmethod
    def from_json(cls, obj: object, path: str = "usage") -> Usage:
        u = read_object(obj, path, ("input_tokens", "output_tokens", "total_tokens"))
        return cls(*(read_int(u[k], f"{path}.{k}", minimum=0)
                     for k in ("input_tokens", "output_tokens", "total_tokens")))


@dataclass(frozen=True)
class ProviderResponse:
    """A parsed response; ``message`` is what the caller appends to the history."""

    text: str | None
    structured: Any | None
    function_calls: tuple[FunctionCall, ...]
    finish_reason: str | None
    usage: Usage
    model_version: str | None
    response_id: str | None
    provider: str
    simulated: bool
    message: Message

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "structured": self.structured,
            "function_calls": [c.to_json() for c in self.function_calls],
            "finish_reason": self.finish_reason,
            "usage": self.usage.to_json(),
            "model_version": self.model_version,
            "response_id": self.response_id,
            "provider": self.provider,
            "simulated": self.simulated,
            "message": self.message.to_json(),
        }

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "text", "structured", "function_calls", "finish_reason", "usage", "model_version",
        "response_id", "provider", "simulated", "message")

    @classmethod
    def from_json(cls, obj: object, path: str = "response") -> ProviderResponse:
        """A parsed response as :meth:`to_json` wrote it (``structured`` is open JSON)."""
        r = read_object(obj, path, cls._FIELDS)
        return cls(
            text=read_opt_str(r["text"], f"{path}.text"),
            structured=r["structured"],
            function_calls=_list_of(FunctionCall.from_json, r["function_calls"],
                                    f"{path}.function_calls"),
            finish_reason=read_opt_str(r["finish_reason"], f"{path}.finish_reason"),
            usage=Usage.from_json(r["usage"], f"{path}.usage"),
            model_version=read_opt_str(r["model_version"], f"{path}.model_version"),
            response_id=read_opt_str(r["response_id"], f"{path}.response_id"),
            provider=read_str(r["provider"], f"{path}.provider", nonempty=True),
            simulated=read_bool(r["simulated"], f"{path}.simulated"),
            message=Message.from_json(r["message"], f"{path}.message"),
        )


# Fields of an attempt record that depend on the wall clock or on random ids; they are kept in
# the journal but excluded from anything that must be identical across runs.
VOLATILE_ATTEMPT_FIELDS = ("attempt_id", "started_utc", "ended_utc", "latency_s")


@dataclass(frozen=True)
class AttemptRecord:
    """One HTTP attempt (or one simulated exchange). ``ended_utc`` is None while in flight.

    ``request_sha256``/``response_sha256`` are ``"sha256:" + hex(sha256(raw bytes))`` of the
    exact bytes in the matching :class:`RawExchange`, so they equal the store's blob digests.
    """

    attempt_id: str
    cell_id: str | None
    provider: str
    model: str
    simulated: bool
    attempt_no: int
    request_sha256: str
    response_sha256: str | None
    started_utc: str
    ended_utc: str | None
    latency_s: float | None
    status: int | None
    error_class: str | None
    retry: bool
    usage: Usage | None
    retry_after_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt_id": self.attempt_id,
            "cell_id": self.cell_id,
            "provider": self.provider,
            "model": self.model,
            "simulated": self.simulated,
            "attempt_no": self.attempt_no,
            "request_sha256": self.request_sha256,
            "response_sha256": self.response_sha256,
            "started_utc": self.started_utc,
            "ended_utc": self.ended_utc,
            "latency_s": self.latency_s,
            "status": self.status,
            "error_class": self.error_class,
            "retry": self.retry,
            "usage": self.usage.to_json() if self.usage is not None else None,
            "retry_after_s": self.retry_after_s,
        }

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "attempt_id", "cell_id", "provider", "model", "simulated", "attempt_no", "request_sha256",
        "response_sha256", "started_utc", "ended_utc", "latency_s", "status", "error_class",
        "retry", "usage", "retry_after_s")

    @classmethod
    def from_json(cls, obj: object, path: str = "attempt") -> AttemptRecord:
        """An attempt as :meth:`to_json` wrote it (the journal's and the audit's form)."""
        a = read_object(obj, path, cls._FIELDS)
        return cls(
            attempt_id=read_str(a["attempt_id"], f"{path}.attempt_id", nonempty=True),
            cell_id=read_opt_str(a["cell_id"], f"{path}.cell_id"),
            provider=read_str(a["provider"], f"{path}.provider", nonempty=True),
            model=read_str(a["model"], f"{path}.model"),
            simulated=read_bool(a["simulated"], f"{path}.simulated"),
            attempt_no=read_int(a["attempt_no"], f"{path}.attempt_no", minimum=0),
            request_sha256=read_digest(a["request_sha256"], f"{path}.request_sha256"),
            response_sha256=read_opt_digest(a["response_sha256"], f"{path}.response_sha256"),
            started_utc=read_str(a["started_utc"], f"{path}.started_utc"),
            ended_utc=read_opt_str(a["ended_utc"], f"{path}.ended_utc"),
            latency_s=_opt(read_number, a["latency_s"], f"{path}.latency_s"),
            status=_opt(read_int, a["status"], f"{path}.status"),
            error_class=read_opt_str(a["error_class"], f"{path}.error_class"),
            retry=read_bool(a["retry"], f"{path}.retry"),
            usage=_opt(Usage.from_json, a["usage"], f"{path}.usage"),
            retry_after_s=_opt(read_number, a["retry_after_s"], f"{path}.retry_after_s"),
        )

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
class ProviderResult:
    """Exactly one of ``response``/``failure`` is set; ``attempts`` and ``raw`` align 1:1."""

    response: ProviderResponse | None
    failure: ProviderFailure | None
    attempts: tuple[AttemptRecord, ...]
    raw: tuple[RawExchange, ...]

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

    def to_json(self) -> dict[str, Any]:
        """JSON form for the audit (raw bytes are referenced by digest, not inlined)."""
        return {
            "response": self.response.to_json() if self.response is not None else None,
            "failure": self.failure.to_json() if self.failure is not None else None,
            "attempts": [a.to_json() for a in self.attempts],
        }

    @classmethod
    def from_json(cls, obj: object, raw: tuple[RawExchange, ...],
                  path: str = "result") -> ProviderResult:
        """A result as :meth:`to_json` wrote it, with its raw exchanges (kept apart, by digest,
        so the caller gives them back: one per attempt)."""
        r = read_object(obj, path, ("response", "failure", "attempts"))
        return _build(
            path, cls,
            response=_opt(ProviderResponse.from_json, r["response"], f"{path}.response"),
            failure=_opt(ProviderFailure.from_json, r["failure"], f"{path}.failure"),
            attempts=_list_of(AttemptRecord.from_json, r["attempts"], f"{path}.attempts"),
            raw=raw,
        )


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
