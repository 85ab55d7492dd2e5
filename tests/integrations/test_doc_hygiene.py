"""docs/integrations.md's examples, run as a reader runs them (issue 29): from the checkout's
root, in a fresh interpreter, they print nothing (no warning, no trace-export line) and leave
nothing behind (Inspect's logs/ included)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


# A fresh interpreter importing Inspect, the Agents SDK and LangGraph: about 10-40 s, so opt-in
# (`make test-slow`); the same examples run in-process in tests/test_doc_examples.py by default.
@pytest.mark.slow
def test_the_integration_examples_are_silent_and_leave_nothing(tmp_path: Path) -> None:
    text = (REPO / "docs" / "integrations.md").read_text("utf-8")
    code = "\n".join(textwrap.dedent(m["body"]) for m in FENCE.finditer(text)
                     if m["lang"] == "python")
    assert "eval(task" in code and "Runner.run(" in code and "RunController(" in code
    work = tmp_path / "checkout"
    work.mkdir()
    (work / "docs").symlink_to(REPO / "docs")  # the files the examples read, as in the checkout
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "OPENAI", "INSPECT"))}
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "" and proc.stderr == "", (proc.stdout, proc.stderr)
    assert sorted(p.name for p in work.iterdir()) == ["docs"]
