"""Modules that hold one idea: no module of runner/ reaches 700 lines (issue 40 item 4).

Measured before the split: runner/study/_execute.py 1,177 lines (accounting, journal, one cell,
store header and driver in one file), runner/sandbox/_bwrap.py 1,104 (the backend and its pool),
runner/analysis/_closed.py 871, runner/analysis/_report.py 750, runner/store/_store.py 735,
runner/control/_controller.py 1,298, runner/control/_evals.py 1,063.
"""

from __future__ import annotations

from pathlib import Path

LIMIT = 700
RUNNER = Path(__file__).resolve().parent.parent / "runner"


def test_no_module_reaches_700_lines() -> None:
    sizes = {p.relative_to(RUNNER).as_posix(): len(p.read_text("utf-8").splitlines())
             for p in RUNNER.rglob("*.py")}
    assert len(sizes) > 100  # the tree was found
    too_long = {m: n for m, n in sorted(sizes.items())
                if n >= LIMIT}
    assert not too_long, too_long

