"""The layers a cell travels through are typed (issue 31).

Before, 293 parameter, return and variable annotations in study, loop, analysis, cli and view
were open JSON (``JsonObject``, ``dict[str, Any]``, ``Mapping[str, Any]``, ``Any``): the cell was
typed only at its ends. The bound below is the issue's; ruff's ANN401 (no ``Any`` in a
signature) guards the same layers in ``pyproject.toml``, and this test checks that guard is on.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TYPED_LAYERS = ("study", "loop", "analysis", "cli", "view")
OPEN = frozenset({"JsonObject", "Any"})
BOUND = 90


def _annotations(tree: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            args = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            found += [arg.annotation for arg in args if arg is not None and arg.annotation]
            if node.returns is not None:
                found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return found


def _is_open(annotation: ast.expr) -> bool:
    for node in ast.walk(annotation):
        name = node.id if isinstance(node, ast.Name) else \
            node.attr if isinstance(node, ast.Attribute) else None
        if name in OPEN:
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and any(word in node.value for word in OPEN):
            return True  # a string annotation
    return False


def open_annotations(layer: str) -> list[str]:
    out: list[str] = []
    for path in sorted((ROOT / "runner" / layer).rglob("*.py")):
        for ann in _annotations(ast.parse(path.read_text("utf-8"))):
            if _is_open(ann):
                out.append(f"{path.relative_to(ROOT)}:{ann.lineno}: {ast.unparse(ann)}")
    return out


def test_open_json_annotations_in_the_typed_layers_stay_within_the_bound() -> None:
    found = [a for layer in TYPED_LAYERS for a in open_annotations(layer)]
    assert len(found) <= BOUND, "\n".join(found)


def test_the_counter_sees_every_open_form(tmp_path: Path) -> None:
    tree = ast.parse(
        "def f(a: JsonObject, b: dict[str, Any], c: 'Mapping[str, Any]') -> typing.Any: ...\n"
        "x: list[JsonObject] = []\n"
        "def g(a: int, b: dict[str, JsonValue]) -> Receipt: ...\n")
    assert [_is_open(a) for a in _annotations(tree)] == [True, True, True, True, True,
                                                         False, False, False]


@pytest.mark.parametrize(("path", "flagged"), [
    ("runner/study/_example.py", True), ("runner/view/_example.py", True),
    ("runner/cli/_example.py", True), ("runner/store/_example.py", False),
])
def test_ruff_refuses_any_in_a_signature_of_the_typed_layers(path: str, flagged: bool) -> None:
    sample = "from typing import Any\n\n\ndef f(x: Any) -> None:\n    return None\n"
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "ANN401",
                        "--stdin-filename", path, "--output-format", "concise", "-"],
                       input=sample, capture_output=True, text=True, cwd=ROOT, check=False)
    assert ("ANN401" in r.stdout) is flagged, r.stdout + r.stderr
    assert r.returncode == (1 if flagged else 0)


def test_the_typed_layers_pass_the_guard() -> None:
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "ANN401",
                        "--output-format", "concise",
                        *(f"runner/{layer}" for layer in TYPED_LAYERS)],
                       capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
