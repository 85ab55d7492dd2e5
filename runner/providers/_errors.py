"""Provider errors (raised) and the typed failure of one provider call (returned).

Tree (all under :class:`runner.errors.ProviderError`)::

    ProviderError
    ├── EgressRefused      the egress guard refused a request to another origin
    ├── CredentialError    the credential could not be loaded or was refused (never names its value)
    └── ProviderCallFailed raised only by callers that want an exception from a ProviderFailure

Provider-side failures of a call (HTTP status, transport, unparseable body, ...) are NOT raised
by ``generate()``: they come back as a :class:`ProviderFailure` inside the result, so they stay in
the study's denominator and the policies map them to ``continue``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from runner.canonical import JsonRecord, RecordFormatError, read_str
from runner.errors import ExitCategory, ProviderError

__all__ = [
    "FAILURE_CLASSES",
    "FAILURE_KINDS",
    "MODEL_OUTPUT_KINDS",
    "RETRYABLE_KINDS",
    "TRANSPORT_KINDS",
    "CredentialError",
    "EgressRefused",
    "ProviderCallFailed",
    "ProviderFailure",
    "failure_class",
    "failure_of",
]

# Every kind of failure a call can end in. Part of the attempt-journal format.
FAILURE_KINDS: dict[str, str] = {
    "connect_failed": "the connection could not be opened (refused, unreachable, DNS)",
    "closed_before_response": "the connection was closed or reset before a response head arrived",
    "send_failed": "the request could not be written completely",
    "timeout_before_response": "no response head arrived within the timeout (request was sent)",
    "timeout_after_output": "the response began but did not finish within the timeout",
    "transport_after_output": "the connection broke after the response began",
    "protocol_error": "the peer spoke malformed HTTP",
    "rate_limited": "HTTP 429 (Retry-After recorded when given)",
    "client_error": "HTTP 4xx other than 429",
    "server_error": "HTTP 5xx",
    "http_status": "an HTTP status that is neither 2xx, 4xx nor 5xx",
    "unparseable": "the response body is not the JSON shape the API promises (or is truncated)",
    "malformed_output": "the API reply is well-formed but the model's content is not (a tool "
    "call's arguments are not a JSON object)",
    "empty_response": "the response carried no candidate/choice (blocked or filtered)",
    "egress_refused": "the egress guard refused the request; nothing was sent",
    "request_invalid": "the SDK refused to build the request; nothing was sent",
    "sdk_error": "the SDK raised an error class that does not fit another kind",
    "simulated": "the simulated responder scripted a failure",
}


# The two classes of failure (docs/providers.md "Running against a paid API").
FAILURE_CLASSES: dict[str, str] = {
    "transport": "the API or the way to it failed (connection, timeout, 429, 5xx, a body that is "
    "not the API's JSON or is truncated, a request that could not be sent): no outcome of the "
    "model; retried once, then halts the run (on_transport_failure = \"halt\") or is recorded",
    "model_output": "the API answered well-formed but the model's answer is unusable (no "
    "candidate, malformed tool-call arguments, a scripted simulated failure): part of the "
    "outcome, kept in the denominator",
}

MODEL_OUTPUT_KINDS = frozenset({"empty_response", "malformed_output", "simulated"})
"""Failure kinds of the ``model_output`` class; every other kind is ``transport``."""

TRANSPORT_KINDS = frozenset(FAILURE_KINDS) - MODEL_OUTPUT_KINDS
"""Failure kinds of the ``transport`` class."""

RETRYABLE_KINDS = TRANSPORT_KINDS - {"egress_refused", "request_invalid", "client_error"}
"""Transport kinds the single identical retry may follow (not a request that was never sent, nor
a 4xx other than 429: the server would answer the same bytes the same way again)."""


def failure_class(kind: str) -> str:
    """``"transport"`` or ``"model_output"``: the class of failure kind ``kind``.

    Raises:
        ValueError: ``kind`` is not a key of :data:`FAILURE_KINDS`.
    """
    if kind not in FAILURE_KINDS:
        raise ValueError(f"unknown failure kind {kind!r}")
    return "model_output" if kind in MODEL_OUTPUT_KINDS else "transport"


def _read_kind(value: object, path: str) -> str:
    kind = read_str(value, path)
    if kind not in FAILURE_KINDS:
        raise RecordFormatError(path, f"unknown failure kind {kind[:40]!r}")
    return kind


@dataclass(frozen=True)
class ProviderFailure(JsonRecord):
    """Why a provider call produced no usable response. Never contains the credential.

    ``kind`` is a key of :data:`FAILURE_KINDS`; ``error_class`` names the foreign exception class
    (or ``"HTTP <status>"``); ``detail`` is a short redacted one-line description.
    """

    _path = "failure"

    kind: Annotated[str, _read_kind]
    detail: str
    status: int | None = None
    retry_after_s: float | None = None
    error_class: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAILURE_KINDS:
            raise ValueError(f"unknown failure kind {self.kind!r}")

    @property
    def transport(self) -> bool:
        """Whether this failure is of the ``transport`` class (see :data:`FAILURE_CLASSES`)."""
        return self.kind in TRANSPORT_KINDS

    def as_error(self) -> ProviderCallFailed:
        return ProviderCallFailed(self)


class EgressRefused(ProviderError):
    """A request to an origin other than the configured provider origin was refused."""

    exit_category = ExitCategory.USAGE


class CredentialError(ProviderError):
    """The credential is missing, unreadable, too widely readable, or malformed."""

    exit_category = ExitCategory.USAGE


class ProviderCallFailed(ProviderError):
    """Raised form of a :class:`ProviderFailure`, for callers that prefer an exception (CLI)."""

    exit_category = ExitCategory.RUNTIME

    def __init__(self, failure: ProviderFailure) -> None:
        status = f" (HTTP {failure.status})" if failure.status is not None else ""
        super().__init__(f"provider call failed: {failure.kind}{status}: {failure.detail}")
        self.failure = failure


def failure_of(
    kind: str,
    exc: BaseException | None,
    *,
    redact: Callable[[str], str],
    detail: str | None = None,
    status: int | None = None,
    retry_after_s: float | None = None,
    no_exception_class: str | None = None,
) -> ProviderFailure:
    """A :class:`ProviderFailure` whose detail is one redacted line (from ``detail`` or the
    exception's first line); ``error_class`` names the exception, else ``no_exception_class``."""
    text = detail if detail is not None else (str(exc).splitlines() or [""])[0][:300]
    return ProviderFailure(
        kind=kind,
        detail=redact(text),
        status=status,
        retry_after_s=retry_after_s,
        error_class=type(exc).__name__ if exc is not None else no_exception_class,
    )
