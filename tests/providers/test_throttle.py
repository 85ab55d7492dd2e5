"""The shared throttle (issue 26): requests and tokens per minute, Retry-After pauses everyone.

A virtual clock stands in for time (no timing assertions): ``sleep`` advances it, so each test
checks exactly when each attempt was allowed to start. One test drives the real OpenAI-compatible
adapter against the fake paid API to check the throttle is applied to every HTTP attempt.
"""

from __future__ import annotations

import anyio
import pytest

from runner.providers import OpenAICompatProvider, Throttle
from tests.fake_provider import FakeProvider, Faults
from tests.providers.conftest import make_request


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def _starts(throttle: Throttle, clock: Clock, n: int, tokens: int = 0) -> list[float]:
    out: list[float] = []

    async def main() -> None:
        for _ in range(n):
            await throttle.acquire(tokens)
            out.append(round(clock.now, 6))

    anyio.run(main)
    return out


def test_requests_per_minute_spaces_attempts_evenly() -> None:
    clock = Clock()
    t = Throttle(requests_per_minute=120, clock=clock, sleep=clock.sleep)
    assert _starts(t, clock, 5) == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0], abs=0.01)
    assert t.waited_s == pytest.approx(2.0, abs=0.01) and t.attempts == 5


def test_no_window_of_sixty_seconds_holds_more_than_the_quota() -> None:
    clock = Clock()
    starts = _starts(Throttle(requests_per_minute=7, clock=clock, sleep=clock.sleep), clock, 30)
    for s in starts:
        assert sum(1 for x in starts if s <= x < s + 60.0) <= 7


def test_tokens_per_minute_pays_off_the_reported_usage() -> None:
    clock = Clock()
    t = Throttle(tokens_per_minute=600, clock=clock, sleep=clock.sleep)  # 10 tokens a second

    async def main() -> list[float]:
        starts = []
        for _ in range(3):
            await t.acquire(20)  # estimated 20 tokens (2 s of quota) ...
            starts.append(clock.now)
            t.settle(20, 50)  # ... but the usage said 50 (5 s in all)
        return starts

    assert anyio.run(main) == pytest.approx([0.0, 5.0, 10.0])


def test_retry_after_pauses_every_attempt() -> None:
    clock = Clock()
    t = Throttle(clock=clock, sleep=clock.sleep)
    assert not t.active
    t.pause(3.0)
    assert _starts(t, clock, 2) == [3.0, 3.0]


def test_limits_are_checked() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError):
            Throttle(requests_per_minute=bad)  # type: ignore[arg-type]
    assert Throttle(30, 1000).to_json() == {"requests_per_minute": 30, "tokens_per_minute": 1000}


def test_the_adapter_paces_every_http_attempt_retries_included() -> None:
    clock = Clock()
    throttle = Throttle(requests_per_minute=60, clock=clock, sleep=clock.sleep)
    with FakeProvider(Faults(first_faults={"503": 1.0})) as server:  # every first sending fails
        p = OpenAICompatProvider(server.url, model="m", timeout_s=10.0, throttle=throttle)

        async def main() -> list[bool]:
            oks = [(await p.generate(make_request(seed=s))).ok for s in (1, 2)]
            await p.aclose()
            return oks

        assert anyio.run(main) == [True, True]
    assert server.stats == {"503": 2, "ok": 2}
    assert throttle.attempts == 4 and clock.now == pytest.approx(3.0, abs=0.01)  # 1 s apart
