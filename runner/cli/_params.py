"""Parameter types and early checks shared by several commands (bad input -> a usage error).

click's ``FloatRange`` lets ``nan`` through (every comparison with it is false), and ``inf``
through when no maximum is set; a NaN cost ceiling or timeout silently disables the limit, so
every float flag that bounds something uses :class:`FiniteFloatRange` instead.

:func:`provider_options` is the one declaration of the provider options (run, resume,
preflight, static, provider smoke); their choices and help are read from the provider table
(runner.providers.PROVIDERS), whose module loads no adapter, httpx or google-genai.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import click

from runner.cli._common import EXIT_USAGE, die

__all__ = [
    "DEFAULT_SCHEDULE",
    "DEFAULT_SPEC",
    "DEFAULT_STATIC_SPEC",
    "EXECUTOR_CHOICE",
    "SANDBOX_BACKENDS",
    "STOP_REASONS",
    "FiniteFloatRange",
    "ProviderName",
    "TableChoice",
    "check_store_dir",
    "provider_options",
    "study_file",
]

# The study's files live in the repository's schedules/ directory (beside runner/), not in the
# installed package: the lock pins them together with the source tree.
DEFAULT_SPEC = "schedules/v2.toml"
DEFAULT_STATIC_SPEC = "schedules/static.toml"
DEFAULT_SCHEDULE = "schedules/v2.schedule.jsonl"

_Command = TypeVar("_Command", bound=Callable[..., Any])


class FiniteFloatRange(click.FloatRange):
    """A ``click.FloatRange`` that also refuses ``nan`` and ``±inf``."""

    name = "float range"

    # value: whatever the command line or a default gave -- click's ParamType.convert contract,
    # the one `Any` a signature of the typed layers keeps
    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None  # noqa: ANN401
    ) -> float:
        rv = super().convert(value, param, ctx)  # click does not call convert for None
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


class TableChoice(click.Choice[str]):
    """A choice whose values are a library table's, read when the option is shown or parsed
    (never when the command is defined: ``ect --help`` imports no library package), so a name
    added to the table is offered everywhere and the CLI never spells a list of its own."""

    def __init__(self, read: Callable[[], tuple[str, ...]]) -> None:
        self._read = read
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return self._read()

    @choices.setter
    def choices(self, value: tuple[str, ...]) -> None:
        del value  # click's constructor assigns the (empty) list: the table is the source


def _sandbox_backends() -> tuple[str, ...]:
    from runner.sandbox import BACKENDS

    return tuple(BACKENDS)


def _executors() -> tuple[str, ...]:
    from runner.sandbox import EXECUTORS  # the study's executors, kept where they load light

    return tuple(EXECUTORS)


def _stop_reasons() -> tuple[str, ...]:
    from runner.control import StopReason

    return tuple(r.value for r in StopReason)


SANDBOX_BACKENDS = TableChoice(_sandbox_backends)
"""``--sandbox-backend`` / ``--backend``: runner.sandbox.BACKENDS."""
EXECUTOR_CHOICE = TableChoice(_executors)
"""``--executor``: runner.sandbox.EXECUTORS (the study's executors)."""
STOP_REASONS = TableChoice(_stop_reasons)
"""A stop reason: runner.control.StopReason's values."""


class ProviderName(TableChoice):
    """``--provider``: the names in the provider table (runner.providers.PROVIDERS), read when
    the option is shown or parsed, so a provider added to the table is offered everywhere.
    The table's module is light: reading it loads no adapter, httpx or google-genai."""

    def __init__(self) -> None:
        super().__init__(_providers)


def _providers() -> tuple[str, ...]:
    from runner.providers import PROVIDERS

    return tuple(PROVIDERS)


class _TableWords(NamedTuple):
    """What the provider options' help says about the provider table."""

    keyless: str
    url_use: str
    env_examples: str

    @classmethod
    def read(cls) -> _TableWords:
        from runner.providers import PROVIDERS, CredentialUse

        live = [e for e in PROVIDERS.values() if not e.simulated]
        url_use = "; ".join(f"{word} for {', '.join(names)}" for word, names in (
            ("required", [e.name for e in live if e.needs_base_url]),
            ("optional", [e.name for e in live if not e.needs_base_url])) if names)
        keyless = ", ".join(e.name for e in PROVIDERS.values()
                            if e.credential is CredentialUse.REFUSED) or "none"
        env_examples = ", ".join(e.credential_env for e in live if e.credential_env) \
            or "MY_API_KEY"
        return cls(keyless, url_use, env_examples)


def _table_help(write: Callable[[_TableWords], str]) -> type[click.Option]:
    """An option class whose help is written from the provider table when it is shown, not
    when the command is defined: listing the commands (``ect --help``) then loads no provider
    module."""

    class TableHelpOption(click.Option):
        def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
            if self.help is None:
                self.help = write(_TableWords.read())
            return super().get_help_record(ctx)

    return TableHelpOption


def provider_options(
    *, model_help: str, default: str | None = "simulated", default_shown: str | None = None
) -> Callable[[_Command], _Command]:
    """The provider options every command that talks to a model shares, in one place:
    ``--provider`` (as ``provider_name``), ``--model``, ``--base-url``, ``--credential-file`` and
    ``--credential-env``. Only ``--model``'s meaning differs per command (the locked model, the
    spec's default, the provider's default), so its help is given; ``default=None`` with
    ``default_shown`` is for a command whose default provider comes from a spec."""
    options = [
        click.option("--provider", "provider_name", type=ProviderName(), default=default,
                     show_default=default_shown or True,
                     cls=_table_help(lambda t: f"Model provider ({t.keyless} needs no "
                                               "credential or network).")),
        click.option("--model", default=None, help=model_help),
        click.option("--base-url", default=None, metavar="URL",
                     cls=_table_help(lambda t: "Provider base URL, e.g. "
                                               f"http://127.0.0.1:8000/v1 ({t.url_use}).")),
        click.option("--credential-file", default=None, type=click.Path(dir_okay=False),
                     help="File holding the API key (owned by you; no access for group or "
                          "others, e.g. mode 0600)."),
        click.option("--credential-env", default=None, metavar="NAME",
                     cls=_table_help(lambda t: "Name of the environment variable holding the "
                                               f"API key (e.g. {t.env_examples}). Once read it is "
                                               "removed from the environment children inherit "
                                               "and, on Linux, wiped from /proc/PID/environ; "
                                               "until then, and in the shell that set it, "
                                               "processes of your user can read it. Prefer "
                                               "--credential-file.")),
    ]

    def decorate(fn: _Command) -> _Command:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


def check_store_dir(store: str | Path, what: str = "store") -> None:
    """Exit 2 when the directory a new store (or other ``what``) would go in does not exist."""
    parent = Path(store).parent
    if not parent.is_dir():
        die(f"{what} directory {parent} does not exist (create it first)", EXIT_USAGE)


def check_out_dir(out: str | Path, *, fresh: bool, option: str = "--out") -> None:
    """Refuse an output directory before any work (exit 2): a path that is a file, one that
    cannot be created or written (the nearest existing ancestor is not writable), and, with
    ``fresh``, a folder that already holds something (a command that fills a folder of its own
    does not write into someone else's).
    """
    import os

    path = Path(out)
    if path.exists() and not path.is_dir():
        die(f"{option} {path}: exists and is not a directory", EXIT_USAGE)
    if fresh and path.is_dir() and any(path.iterdir()):
        die(f"{option} {path}: exists and is not empty; give a new or empty directory",
            EXIT_USAGE)
    ancestor = path
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        die(f"{option} {path}: cannot write in {ancestor}", EXIT_USAGE)


def study_file(given: str | None, default: str, option: str) -> str:
    """The path of a study file: ``given`` as typed, else ``default`` found from here, else in
    the checkout ``runner`` runs from or the study data an installed wheel carries (so ``ect
    demo`` works outside the repository root).

    A path the user typed is never replaced by another file: a missing one is a usage error.
    """
    if given is not None:
        if not Path(given).exists():  # anything else (a FIFO, a device) the reader refuses
            die(f"{option} {given}: no such file", EXIT_USAGE)
        return given
    if Path(default).is_file():
        return default
    from runner.study import study_root

    beside = study_root() / default
    if beside.is_file():
        return str(beside)
    die(f"{default} not found here or in {study_root()}: run from the ect-runner repository "
        f"root or pass {option} PATH", EXIT_USAGE)
