"""pytest plugin: ``-p tests.control.mutants.plugin`` with ``ECT_MUTANT=M3`` runs the tests with
that mutant applied for the whole session (used by test_mutants to prove the unit tests kill it).
"""

from __future__ import annotations

import os

import pytest

from tests.control.mutants import apply

_mp = pytest.MonkeyPatch()


def pytest_configure(config: pytest.Config) -> None:
    name = os.environ.get("ECT_MUTANT")
    if name:
        apply(name, _mp)


def pytest_unconfigure(config: pytest.Config) -> None:
    _mp.undo()
