"""Exit codes and error mapping shared by every command.

Exit codes (documented in the README and ``ect --help``):

    0  success (``verify``: complete; ``store verify``: intact; probes/evals: all passed)
    1  a negative answer (``verify``: continue; damage found; a probe or eval failed)
    2  usage error (bad flags, missing file)
    3  refused: a precondition did not hold (preflight, lock drift, incomplete inventory)
    4  halted cleanly at a cell boundary (STOP file, cost or call ceiling, Ctrl-C)
    5  runtime failure (sandbox unavailable, provider failure, internal error)
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeVar

import click

from runner.errors import EctError

__all__ = [
    "EXIT_HALTED",
    "EXIT_NEGATIVE",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_RUNTIME",
    "EXIT_USAGE",
    "die",
    "map_errors",
]

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_HALTED = 4
EXIT_RUNTIME = 5

F = TypeVar("F", bound=Callable[..., Any])


def die(message: str, code: int) -> NoReturn:
    """Print ``ect: <message>`` (first line only) to stderr and exit with ``code``."""
    line = message.strip().splitlines()[0] if message.strip() else "error"
    click.echo(f"ect: {line}", err=True)
    sys.exit(code)


def map_errors(
    codes: Mapping[Any, int] | Callable[[], Mapping[Any, int]] | None = None,
) -> Callable[[F], F]:
    """Decorate a command so deliberate errors become a one-line message and an exit code.

    ``codes`` maps error classes (most specific first) to exit codes; any other
    :class:`EctError` exits :data:`EXIT_RUNTIME`; ``OSError`` on user-supplied paths is a usage
    error. Unexpected exceptions still raise: those are bugs and deserve a traceback.

    ``codes`` may also be a function returning that mapping, called only when an error is
    being mapped: command modules then import the library's error classes (and the heavy
    modules that define them) only when a command runs, which keeps ``ect --help`` fast.
    """

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except EctError as e:
                table = codes() if callable(codes) else (codes or {})
                for cls, code in table.items():
                    if isinstance(e, cls):
                        die(str(e), code)
                die(str(e), EXIT_RUNTIME)
            except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
                die(f"{e.strerror}: {e.filename}", EXIT_USAGE)

        return wrapper  # type: ignore[return-value]

    return deco
