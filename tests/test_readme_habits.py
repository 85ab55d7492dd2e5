"""README habits (issue 29): no figure that goes stale by itself, and the shell completion it
documents works as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text("utf-8")


def test_no_test_counts_or_timing_table() -> None:
    # "1293 tests" / "1,735 tests" and a table of minutes went stale with every commit
    assert not re.search(r"\b\d[\d,]* tests\b", README)
    assert "| command | load average |" not in README
    assert not re.search(r"\b\d+ min \d+ s\b", README)


def test_the_documented_completion_works() -> None:
    lines = re.findall(r"^(?:eval \"\$\((_ECT_COMPLETE=\w+) ect\)\"|(_ECT_COMPLETE=\w+) ect \|)",
                       README, re.M)
    shells = sorted(a or b for a, b in lines)
    assert shells == ["_ECT_COMPLETE=bash_source", "_ECT_COMPLETE=fish_source",
                      "_ECT_COMPLETE=zsh_source"]
    ect = Path(sys.executable).with_name("ect")
    for var in shells:
        name, value = var.split("=")
        out = subprocess.run([str(ect)], env={**os.environ, name: value}, capture_output=True,
                             text=True, timeout=60, check=True).stdout
        assert "_ECT_COMPLETE" in out and "complete" in out, (var, out[:200])
    done = subprocess.run([str(ect)], env={**os.environ, "_ECT_COMPLETE": "bash_complete",
                                           "COMP_WORDS": "ect store ver", "COMP_CWORD": "2"},
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert done.split() == ["plain,verify"]
