"""A deliberate error inside the concurrent run surfaces as itself, not as an exception group."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import StoreError
from runner.store import Store
from runner.study import RunSettings, execute
from tests.study.support import bodies, preflight


def test_a_store_error_mid_run_surfaces_in_one_line(small_study: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store_path = tmp_path / "s.db"
    report = preflight(small_study, store_path)
    real_append = Store.append
    calls = {"n": 0}

    def failing_append(self: Store, body: dict) -> int:  # type: ignore[type-arg]
        calls["n"] += 1
        if calls["n"] == 3:
            raise StoreError("disk full while appending")
        return real_append(self, body)

    monkeypatch.setattr(Store, "append", failing_append)
    with pytest.raises(StoreError, match="disk full"):
        execute(RunSettings(small_study, store_path, concurrency=2), preflight=report)
    monkeypatch.undo()
    # the two cells acknowledged before the failure are there, in order, and nothing else
    assert [b["row"] for b in bodies(store_path)] == [1, 2]
