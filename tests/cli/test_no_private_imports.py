"""The CLI is a thin layer over the library's public surface (issue 31, item 5): it imports no
private module or name of another package (``runner.analysis._sweep._base_parameters``,
``runner.sandbox._pins`` were imported before), and no private name of another CLI module."""

from __future__ import annotations

import ast
from pathlib import Path

import runner.cli

CLI = Path(runner.cli.__file__).parent


def _private_imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("runner"):
            parts = node.module.split(".")
            inside_cli = parts[:2] == ["runner", "cli"]
            # runner.cli._x modules are the CLI's own; anything else must be a public module
            if not inside_cli and any(p.startswith("_") for p in parts):
                found.append(f"{path.name}:{node.lineno} from {node.module}")
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.endswith("__"):
                    found.append(f"{path.name}:{node.lineno} {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("runner") and any(
                        p.startswith("_") for p in alias.name.split(".")[1:]) \
                        and not alias.name.startswith("runner.cli."):
                    found.append(f"{path.name}:{node.lineno} import {alias.name}")
    return found


def test_the_cli_imports_only_public_names() -> None:
    offenders = [hit for f in sorted(CLI.glob("*.py")) for hit in _private_imports(f)]
    assert offenders == []


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from runner.analysis._sweep import sweep\n"
                      "from runner.cli._progress import _duration\n"
                      "from runner.sandbox import _pins\n"
                      "from runner.study import run_study\n", "utf-8")
    assert _private_imports(sample) == [
        "sample.py:1 from runner.analysis._sweep", "sample.py:2 runner.cli._progress._duration",
        "sample.py:3 runner.sandbox._pins"]
