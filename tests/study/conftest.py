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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` in tests/study and tests/loop run only when selected with
    ``-m slow`` (the full 576-cell demo takes minutes); the default run covers the same
    behaviour on the 48-row study."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    here = Path(__file__).resolve().parent
    skip = pytest.mark.skip(reason="slow: select with -m slow")
    for item in items:
        if item.get_closest_marker("slow") and Path(str(item.path)).resolve().is_relative_to(
                here.parent) and Path(str(item.path)).parent.name in ("study", "loop"):
            item.add_marker(skip)
