"""Session fixtures: one small locked study and one uninterrupted reference run of it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.study.support import SMALL_ROWS, make_study, result_digests, run


@dataclass(frozen=True)
class Reference:
    spec: Path
    store: Path
    digests: dict[str, str]


@pytest.fixture(scope="session")
def small_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A locked 48-row study (w10, one seed) in its own directory; never run in place."""
    return make_study(tmp_path_factory.mktemp("study"))


@pytest.fixture(scope="session")
def reference(small_study: Path, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The small study run once, uninterrupted, at concurrency 1."""
    store = tmp_path_factory.mktemp("reference") / "ref.db"
    summary = run(small_study, store, concurrency=1)
    assert summary.committed == SMALL_ROWS and summary.halted is None
    return Reference(small_study, store, result_digests(store))

