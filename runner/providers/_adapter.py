"""The adapter base: the ``generate()`` scaffold every provider shares (docs/providers.md).

``generate()`` is the same for every adapter: open a :class:`CallLog` for the call (the attempt
records, the observer's ``begin``/``end``, the journal's response bytes, the timing), run the
adapter's one step under it (:meth:`ProviderAdapter._attempt`: build the request, send it or
answer it, parse the reply into a response or a typed failure), close the log with the outcome
(an observer's own error re-raised unchanged) and return the audited result
(:func:`runner.providers._http.run_call`). An adapter writes only what is its own: how a request
is built and a reply parsed, and how its call is logged.

:class:`HttpAdapter` adds what the HTTP adapters share: the checked timeout, the base URL's
origin behind the egress guard, the retry policy, the throttle, the replay cache of a resumed
run, the implicit environment removed, and failures redacted with the credential.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Self

from runner.providers._credential import Credential
from runner.providers._egress import EgressGuardTransport, Origin
from runner.providers._environment import scrub_environment
from runner.providers._errors import EgressRefused, ProviderFailure, failure_of
from runner.providers._http import CallLog, Outcome, ReplayCache, run_call
from runner.providers._retry import RetryPolicy
from runner.providers._throttle import Throttle
from runner.providers._types import AttemptObserver, ProviderRequest, ProviderResult

if TYPE_CHECKING:
    from runner.providers._registry import AdapterSettings

__all__ = ["HttpAdapter", "ProviderAdapter"]


class ProviderAdapter(ABC):
    """Base of every adapter. One instance may serve concurrent ``generate()`` calls."""

    name: str
    simulated: bool = False
    model: str

    @classmethod
    @abstractmethod
    def from_settings(cls, settings: AdapterSettings) -> Self:
        """The adapter for settings :func:`runner.providers.build` has validated."""

    async def generate(
        self, request: ProviderRequest, *, observer: AttemptObserver | None = None
    ) -> ProviderResult:
        """Answer ``request``: the parsed response or a typed failure, one attempt record per
        attempt (the observer awaited around each) and the raw bytes of each exchange."""
        log = self._call_log(request, observer)

        async def attempt(log: CallLog) -> Outcome:
            return await self._attempt(request, log)

        return await run_call(log, attempt)

    @abstractmethod
    def _call_log(self, request: ProviderRequest, observer: AttemptObserver | None) -> CallLog:
        """The log of one call: who answers, how attempts are numbered, timed and retried."""

    @abstractmethod
    async def _attempt(self, request: ProviderRequest, log: CallLog) -> Outcome:
        """Build, send (or answer) and parse one call; the attempts go into ``log``."""

    async def aclose(self) -> None:
        """Release what the adapter holds (its HTTP clients); nothing by default."""
        return None


class HttpAdapter(ProviderAdapter):
    """Base of the adapters that talk HTTP through the egress guard and the recording
    transport (:class:`runner.providers._http.RecordingTransport`)."""

    base_url: str

    def __init__(
        self,
        base_url: str,
        *,
        credential: Credential | None,
        timeout_s: float,
        guard: EgressGuardTransport | None,
        retry_policy: RetryPolicy | None,
        throttle: Throttle | None,
        sdk: bool,
    ) -> None:
        """Check the timeout and the origin (a credential only over a transport that keeps it
        secret), bind the egress guard to the origin and remove the implicit environment
        (``sdk``: the Gemini SDK's variables too, not only the proxy ones)."""
        if not (0 < timeout_s <= 600):
            raise ValueError("timeout_s must be within (0, 600]")
        self.base_url = base_url.rstrip("/")
        origin = Origin.parse(self.base_url)
        if credential is not None:
            origin.check_credential_transport()
        if guard is None:
            guard = EgressGuardTransport(origin)
        elif guard.allowed != origin:
            raise EgressRefused(
                f"egress refused: base URL origin {origin} differs from the guard's {guard.allowed}"
            )
        self.guard = guard
        self.timeout_s = float(timeout_s)
        self.retry_policy = retry_policy or RetryPolicy()
        self.throttle = throttle
        # responses a resumed run already paid for (set by the study on resume)
        self.replay: ReplayCache | None = None
        self._credential = credential
        self.removed_env = scrub_environment(sdk=sdk)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def _call_log(self, request: ProviderRequest, observer: AttemptObserver | None) -> CallLog:
        return CallLog(
            provider=self.name,
            model=self.model,
            cell_id=request.cell_id,
            observer=observer,
            policy=self.retry_policy,
            throttle=self.throttle,
            timeout_s=self.timeout_s,
            replay=self.replay,
        )

    def _failure(
        self,
        kind: str,
        exc: BaseException | None,
        *,
        detail: str | None = None,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> ProviderFailure:
        """A failure of this call, its detail redacted with the credential."""
        redact = self._credential.redact if self._credential is not None else str
        return failure_of(kind, exc, redact=redact, detail=detail, status=status,
                          retry_after_s=retry_after_s,
                          no_exception_class=self._no_exception_class(status))

    def _no_exception_class(self, status: int | None) -> str | None:
        """The ``error_class`` of a failure no exception raised (none by default)."""
        del status
        return None
