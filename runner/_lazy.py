"""A package's public names, each imported from its module on first use (PEP 562).

A package whose ``__init__`` imported every module made each command pay for all of them:
``ect preflight`` loaded the loop, the policies and the providers' HTTP clients it never uses.
Such a package lists its names under ``if TYPE_CHECKING:`` (for type checkers and readers) and
the same names by module in a table handed to :func:`lazy_exports` (``tests/test_lazy_exports.py``
checks that the two agree and that every name resolves).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, tuple[str, ...]],
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:  # fmt: skip
    """``(__getattr__, __dir__)`` for ``package``: a name of ``exports`` (module, relative to the
    package -> its names) is imported from its module when first read, then kept on the package."""
    module_of = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> object:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *module_of})

    return __getattr__, __dir__
