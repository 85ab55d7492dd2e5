"""The packages whose names load on first use (runner/_lazy.py): the names a type checker sees
(the ``if _TYPE_CHECKING:`` imports) are exactly the table the package loads them from, and every
name resolves to the object of the module the table names."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parent.parent / "runner"
LAZY = ["study", "control", "loop", "policies"]


def _checked_imports(package: str) -> dict[str, tuple[str, ...]]:
    tree = ast.parse((RUNNER / package / "__init__.py").read_text("utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and isinstance(n.test, ast.Name) and n.test.id == "_TYPE_CHECKING")  # fmt: skip
    out: dict[str, tuple[str, ...]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        out[node.module.removeprefix(f"runner.{package}.")] = tuple(a.name for a in node.names)
    return out


@pytest.mark.parametrize("package", LAZY)
def test_the_checked_names_are_the_loaded_names(package: str) -> None:
    module = importlib.import_module(f"runner.{package}")
    assert _checked_imports(package) == module._EXPORTS
    names = [n for names in module._EXPORTS.values() for n in names]
    assert sorted(names) == sorted(module.__all__)
    for sub, subnames in module._EXPORTS.items():
        source = importlib.import_module(f"runner.{package}.{sub}")
        for name in subnames:
            assert getattr(module, name) is getattr(source, name), (package, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    import runner.study

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        runner.study.nope  # noqa: B018
    assert "run_preflight" in dir(runner.study)
