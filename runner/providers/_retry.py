"""The retry policy, as data fixed in the study lock, and the transport-failure classifier.

The protocol (docs/providers.md): exactly one identical retry, after a failure of the
``transport`` class (connection refused, reset or closed, a timeout, HTTP 429 or 5xx, a body that
is not the API's JSON or is truncated; see :data:`runner.providers.FAILURE_CLASSES`). A 429 or
503 that carries ``Retry-After`` is retried after that wait (at most :data:`MAX_RETRY_AFTER_S`).
A failure of the ``model_output`` class (a well-formed reply whose content is unusable) is never
retried: it is the model's answer and stays in the denominator.

A transport failure that survives its retry produces no outcome of the model; what the study does
with it is the lock's ``on_transport_failure`` (``"halt"``: the cell is not committed and the run
halts; ``"record"``: kept as a failure in the denominator). Every attempt, retried or not, stays in
the attempt journal and in the spend.
"""

from __future__ import annotations

import email.utils
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from runner.canonical import JsonObject, JsonRecord, RecordFormatError
from runner.providers._errors import FAILURE_KINDS, RETRYABLE_KINDS

__all__ = [
    "HTTPX_EXCEPTION_KINDS",
    "MAX_RETRY_AFTER_S",
    "PRE_RESPONSE_KINDS",
    "RetryPolicy",
    "classify_httpx_error",
    "kind_for_status",
    "parse_retry_after",
]

# Kinds that happen before any response byte, with the request not (fully) delivered or the
# connection dropped before a response head (a retry of these cannot have been billed twice).
PRE_RESPONSE_KINDS = frozenset({"connect_failed", "closed_before_response", "send_failed"})

MAX_RETRY_AFTER_S = 60.0
"""The longest ``Retry-After`` wait obeyed before the single retry (a longer one is cut to this)."""

_FORMAT = "ect.retry-policy/2"


@dataclass(frozen=True)
class RetryPolicy(JsonRecord):
    """How many identical retries, after which failure kinds. Serialised into the study lock
    (with ``identical_request: true`` and the ``final`` kinds, checked on read)."""

    max_retries: int = 1
    retry_on: frozenset[str] = RETRYABLE_KINDS
    delay_s: float = 0.0

    _format = _FORMAT
    _path = "retry policy"
    _derived = ("identical_request", "final")

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise TypeError("max_retries must be an int")
        if not 0 <= self.max_retries <= 1:
            raise ValueError("the protocol allows at most one retry")
        object.__setattr__(self, "retry_on", frozenset(self.retry_on))
        bad = self.retry_on - RETRYABLE_KINDS
        if bad:
            raise ValueError(
                f"retrying after {sorted(bad)} is not allowed: only transport failures of a "
                "request that was sent may be retried"
            )
        if not math.isfinite(self.delay_s) or not 0 <= self.delay_s <= 60:
            raise ValueError("delay_s must be within [0, 60]")

    def should_retry(self, kind: str, retries_done: int) -> bool:
        return kind in self.retry_on and retries_done < self.max_retries

    def wait_s(self, retry_after_s: float | None) -> float:
        """Seconds to wait before the retry: ``delay_s``, or the server's ``Retry-After`` when it
        asks for longer (capped at :data:`MAX_RETRY_AFTER_S`)."""
        asked = min(retry_after_s, MAX_RETRY_AFTER_S) if retry_after_s is not None else 0.0
        return max(self.delay_s, asked)

    @property
    def identical_request(self) -> bool:
        """A retry sends the identical request bytes (always)."""
        return True

    @property
    def final(self) -> list[str]:
        """The failure kinds never retried."""
        return sorted(set(FAILURE_KINDS) - self.retry_on)

    def _check(self, obj: JsonObject, path: str) -> None:
        if obj["identical_request"] is not True:
            raise RecordFormatError(f"{path}.identical_request", "must be true")
        if obj["final"] != self.final:
            raise RecordFormatError(f"{path}.final", "does not match retry_on")


def kind_for_status(status: int) -> str:
    """Failure kind for a non-2xx HTTP status."""
    if status == 429:
        return "rate_limited"
    if 400 <= status < 500:
        return "client_error"
    if 500 <= status < 600:
        return "server_error"
    return "http_status"


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date); None if absent/invalid."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, round(delta, 3))


# Every exception class httpx exports -> (kind before a response head, kind after it began).
# The most specific class wins (MRO order); tests/providers check every class is listed.
HTTPX_EXCEPTION_KINDS: dict[type[Exception], tuple[str, str]] = {
    httpx.ConnectTimeout: ("connect_failed", "connect_failed"),
    httpx.PoolTimeout: ("connect_failed", "connect_failed"),
    httpx.ConnectError: ("connect_failed", "connect_failed"),
    httpx.ProxyError: ("connect_failed", "connect_failed"),
    httpx.WriteTimeout: ("send_failed", "send_failed"),
    httpx.WriteError: ("send_failed", "send_failed"),
    httpx.ReadTimeout: ("timeout_before_response", "timeout_after_output"),
    httpx.TimeoutException: ("timeout_before_response", "timeout_after_output"),
    httpx.ReadError: ("closed_before_response", "transport_after_output"),
    httpx.CloseError: ("closed_before_response", "transport_after_output"),
    httpx.NetworkError: ("closed_before_response", "transport_after_output"),
    httpx.RemoteProtocolError: ("protocol_error", "transport_after_output"),
    httpx.LocalProtocolError: ("request_invalid", "request_invalid"),
    httpx.ProtocolError: ("protocol_error", "transport_after_output"),
    httpx.UnsupportedProtocol: ("request_invalid", "request_invalid"),
    httpx.DecodingError: ("unparseable", "unparseable"),
    httpx.TooManyRedirects: ("protocol_error", "protocol_error"),
    httpx.TransportError: ("protocol_error", "transport_after_output"),
    httpx.RequestError: ("protocol_error", "transport_after_output"),
    httpx.HTTPStatusError: ("http_status", "http_status"),
    httpx.HTTPError: ("sdk_error", "sdk_error"),
    httpx.InvalidURL: ("request_invalid", "request_invalid"),
    httpx.CookieConflict: ("request_invalid", "request_invalid"),
    httpx.StreamConsumed: ("sdk_error", "sdk_error"),
    httpx.StreamClosed: ("sdk_error", "sdk_error"),
    httpx.ResponseNotRead: ("sdk_error", "sdk_error"),
    httpx.RequestNotRead: ("sdk_error", "sdk_error"),
    httpx.StreamError: ("sdk_error", "sdk_error"),
}

# h11/httpcore say this when the peer closed (or reset) before a complete response head.
_CLOSED_BEFORE_HEAD = "without sending a response"


def classify_httpx_error(exc: BaseException, *, response_started: bool) -> str:
    """The failure kind of an httpx exception, given whether a response head had arrived."""
    if (
        not response_started
        and isinstance(exc, httpx.RemoteProtocolError)
        and _CLOSED_BEFORE_HEAD in str(exc)
    ):
        return "closed_before_response"
    if isinstance(exc, httpx.HTTPStatusError):
        return kind_for_status(exc.response.status_code)
    for cls in type(exc).__mro__:
        kinds = HTTPX_EXCEPTION_KINDS.get(cls)
        if kinds is not None:
            return kinds[1] if response_started else kinds[0]
    return "sdk_error"
