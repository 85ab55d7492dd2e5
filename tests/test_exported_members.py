"""Every runner package exports exactly its curated ``__all__``, and no two packages export the
same name for different things (as httpx's tests/test_exported_members.py guards its surface).

A name exported by two packages (``Checkpoint`` from worlds and control, ``Decision`` from ect and
loop, ...) reads the same at every call site and means different things; the fix is a distinct
name, not an entry in an allow-list.
"""

from __future__ import annotations
import __future__

import importlib
from collections import defaultdict
from types import ModuleType

import pytest

from tests.test_layering import ORDER

PACKAGES = [*ORDER, "errors"]


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"runner.{name}")


def _public(module: ModuleType) -> set[str]:
    """Names a user can import from ``module`` that are not submodules or import artefacts."""
    return {
        name for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType | __future__._Feature)
    }  # fmt: skip


@pytest.mark.parametrize("package", PACKAGES)
def test_the_public_surface_is_exactly_all(package: str) -> None:
    module = _module(package)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), "a name is listed twice in __all__"
    missing = [n for n in exported if not hasattr(module, n)]  # lazy exports resolve here
    assert not missing, f"runner.{package}.__all__ names what it does not define: {missing}"
    leaked = sorted(_public(module) - set(exported))
    assert not leaked, f"runner.{package} has public names outside __all__: {leaked}"


def test_no_public_name_is_exported_by_two_packages() -> None:
    owners: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for name in _module(package).__all__:
            owners[name].append(package)
    shared = {name: where for name, where in owners.items() if len(where) > 1}
    assert not shared, f"public names exported by more than one package: {shared}"
