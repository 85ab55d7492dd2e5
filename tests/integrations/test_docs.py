"""docs/integrations.md runs as written: every Python block, in order, and every shell line."""

from __future__ import annotations

import gc
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "integrations.md").read_text("utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
SHELL = [
    line.split("  #")[0].strip()
    for block in re.findall(r"```sh\n(.*?)```", DOC, flags=re.S)
    for line in block.splitlines()
    if line.strip()
]

pytestmark = [
    pytest.mark.filterwarnings("ignore:Unclosed <MemoryObjectReceiveStream:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObjectReceiveStream.__del__"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]


def test_the_python_examples_run_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(BLOCKS) == 5
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {"__name__": "docs_integrations"}
    for block in BLOCKS:
        exec(compile(block, "docs/integrations.md", "exec"), namespace)
    namespace.clear()
    gc.collect()  # Inspect's leftover anyio streams go now, under this module's filter


@pytest.mark.parametrize("name", ["Inspect AI", "OpenAI Agents SDK", "LangGraph", "Bring your own"])
def test_each_adapter_example_is_under_30_lines(name: str) -> None:
    section = DOC.split(f"## {name}", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert block is not None
    lines = [x for x in block.group(1).splitlines() if x.strip()]
    assert len(lines) < 30, len(lines)


def test_the_bring_your_own_example_stands_alone_in_about_twenty_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    block = BLOCKS[-1]
    code = [x for x in block.splitlines() if x.strip() and not x.lstrip().startswith("#")]
    assert len(code) <= 22, len(code)
    monkeypatch.chdir(ROOT)
    exec(compile(block, "docs/integrations.md", "exec"), {"__name__": "byo"})  # fresh namespace


def test_the_shell_examples_print_the_digests_the_examples_carry() -> None:
    ect = str(Path(sys.executable).with_name("ect"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    outputs = []
    for line in SHELL:
        proc = subprocess.run(line.replace("ect digest", f"{shlex.quote(ect)} digest"),
                              shell=True, cwd=ROOT, capture_output=True, text=True,
                              timeout=60, env=env, check=False)  # fmt: skip
        assert proc.returncode == 0, (line, proc.stderr)
        assert re.fullmatch(r"sha256:[0-9a-f]{64}\n", proc.stdout), proc.stdout
        outputs.append(proc.stdout.strip())
    cert = (ROOT / "docs" / "examples" / "aggregation" / "certificate.json").read_text()
    assert outputs[0] in cert and outputs[1] in cert  # descriptor and ledger digests
    ledger = (ROOT / "docs" / "examples" / "aggregation" / "ledger.json").read_text()
    assert outputs[2] in ledger  # the value digest of 41250
