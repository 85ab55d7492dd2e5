"""docs/control.md matches the code: its Python blocks run, its eval case passes."""

from __future__ import annotations

import contextlib
import io
import re
import textwrap
import warnings
from pathlib import Path

from runner.canonical import loads_strict
from runner.control import EvalCase, StopReason, UnmeteredUsage, run_case

DOC = Path(__file__).resolve().parents[2] / "docs" / "control.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def _run_alone(block: str) -> tuple[dict[str, object], str]:
    """Run one block in a fresh namespace with ``UnmeteredUsage`` as an error."""
    ns: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("error", UnmeteredUsage)
        exec(compile(block, str(DOC), "exec"), ns)
    return ns, out.getvalue()


def test_every_python_block_runs_on_its_own_and_meters_its_usage() -> None:
    code = blocks("python")
    assert len(code) >= 6
    for block in code:  # no block needs a name from an earlier one, none warns UnmeteredUsage
        _run_alone(block)


def test_the_first_example_wraps_a_loop_in_ten_lines() -> None:
    example = blocks("python")[0]
    controller = example[example.index("controller = RunController("):]
    assert len(controller.strip().splitlines()) <= 10  # the ten-line example
    ns, printed = _run_alone(example)
    result = ns["result"]
    assert result.reason is StopReason.GOAL_MET  # type: ignore[attr-defined]
    assert result.output == {"revenue": 1200}  # type: ignore[attr-defined]
    assert result.tokens == 1270 and result.unmetered_steps == 0  # type: ignore[attr-defined]
    assert printed.splitlines()[:2] == ["goal_met", "{'revenue': 1200}"]


def test_the_readme_control_snippet_meters_its_usage() -> None:
    readme = (DOC.parents[1] / "README.md").read_text("utf-8")
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S)
                   if "runner.control" in b)
    ns, printed = _run_alone(textwrap.dedent(snippet))
    assert printed.split()[0] == "goal_met"
    assert ns["result"].unmetered_steps == 0  # type: ignore[attr-defined]


def test_json_case_in_the_doc_passes() -> None:
    (case_json,) = blocks("json")
    case = EvalCase.from_json(loads_strict(case_json), "docs/control.md")
    assert run_case(case).passed


def test_doc_lists_every_stop_reason() -> None:
    text = DOC.read_text()
    for reason in StopReason:
        assert f"| `{reason}` |" in text


def test_comparison_table_names_every_framework_and_real_names_of_ours() -> None:
    import runner.control as control

    text = DOC.read_text()
    section = text.split("## How this compares", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header == ["feature", "`runner.control`", "AutoGen AgentChat", "Inspect AI",
                      "OpenAI Agents SDK", "LangGraph", "smolagents", "Pydantic AI"]
    assert all(len(r.split("|")) == 10 for r in rows)  # no stray pipes inside cells
    ours = " ".join(r.split("|")[2] for r in rows[1:])
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", ours))
    assert {"MaxSteps", "Guard", "KillSwitch", "IdempotencyLedger", "StoppingRule"} <= named
    for name in named:  # every class our column names is a real export
        assert hasattr(control, name), name
    for reason in ("time_budget", "internal_error", "needs_human"):
        assert f"`{reason}`" in ours or reason in ours
