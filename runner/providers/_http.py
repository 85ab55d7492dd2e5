"""Attempt bookkeeping shared by the HTTP adapters: one place that sends, retries and records.

:class:`RecordingTransport` sits between an httpx ``AsyncClient`` and the egress guard. For every
HTTP attempt it (0) waits for the provider's :class:`Throttle`, (1) awaits the observer's
``begin`` before a byte is sent, (2) sends, (3) reads the whole body within the per-request
timeout, keeping the exact request and response bytes, and (4) applies the :class:`RetryPolicy`
to a transport failure (an exception, HTTP 429/5xx, a body that is not a JSON object) by waiting
(``Retry-After`` obeyed) and re-sending the very same request object, so a retry is
byte-identical.
The last attempt is left open for the adapter, which knows whether the body parsed, and closes
it (awaiting the observer's ``end``) through :class:`CallLog.finish`.

Which call an HTTP request belongs to travels in a context variable, so one provider (and one
SDK client) can serve concurrent cells.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio
import httpx

from runner.canonical import loads_strict, raw_digest
from runner.errors import FormatError
from runner.providers._errors import MODEL_OUTPUT_KINDS, EgressRefused, ProviderFailure
from runner.providers._retry import (
    RetryPolicy,
    classify_httpx_error,
    kind_for_status,
    parse_retry_after,
)
from runner.providers._throttle import Throttle, estimate_tokens
from runner.providers._types import (
    AttemptObserver,
    AttemptRecord,
    ProviderResponse,
    ProviderResult,
    RawExchange,
    Usage,
)

__all__ = ["CallLog", "ObserverFailed", "RecordingTransport", "ReplayCache", "replayable",
           "run_call", "utc_now"]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def replayable(attempt: AttemptRecord, response: bytes) -> bool:
    """Whether a journaled attempt may stand in for sending its request again: the API answered
    it with a 2xx status and a complete, well-formed reply (``error_class`` None, or a
    model-output failure: the model's own answer, never retried), and ``response`` are the very
    bytes it journaled. A malformed or truncated body, an HTTP error, a timeout or a closed
    connection is not a reply of the model: its request is sent again (with its one retry)."""
    return (attempt.status is not None and 200 <= attempt.status < 300
            and (attempt.error_class is None or attempt.error_class in MODEL_OUTPUT_KINDS)
            and attempt.response_sha256 == raw_digest(response)
            and _status_kind(attempt.status, response) is None)


class ReplayCache:
    """Responses a resumed run already paid for: journaled in an earlier session for cells that
    never committed, keyed by ``(cell_id, request_sha256)`` of the exact request bytes.

    Only a complete, well-formed success is kept (:func:`replayable`); :meth:`add` refuses
    anything else and counts it in ``refused``. The recording transport takes a matching entry
    instead of sending the request again (the attempt it records is the journaled one: same id,
    times and usage, so it is counted once); a request whose bytes differ from every journaled
    one is sent. Each entry serves once.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], list[tuple[AttemptRecord, bytes]]] = {}
        self.replayed = 0
        self.refused = 0

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())

    def add(self, cell_id: str, attempt: AttemptRecord, response: bytes) -> bool:
        """Keep ``attempt`` for replay if it is :func:`replayable`; return whether it was."""
        if not replayable(attempt, response):
            self.refused += 1
            return False
        self._entries.setdefault((cell_id, attempt.request_sha256), []).append(
            (attempt, response))
        return True

    def take(self, cell_id: str | None, request_sha256: str) -> tuple[AttemptRecord, bytes] | None:
        if cell_id is None:
            return None
        found = self._entries.get((cell_id, request_sha256))
        if not found:
            return None
        self.replayed += 1
        return found.pop(0)


class ObserverFailed(Exception):
    """Carries an observer's exception through the SDK so the adapter re-raises it unchanged."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(type(original).__name__)
        self.original = original


@dataclass
class _Slot:
    attempt_no: int
    attempt_id: str
    request_bytes: bytes
    started_utc: str
    t0: float
    retry: bool
    status: int | None = None
    response_bytes: bytes | None = None
    ended_utc: str | None = None
    latency_s: float | None = None
    kind: str | None = None
    retry_after_s: float | None = None
    usage: Usage | None = None
    closed: bool = False
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    estimated_tokens: int = 0


class CallLog:
    """The attempts of one ``generate()`` call."""

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        cell_id: str | None,
        observer: AttemptObserver | None,
        policy: RetryPolicy,
        simulated: bool = False,
        id_factory: Callable[[int, bytes], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        throttle: Throttle | None = None,
        timeout_s: float | None = None,
        replay: ReplayCache | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.cell_id = cell_id
        self.observer = observer
        self.policy = policy
        self.simulated = simulated
        # an attempt's id from its number and its request bytes (random unless given)
        self._id_factory = id_factory or (lambda _n, _body: uuid.uuid4().hex)
        self._clock = clock
        self.throttle = throttle
        self.timeout_s = timeout_s
        self.replay = replay
        self.slots: list[_Slot] = []

    def record(self, s: _Slot) -> AttemptRecord:
        return AttemptRecord(
            attempt_id=s.attempt_id,
            cell_id=self.cell_id,
            provider=self.provider,
            model=self.model,
            simulated=self.simulated,
            attempt_no=s.attempt_no,
            request_sha256=raw_digest(s.request_bytes),
            response_sha256=raw_digest(s.response_bytes) if s.response_bytes is not None else None,
            started_utc=s.started_utc,
            ended_utc=s.ended_utc,
            latency_s=s.latency_s,
            status=s.status,
            error_class=s.kind,
            retry=s.retry,
            usage=s.usage,
            retry_after_s=s.retry_after_s,
        )

    async def begin(self, request_bytes: bytes, *, retry: bool) -> _Slot:
        n = len(self.slots) + 1
        slot = _Slot(n, self._id_factory(n, request_bytes), request_bytes, utc_now(), self._clock(),
                     retry)
        if self.observer is not None:
            try:
                await self.observer.begin(self.record(slot))
            except Exception as e:
                raise ObserverFailed(e) from e
        self.slots.append(slot)
        return slot

    def adopt(self, request_bytes: bytes, attempt: AttemptRecord, response: bytes,
              *, retry: bool) -> _Slot:
        """Record a journaled attempt of an earlier session as this call's next attempt (a
        replayed response): already journaled, so the observer is not called again."""
        slot = _Slot(len(self.slots) + 1, attempt.attempt_id, request_bytes,
                     attempt.started_utc, self._clock(), retry,
                     status=attempt.status, response_bytes=response,
                     ended_utc=attempt.ended_utc, latency_s=attempt.latency_s,
                     kind=attempt.error_class, usage=attempt.usage, closed=True)
        self.slots.append(slot)
        return slot

    def mark_end(self, slot: _Slot, *, latency: float | None = None) -> None:
        if slot.ended_utc is None:
            slot.ended_utc = utc_now()
            slot.latency_s = latency if latency is not None else round(self._clock() - slot.t0, 6)

    async def close(self, slot: _Slot) -> None:
        if slot.closed:
            return
        self.mark_end(slot)
        slot.closed = True
        if self.observer is not None:
            # An observer that keeps responses (the study's journal, for resume) gets the bytes
            # of an attempt the API answered well-formed.
            keep = getattr(self.observer, "end_with_response", None)
            answered = (slot.status is not None and 200 <= slot.status < 300
                        and slot.response_bytes is not None
                        and (slot.kind is None or slot.kind in MODEL_OUTPUT_KINDS))
            try:
                if keep is not None and answered:
                    await keep(self.record(slot), slot.response_bytes)
                else:
                    await self.observer.end(self.record(slot))
            except Exception as e:
                raise ObserverFailed(e) from e

    async def finish(self, failure: ProviderFailure | None, usage: Usage | None) -> None:
        """Close every open attempt; the last one takes the call's outcome."""
        if not self.slots:
            return
        last = self.slots[-1]
        if not last.closed:
            if failure is not None and last.kind is None:
                last.kind = failure.kind
            if failure is None:
                last.usage = usage
        if self.throttle is not None:
            for s in self.slots:
                if s.usage is not None:
                    self.throttle.settle(s.estimated_tokens, s.usage.total_tokens)
        for s in self.slots:
            await self.close(s)

    def attempts(self) -> tuple[AttemptRecord, ...]:
        return tuple(self.record(s) for s in self.slots)

    def raw(self) -> tuple[RawExchange, ...]:
        return tuple(RawExchange(s.request_bytes, s.response_bytes) for s in self.slots)

    @property
    def last(self) -> _Slot | None:
        return self.slots[-1] if self.slots else None


CURRENT_CALL: ContextVar[CallLog | None] = ContextVar("ect_provider_call", default=None)


class RecordingTransport(httpx.AsyncBaseTransport):
    """Records, journals and (per policy) retries every attempt; see the module docstring."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        log = CURRENT_CALL.get()
        if log is None:
            raise RuntimeError("a provider HTTP request was made outside generate()")
        body = await request.aread()
        estimated = estimate_tokens(body)
        retries = 0
        while True:
            hit = (log.replay.take(log.cell_id, raw_digest(body)) if log.replay is not None
                   else None)
            if hit is not None:  # paid for in an earlier session: not sent again
                slot = log.adopt(body, hit[0], hit[1], retry=retries > 0)
                return httpx.Response(slot.status or 200, stream=httpx.ByteStream(hit[1]),
                                      headers={"content-type": "application/json"},
                                      request=request)
            if log.throttle is not None:
                await log.throttle.acquire(estimated)
            slot = await log.begin(body, retry=retries > 0)
            slot.estimated_tokens = estimated
            try:
                response = await self._attempt(log, slot, request)
            except EgressRefused:
                slot.kind = "egress_refused"
                log.mark_end(slot)
                raise
            except httpx.HTTPError:
                assert slot.kind is not None
                if log.policy.should_retry(slot.kind, retries):
                    await log.close(slot)
                    retries += 1
                    await self._wait(log, None)
                    continue
                raise
            kind = _status_kind(response.status_code, slot.response_bytes or b"")
            if kind is not None and log.policy.should_retry(kind, retries):
                slot.kind = kind
                await log.close(slot)
                retries += 1
                await self._wait(log, slot.retry_after_s)
                continue
            return response

    @staticmethod
    async def _wait(log: CallLog, retry_after_s: float | None) -> None:
        if retry_after_s is not None and log.throttle is not None:
            log.throttle.pause(min(retry_after_s, log.policy.wait_s(retry_after_s)))
        wait = log.policy.wait_s(retry_after_s)
        if wait > 0:
            await anyio.sleep(wait)

    async def _attempt(self, log: CallLog, slot: _Slot, request: httpx.Request) -> httpx.Response:
        """Send once and read the whole body, within the per-request timeout when one is set.
        A failure sets ``slot.kind`` and raises the httpx error (a timeout as ReadTimeout)."""
        started = False
        chunks: list[bytes] = []
        try:
            with anyio.fail_after(log.timeout_s):
                try:
                    response = await self._inner.handle_async_request(request)
                except EgressRefused:
                    raise
                except httpx.HTTPError as e:
                    slot.kind = classify_httpx_error(e, response_started=False)
                    log.mark_end(slot)
                    raise
                started = True
                slot.status = response.status_code
                slot.headers = response.headers
                slot.retry_after_s = parse_retry_after(response.headers.get("retry-after"))
                try:
                    async for chunk in response.stream:  # type: ignore[union-attr]
                        chunks.append(chunk)
                except httpx.HTTPError as e:
                    slot.kind = classify_httpx_error(e, response_started=True)
                    slot.response_bytes = b"".join(chunks)
                    log.mark_end(slot)
                    raise
                finally:
                    await response.aclose()
        except TimeoutError:
            slot.kind = "timeout_after_output" if started else "timeout_before_response"
            if started:
                slot.response_bytes = b"".join(chunks)
            log.mark_end(slot)
            raise httpx.ReadTimeout(
                f"no complete response within the {log.timeout_s:g} s request timeout",
                request=request) from None
        slot.response_bytes = b"".join(chunks)
        log.mark_end(slot)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=httpx.ByteStream(slot.response_bytes),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _status_kind(status: int, body: bytes) -> str | None:
    """The transport failure a complete response is (a non-2xx status; a 2xx body that is not a
    JSON object: malformed or truncated), or None when the adapter should parse it."""
    if not 200 <= status < 300:
        return kind_for_status(status)
    try:
        obj = loads_strict(body)
    except FormatError:
        return "unparseable"
    return None if isinstance(obj, dict) else "unparseable"


Outcome = tuple[ProviderResponse | None, ProviderFailure | None]


async def run_call(
    log: CallLog, attempt: Callable[[CallLog], Awaitable[Outcome]]
) -> ProviderResult:
    """One ``generate()`` (see :class:`runner.providers._adapter.ProviderAdapter`): make ``log``
    the current call (the recording transport journals each attempt into it), run ``attempt``,
    close the log with the outcome (an observer's own error is re-raised unchanged, from the
    attempt or from the close) and return the audited result."""
    response: ProviderResponse | None = None
    failure: ProviderFailure | None = None
    token = CURRENT_CALL.set(log)
    try:
        response, failure = await attempt(log)
    except ObserverFailed as e:
        raise e.original from None
    finally:
        CURRENT_CALL.reset(token)
    try:
        await log.finish(failure, response.usage if response is not None else None)
    except ObserverFailed as e:
        raise e.original from None
    return ProviderResult(response, failure, log.attempts(), log.raw())
