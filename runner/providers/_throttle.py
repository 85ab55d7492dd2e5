"""One rate limiter for every call a provider makes: requests and tokens per minute.

A paid API enforces quotas; a run that ignores them gets HTTP 429 and, when it hammers hardest
exactly when it is limited, many of them. :class:`Throttle` paces every HTTP attempt of one
provider (and so of every cell of a run, which share the provider) so that:

* attempts start at least ``60 / requests_per_minute`` seconds apart (evenly spaced, 0.1% over,
  no bursts:
  no 60-second window, however the server aligns it, sees more than the quota);
* the tokens the responses report are paid off at ``tokens_per_minute``: an attempt waits until
  the tokens of the earlier ones (its own request's size as the estimate until its usage is
  known) fit the quota;
* a ``Retry-After`` a server sends pauses every attempt of the provider until it has passed, not
  only the retried one.

The throttle only delays attempts: it never changes a request, a response or a result, which is
why a run records it in its header and not in the lock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field

import anyio

from runner.canonical import JsonRecord, spec

__all__ = ["Throttle"]

# Attempts are spaced a hair over 60/N s apart, so rounding never lets N + 1 fit in a minute.
_SPACING_MARGIN = 1.001


@dataclass(eq=False)
class Throttle(JsonRecord):
    """A shared pacing of attempts; see the module docstring. ``None`` limits are off. Its
    JSON is its two limits (what a run's header records)."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    _: KW_ONLY
    clock: Callable[[], float] = field(default=time.monotonic, repr=False,
                                       metadata=spec(skip=True))
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, repr=False,
                                                      metadata=spec(skip=True))

    def __post_init__(self) -> None:
        for name, value in (("requests_per_minute", self.requests_per_minute),
                            ("tokens_per_minute", self.tokens_per_minute)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"{name} must be a positive integer (or None: no limit)")
        self._clock = self.clock
        self._sleep = self.sleep
        self._next_request = -math.inf  # earliest start of the next attempt (request quota)
        self._token_free = -math.inf  # when the tokens charged so far are paid off
        self._paused_until = -math.inf  # Retry-After from a server
        self._lock: anyio.Lock | None = None
        self.waited_s = 0.0
        self.attempts = 0

    @property
    def active(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None

    def _lock_for_loop(self) -> anyio.Lock:
        if self._lock is None:
            self._lock = anyio.Lock()
        return self._lock

    async def acquire(self, estimated_tokens: int = 0) -> None:
        """Wait until one more attempt of about ``estimated_tokens`` input tokens fits."""
        async with self._lock_for_loop():
            now = self._clock()
            start = max(now, self._paused_until, self._next_request, self._token_free)
            if start > now:
                self.waited_s += start - now
                await self._sleep(start - now)
            start = max(start, self._clock())
            if self.requests_per_minute is not None:
                self._next_request = start + _SPACING_MARGIN * 60.0 / self.requests_per_minute
            if self.tokens_per_minute is not None:
                self._token_free = max(self._token_free, start) + (
                    60.0 * max(0, estimated_tokens) / self.tokens_per_minute)
            self.attempts += 1

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Charge an attempt's real token count (from its usage) in place of the estimate."""
        if self.tokens_per_minute is None:
            return
        extra = actual_tokens - max(0, estimated_tokens)
        if extra > 0:
            self._token_free = max(self._token_free, self._clock()) + (
                60.0 * extra / self.tokens_per_minute)

    def pause(self, seconds: float) -> None:
        """A server asked for ``seconds`` of quiet (``Retry-After``): no attempt starts before."""
        if seconds > 0 and math.isfinite(seconds):
            self._paused_until = max(self._paused_until, self._clock() + seconds)


def estimate_tokens(request_bytes: bytes) -> int:
    """A request's input tokens, estimated before the API counts them (4 bytes a token)."""
    return (len(request_bytes) + 3) // 4
