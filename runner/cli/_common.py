"""Exit codes and error mapping shared by every command.

Exit codes (documented in the README and ``ect --help``):

    0  success (``verify``: complete; ``store verify``: intact; probes/evals: all passed)
    1  a negative answer (``verify``: continue; damage found; a probe or eval failed)
    2  usage error (bad flags, missing file)
    3  refused: a precondition did not hold (preflight, lock drift, incomplete inventory)
    4  halted cleanly at a cell boundary (STOP file, cost or call ceiling, Ctrl-C); also
       interrupted (Ctrl-C, SIGTERM) in any other phase
    5  runtime failure (sandbox unavailable, provider failure, disk full, internal error)

Each error class carries its category (``exit_category``, see :mod:`runner.errors`), and
:data:`EXIT_CODES` maps the category to the code; a command overrides it only where its own
question gives an error another meaning (``store verify`` answers "is it damaged?", so damage is
its negative answer, 1, where every other command is refused by it, 3).

An ``OSError`` a user can cause maps to one line: a path that is missing, not writable, on a
read-only filesystem, a directory where a file is expected, a name too long -- exit 2; a full
disk or quota, an I/O error -- exit 5.
"""

from __future__ import annotations

import errno
import functools
import signal
import sys
from collections.abc import Callable, Mapping
from types import FrameType
from typing import NoReturn, Protocol, TypeVar

import click

from runner.errors import EctError, ExitCategory

__all__ = [
    "EXIT_CODES",
    "EXIT_HALTED",
    "EXIT_NEGATIVE",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_RUNTIME",
    "EXIT_USAGE",
    "Decorator",
    "die",
    "exit_code",
    "map_errors",
    "oserror_exit",
    "run_cli",
]

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_HALTED = 4
EXIT_RUNTIME = 5

EXIT_CODES: Mapping[ExitCategory, int] = {
    ExitCategory.NEGATIVE: EXIT_NEGATIVE,
    ExitCategory.USAGE: EXIT_USAGE,
    ExitCategory.REFUSED: EXIT_REFUSED,
    ExitCategory.HALTED: EXIT_HALTED,
    ExitCategory.RUNTIME: EXIT_RUNTIME,
}
"""The exit code of each error category (the README's table)."""

Overrides = Mapping[type[EctError], int]

F = TypeVar("F", bound=Callable[..., object])
"""A command function (or any callable a decorator returns unchanged)."""


class Decorator(Protocol):
    """An option decorator (what ``click.option(...)`` returns): gives its function back."""

    def __call__(self, fn: F, /) -> F: ...


_USAGE_ERRNOS = frozenset({
    errno.ENOENT, errno.EISDIR, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS,
    errno.ENAMETOOLONG, errno.EEXIST, errno.ELOOP, errno.ENXIO, errno.ETXTBSY,
})
"""OSErrors that name a path the user gave wrongly: usage errors (exit 2). Anything else
(ENOSPC, EDQUOT, EIO, ...) is the machine's state: a runtime failure (exit 5)."""


def die(message: str, code: int) -> NoReturn:
    """Print ``ect: <message>`` (first line only) to stderr and exit with ``code``."""
    line = message.strip().splitlines()[0] if message.strip() else "error"
    click.echo(f"ect: {line}", err=True)
    sys.exit(code)


def exit_code(error: EctError, overrides: Overrides | None = None) -> int:
    """The exit code of ``error``: the most specific of its classes that ``overrides`` names
    decides (whatever the mapping's order), else its class's ``exit_category``."""
    for cls in type(error).__mro__:
        if overrides and cls in overrides:
            return overrides[cls]
    return EXIT_CODES[type(error).exit_category]


def map_errors(overrides: Overrides | Callable[[], Overrides] | None = None) -> Callable[[F], F]:
    """Decorate a command so deliberate errors become a one-line message and an exit code.

    An :class:`EctError` exits with the code of its class's category (:func:`exit_code`);
    ``overrides`` maps error classes to other codes where the command's question changes an
    error's meaning (the error's most specific class in it decides, as in httpx's error
    mapping). ``OSError`` on user-supplied paths is a usage error. Unexpected exceptions still
    raise: those are bugs and deserve a traceback.

    ``overrides`` may also be a function returning that mapping, called only when an error is
    being mapped: command modules then import the library's error classes (and the heavy
    modules that define them) only when a command runs, which keeps ``ect --help`` fast.
    """

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: object, **kwargs: object) -> object:
            try:
                return fn(*args, **kwargs)
            except EctError as e:
                die(_named(e), exit_code(e, overrides() if callable(overrides) else overrides))
            except OSError as e:
                message, code = oserror_exit(e)
                die(message, code)
            except KeyboardInterrupt:
                die("interrupted (Ctrl-C or SIGTERM) before the command finished", EXIT_HALTED)

        return wrapper  # type: ignore[return-value]

    return deco


def _named(e: EctError) -> str:
    """The error's line; store damage leads with its one name, ``DAMAGED (kind) at seq N``
    (the same words ``store verify`` and the viewer use)."""
    from runner.store import NotAStore, StoreDamaged  # loaded already if one was raised

    if isinstance(e, StoreDamaged) and not isinstance(e, NotAStore) and "DAMAGED (" not in str(e):
        return f"{e.label}: {e}"
    return str(e)


def oserror_exit(e: OSError) -> tuple[str, int]:
    """The one-line message and exit code for an ``OSError`` (see the module docstring)."""
    what = e.strerror or str(e) or type(e).__name__
    where = e.filename if e.filename is not None else None
    message = f"{what}: {where}" if where is not None else what
    if e.errno == errno.ENOSPC or e.errno == getattr(errno, "EDQUOT", -1):
        message += " (nothing half-written was kept; free space and run the command again)"
    return message, EXIT_USAGE if e.errno in _USAGE_ERRNOS else EXIT_RUNTIME


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_cli(group: click.Command) -> None:
    """Run ``group`` as the ``ect`` process: SIGTERM (what docker, systemd and CI send) is
    handled like Ctrl-C, and an interrupt in any phase -- argument parsing, start-up, a
    command without its own handling -- ends with one ``ect:`` line and exit 4, never click's
    ``Aborted!`` or a traceback. A study run replaces both handlers with its own cell-boundary
    halt while it runs cells."""
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    except ValueError:  # not the main thread
        pass
    try:
        _run_group(group)
    except SystemExit as e:
        _exit_quietly_on_interrupt(e.code if isinstance(e.code, int) else 1)
        raise


def _exit_quietly_on_interrupt(code: int) -> None:
    """From here on the process only exits with ``code`` (worker threads join at interpreter
    shutdown): an interrupt meanwhile -- say the second Ctrl-C right after a cell-boundary halt
    -- is ignored rather than killing the process by SIGINT. Ignored, not handled: Python resets
    its own handlers to the default action late in shutdown, but leaves an ignored signal
    ignored."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass


def _run_group(group: click.Command) -> None:
    try:
        try:
            rv = group.main(standalone_mode=False)
        except click.exceptions.Abort:
            die("interrupted (Ctrl-C or SIGTERM) before the command finished", EXIT_HALTED)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except OSError as e:
            message, code = oserror_exit(e)
            die(message, code)
    except KeyboardInterrupt:
        die("interrupted (Ctrl-C or SIGTERM) before the command finished", EXIT_HALTED)
    sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)
