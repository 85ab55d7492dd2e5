"""Every error knows its exit category (issue 31, item 5).

Before, an exit code came from tables in nine command modules (35 entries) and an error that no
table named exited 5 whatever it meant: a new ``StudyError`` subclass for a refused precondition
would have exited 5, silently. Now each error class declares ``exit_category`` in its own body,
``map_errors`` reads it, and a command overrides it only where its question changes the meaning.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types

import click
import pytest
from click.testing import CliRunner

import runner
from runner.cli._common import (
    EXIT_CODES,
    EXIT_HALTED,
    EXIT_NEGATIVE,
    EXIT_REFUSED,
    EXIT_RUNTIME,
    EXIT_USAGE,
    exit_code,
    map_errors,
)
from runner.errors import EctError, ExitCategory, StoreError, StudyError


def _all_modules() -> None:
    for info in pkgutil.walk_packages(runner.__path__, "runner."):
        if info.name.endswith(("__main__", "._worker")) or ".evals" in info.name:
            continue  # __main__ runs the CLI; the worker runs only inside the sandbox
        importlib.import_module(info.name)


def _subclasses(cls: type[EctError]) -> list[type[EctError]]:
    out: list[type[EctError]] = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def _runner_errors() -> list[type[EctError]]:
    _all_modules()
    # classes a module defines (not the half-made ones a refused definition leaves behind)
    return sorted({c for c in _subclasses(EctError) if c.__module__.startswith("runner.")
                   and getattr(sys.modules.get(c.__module__), c.__qualname__, None) is c},
                  key=lambda c: f"{c.__module__}.{c.__qualname__}")


def test_every_error_class_of_the_package_declares_its_own_category() -> None:
    errors = _runner_errors()
    assert len(errors) >= 90  # the families and every package's errors, all imported
    missing = [f"{c.__module__}.{c.__qualname__}" for c in errors
               if not isinstance(c.__dict__.get("exit_category"), ExitCategory)]
    assert missing == []


def test_an_error_without_a_category_is_refused_when_it_is_defined() -> None:
    with pytest.raises(TypeError, match=r"runner\.study\._new\.NewRefusal does not declare "
                                        r"exit_category"):
        types.new_class("NewRefusal", (StudyError,), {},
                        lambda ns: ns.update(__module__="runner.study._new"))
    # inheriting the parent's category is not declaring one
    with pytest.raises(TypeError, match="does not declare exit_category"):
        types.new_class("Busy", (StoreError,), {},
                        lambda ns: ns.update(__module__="runner.store._x", __doc__="busy"))
    with pytest.raises(TypeError, match="is not an ExitCategory"):
        types.new_class("Bad", (StudyError,), {},
                        lambda ns: ns.update(__module__="runner.study._x", exit_category=3))


def test_errors_outside_the_package_inherit_their_parents_category() -> None:
    class UserStudyError(StudyError):  # a user's subclass (module tests.*) is not refused
        pass

    assert exit_code(UserStudyError("x")) == EXIT_RUNTIME


@pytest.mark.parametrize(("category", "code"), [
    (ExitCategory.NEGATIVE, EXIT_NEGATIVE), (ExitCategory.USAGE, EXIT_USAGE),
    (ExitCategory.REFUSED, EXIT_REFUSED), (ExitCategory.HALTED, EXIT_HALTED),
    (ExitCategory.RUNTIME, EXIT_RUNTIME),
])
def test_each_category_has_the_readmes_exit_code(category: ExitCategory, code: int) -> None:
    assert EXIT_CODES[category] == code
    declared = [c for c in _runner_errors() if c.__dict__["exit_category"] is category]
    assert declared, f"no error class is {category}"
    for cls in declared:
        err = cls.__new__(cls)  # constructors take different arguments; the class decides
        assert exit_code(err) == code, cls


def test_known_errors_exit_as_the_readme_says() -> None:
    from runner.analysis import InventoryIncomplete
    from runner.providers import CredentialError
    from runner.sandbox import PinMismatch, SandboxUnavailable
    from runner.store import StoreDamaged, TamperDetected
    from runner.study import Halted, LockMismatch, PreflightFailed, SpecError, TransportFailed

    expected = {
        SpecError: EXIT_USAGE, CredentialError: EXIT_USAGE,
        PreflightFailed: EXIT_REFUSED, LockMismatch: EXIT_REFUSED, PinMismatch: EXIT_REFUSED,
        InventoryIncomplete: EXIT_REFUSED, StoreDamaged: EXIT_REFUSED,
        TamperDetected: EXIT_REFUSED,
        Halted: EXIT_HALTED, TransportFailed: EXIT_HALTED,
        SandboxUnavailable: EXIT_RUNTIME,
    }
    for cls, code in expected.items():
        assert exit_code(cls.__new__(cls)) == code, cls


def test_an_override_applies_to_subclasses_and_the_most_specific_wins() -> None:
    from runner.store import StoreDamaged, StoreUsageError, TamperDetected

    overrides = {StoreDamaged: EXIT_NEGATIVE, StoreError: EXIT_RUNTIME}
    assert exit_code(TamperDetected("t"), overrides) == EXIT_NEGATIVE
    assert exit_code(StoreUsageError("u"), overrides) == EXIT_RUNTIME
    assert exit_code(StoreUsageError("u")) == EXIT_USAGE


def test_map_errors_prints_one_line_and_exits_with_the_category() -> None:
    from runner.study import ReplayRefused

    @click.command()
    @map_errors()
    def cmd() -> None:
        raise ReplayRefused("the store is not complete\nsecond line")

    result = CliRunner().invoke(cmd, [])
    assert result.exit_code == EXIT_REFUSED
    assert result.output == "ect: the store is not complete\n"
