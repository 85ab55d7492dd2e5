"""The ``ect`` group; each command module contributes its commands through ``COMMANDS``.

A command module is imported when one of its commands runs, not before: ``ect verify`` loads
click, :mod:`runner.cli._verify` and what verifying needs, none of the other command modules or
the libraries they use. Listing the commands (``ect --help``, ``cli.commands``) imports every
module, in :data:`MODULES` order.
"""

from __future__ import annotations

import importlib

import click

from runner import __version__
from runner.cli._common import run_cli

__all__ = ["HOMES", "MODULES", "cli", "main"]

MODULES = ("_verify", "_digest", "_tasks", "_sandbox", "_store", "_provider", "_study",
           "_plan", "_analysis", "_evals", "_sweep", "_demo", "_view")
"""The command modules of ``runner.cli``, in the order their commands are registered."""

HOMES: dict[str, str] = {
    "verify": "_verify", "digest": "_digest", "tasks": "_tasks", "sandbox": "_sandbox",
    "store": "_store", "provider": "_provider", "schedule": "_study", "preflight": "_study",
    "run": "_study", "resume": "_study", "export": "_study", "replay": "_study",
    "plan": "_plan",
    "static": "_analysis", "report": "_analysis", "evals": "_evals", "sweep": "_sweep",
    "demo": "_demo", "view": "_view",
}
"""The module that defines each command (tests/cli/test_startup.py checks it against the
modules). A command missing here still runs: finding it loads every module."""


class _LazyGroup(click.Group):
    """A group whose commands are imported on first use (click's "lazy loading" pattern).

    ``get_command`` imports only the named command's module; anything that lists the commands
    (``commands``, ``list_commands``, an unknown name's "did you mean" hint) imports them all.
    """

    _all = False
    _loading = False
    _commands: dict[str, click.Command]  # set through the setter by click.Group.__init__

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        if not self._all and not self._loading:
            self._load_all()
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = value

    def _load(self, module: str) -> list[click.Command]:
        commands: list[click.Command] = importlib.import_module(f"runner.cli.{module}").COMMANDS
        self._loading = True
        try:
            for command in commands:
                if command.name not in self._commands:
                    self.add_command(command)
        finally:
            self._loading = False
        return commands

    def _load_all(self) -> None:
        loaded = [c for module in MODULES for c in self._load(module)]
        # Registered in MODULES order, whichever command was run first; then any command
        # added to the group directly.
        ordered = {c.name: c for c in loaded if c.name is not None}
        self._commands = {**ordered, **self._commands}
        self._all = True

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        home = HOMES.get(cmd_name)
        if home is not None and not self._all:
            self._load(home)
            if cmd_name in self._commands:
                return self._commands[cmd_name]
        return self.commands.get(cmd_name)


_EPILOG = """\b
Exit codes: 0 success, 1 negative answer (continue / damage / failed check),
2 usage error, 3 refused precondition, 4 halted by a kill switch, 5 runtime failure.
"""


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=_EPILOG,
)
@click.version_option(__version__, prog_name="ect")
def cli() -> None:
    """ect: decide, with evidence, when a tool-using agent may stop.

    Verify Evidence-Carrying Termination certificates, run the frozen sandboxed
    closed-loop study, and regenerate its reports. Everything runs offline on the
    deterministic simulated provider unless you pick another.
    """


def main() -> None:
    run_cli(cli)
