"""The study's journaled provider passes its caller's attempt observer through.

``_Journaled`` (runner/study/_execute.py) journals every attempt in the store before it is sent
by handing itself to the provider as the observer. It used to drop the observer its caller
passed (a pipeline's ``PipelineParams.observer`` among them), so that observer never saw a call.
Real components: a real SQLite store, the real simulated provider, and the real OpenAI-compatible
adapter (real httpx) against a local HTTP server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.policies import CellIdentity, PipelineParams, make_pipeline
from runner.providers import (
    AttemptRecord,
    GenerationConfig,
    OpenAICompatProvider,
    Provider,
    ProviderResult,
)
from runner.store import Store, generate_key
from runner.study import ScheduleRow
from runner.study._journal import NestedObserver, read_journal
from runner.study._journaling import _Journaled
from tests.policies._providers import scripted
from tests.policies.test_pipelines import finish, state
from tests.providers.conftest import make_request, openai_ok
from tests.providers.fakeserver import FakeServer, Reply
from tests.store.conftest import make_header

ROW = ScheduleRow(row=1, cell_id="cell-0001", task_id="t", world_id="w", family="f",
                  checkpoint_id="t/clean", checkpoint="clean", fault=None, seed_index=0, seed=11,
                  policy="full_trace")


class Watcher:
    """The caller's observer: records what it sees, and what the journal held at each event."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.events: list[tuple[str, str, int]] = []

    async def begin(self, record: AttemptRecord) -> None:
        self.events.append(("begin", record.attempt_id, len(self.store.attempts())))

    async def end(self, record: AttemptRecord) -> None:
        self.events.append(("end", record.attempt_id, len(self.store.attempts())))


class Keeper(Watcher):
    """A caller's observer that keeps response bytes too."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.responses: list[bytes] = []

    async def end_with_response(self, record: AttemptRecord, response: bytes) -> None:
        self.responses.append(response)
        await self.end(record)


def _store(tmp_path: Path) -> Store:
    return Store.create(tmp_path / "run.db", header=make_header(),
                        signing_key=generate_key(tmp_path / "run.db.key"))


def _generate(provider: Provider, observer: Any) -> ProviderResult:
    async def go() -> ProviderResult:
        return await provider.generate(make_request(), observer=observer)

    return anyio.run(go)


def test_an_observer_passed_to_a_journaled_provider_sees_the_call(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        provider, _ = scripted("accept")
        watcher = Watcher(store)
        result = _generate(_Journaled(provider, store, ROW, [0]), watcher)
        assert result.ok
        (attempt,) = result.attempts
        # the caller's begin comes first (nothing journaled yet), its end after the journal's
        assert watcher.events == [("begin", attempt.attempt_id, 0), ("end", attempt.attempt_id, 1)]
        (entry,) = read_journal(store)
        assert entry.begun is not None and entry.begun.attempt_id == attempt.attempt_id
        assert entry.ended == attempt


def test_a_pipelines_observer_sees_its_critic_call_through_the_journal(tmp_path: Path) -> None:
    """``PipelineParams.observer`` reaches the provider call when the study's journal wraps the
    provider: the critic's attempt is journaled and the pipeline's observer sees it."""
    with _store(tmp_path) as store:
        provider, _ = scripted("accept")
        watcher = Watcher(store)
        params = PipelineParams(GenerationConfig(temperature=0.2, seed=11, max_output_tokens=256),
                                CellIdentity(ROW.cell_id, ROW.seed), observer=watcher)
        journaled = _Journaled(provider, store, ROW, [0])
        st = state()
        decision = anyio.run(make_pipeline("full_trace", journaled, params).on_finish, st,
                             finish(st))
        assert decision.decision == "complete"
        (entry,) = read_journal(store)
        assert entry.begun is not None and journaled.roles == ["critic"]
        assert [e[:2] for e in watcher.events] == [("begin", entry.begun.attempt_id),
                                                   ("end", entry.begun.attempt_id)]


def test_a_live_adapters_answer_reaches_the_journal_and_the_callers_observer(
        tmp_path: Path) -> None:
    """The real OpenAI-compatible adapter: the journal keeps the response bytes (for resume)
    and a caller's observer that keeps them gets the same bytes."""
    with FakeServer() as server, _store(tmp_path) as store:
        server.play(Reply.json(openai_ok()))
        live = OpenAICompatProvider(server.url + "/v1", credential=None, model="local-model",
                                    timeout_s=10.0)
        keeper = Keeper(store)
        result = _generate(_Journaled(live, store, ROW, [0]), keeper)
        assert result.ok
        (attempt,) = result.attempts
        assert keeper.events == [("begin", attempt.attempt_id, 0), ("end", attempt.attempt_id, 1)]
        assert keeper.responses == [result.raw[0].response_bytes]
        (entry,) = read_journal(store)
        assert entry.ended is not None and entry.ended.response_sha256 is not None
        assert store.get_blob(entry.ended.response_sha256) == result.raw[0].response_bytes


def test_a_caller_that_refuses_the_attempt_leaves_no_journal_entry(tmp_path: Path) -> None:
    """The caller's observer is outermost: its refusal at ``begin`` stops the attempt before the
    journal writes an entry for a call that was never sent."""

    class Refuses(Watcher):
        async def begin(self, record: AttemptRecord) -> None:
            raise RuntimeError("not now")

    with _store(tmp_path) as store:
        provider, recorder = scripted("accept")
        with pytest.raises(RuntimeError, match="not now"):
            _generate(_Journaled(provider, store, ROW, [0]), Refuses(store))
        assert recorder.requests == [] and store.attempts() == []


def test_nested_observer_orders_and_routes_the_response_bytes() -> None:
    calls: list[str] = []

    class Plain:
        def __init__(self, name: str) -> None:
            self.name = name

        async def begin(self, record: AttemptRecord) -> None:
            calls.append(f"{self.name}.begin")

        async def end(self, record: AttemptRecord) -> None:
            calls.append(f"{self.name}.end")

    class Keeps(Plain):
        async def end_with_response(self, record: AttemptRecord, response: bytes) -> None:
            calls.append(f"{self.name}.end_with_response:{response.decode()}")

    record: Any = object()
    nested = NestedObserver(Plain("outer"), Keeps("inner"))

    async def go() -> None:
        await nested.begin(record)
        await nested.end_with_response(record, b"{}")
        await nested.end(record)

    anyio.run(go)
    assert calls == ["outer.begin", "inner.begin", "inner.end_with_response:{}", "outer.end",
                     "inner.end", "outer.end"]
