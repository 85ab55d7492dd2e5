"""Providers for the policy tests: real SimulatedProvider instances with scripted responders."""

from __future__ import annotations

import random
from typing import Any

from runner.canonical import canonical_bytes
from runner.providers import (
    ProviderFailure,
    ProviderRequest,
    SimulatedProvider,
    SimulatedReply,
)


class Recorder:
    """A responder that records every request and answers with a fixed verdict."""

    def __init__(self, verdict: str | None = "accept", reason: str = "ok", *, failure: bool = False,
                 text: str | None = None) -> None:
        self.requests: list[ProviderRequest] = []
        self.verdict, self.reason, self.failure, self.text = verdict, reason, failure, text

    def __call__(self, request: ProviderRequest, rng: random.Random) -> SimulatedReply:
        self.requests.append(request)
        if self.failure:
            return SimulatedReply(failure=ProviderFailure(kind="server_error", detail="HTTP 503", status=503))
        if self.text is not None:
            return SimulatedReply(text=self.text)
        obj: dict[str, Any] = {"verdict": self.verdict, "reason": self.reason}
        return SimulatedReply(text=canonical_bytes(obj).decode(), structured=obj)


def scripted(verdict: str | None = "accept", **kw: Any) -> tuple[SimulatedProvider, Recorder]:
    rec = Recorder(verdict, **kw)
    return SimulatedProvider(rec), rec


class Forbidden:
    """A provider that must never be called (the critic-core invariant, deterministic arms)."""

    name = "forbidden"
    model = "simulated-forbidden"
    simulated = True

    async def generate(self, request: ProviderRequest, *, observer: Any = None) -> Any:
        raise AssertionError(f"unexpected model call (role {request.role})")
