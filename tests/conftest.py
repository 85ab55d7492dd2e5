"""Shared fixtures. Paths are resolved from the repository root so tests run from anywhere."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Children inherit an ignored signal (a handler is reset to the default at exec). A suite
# started in the background by a non-interactive shell (`make test &`) inherits SIGINT ignored;
# the tests that send a child Ctrl-C would then see it ignored (the child runs on to its
# deadline) and mutmut's clean first pass would fail (a full run started with `nice pytest &`
# failed those four tests that way). Start as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """Each test leaves SIGINT/SIGTERM as it found them. ``ect``'s entry point, run in this
    process by the CLI tests, installs its own handlers and, on exit, ignores both signals (what
    the ``ect`` process wants while it shuts down); left behind, every child a later test starts
    would inherit SIGINT ignored, as in a suite started in the background (above)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, handler in saved.items():
        if signal.getsignal(s) is not handler and handler is not None:
            signal.signal(s, handler)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
