"""Layering: each subpackage of runner/ imports only from those before it (no cycles)."""

from __future__ import annotations

import ast
from pathlib import Path

ORDER = ["canonical", "ect", "worlds", "sandbox", "store", "providers", "control", "integrations",
         "policies", "loop", "study", "analysis", "view", "cli"]
RUNNER = Path(__file__).resolve().parent.parent / "runner"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "runner" and len(parts) > 1:
                out.add(parts[1])
    return out


def test_every_subpackage_is_in_the_order() -> None:
    found = {p.name for p in RUNNER.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert found == set(ORDER)


def test_imports_only_go_downward() -> None:
    bad = []
    for index, package in enumerate(ORDER):
        allowed = set(ORDER[: index + 1]) | {"errors", "__init__"}
        for path in sorted((RUNNER / package).rglob("*.py")):
            for target in _imports(path):
                if target not in allowed and target in ORDER:
                    bad.append(f"{path.relative_to(RUNNER.parent)} imports runner.{target}")
    assert not bad, "\n".join(bad)


def test_integrations_import_only_canonical_ect_and_control() -> None:
    # Issue 19: the framework adapters sit on the verifier and the stop controls, nothing else.
    allowed = {"canonical", "ect", "control", "integrations", "errors"}
    bad = [
        f"{path.relative_to(RUNNER.parent)} imports runner.{target}"
        for path in sorted((RUNNER / "integrations").rglob("*.py"))
        for target in _imports(path)
        if target not in allowed
    ]
    assert not bad, "\n".join(bad)


def test_the_tools_module_is_stdlib_only() -> None:
    # It runs inside the sandbox under `python -I -S`, loaded by path.
    tools = RUNNER / "worlds" / "tools.py"
    tree = ast.parse(tools.read_text("utf-8"))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    import sys

    assert roots <= set(sys.stdlib_module_names) | {"__future__"}, roots
