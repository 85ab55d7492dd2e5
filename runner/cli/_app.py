"""The ``ect`` group; each command module contributes its commands through ``COMMANDS``."""

from __future__ import annotations

import click

from runner import __version__
from runner.cli import (
    _analysis,
    _demo,
    _digest,
    _evals,
    _provider,
    _sandbox,
    _store,
    _study,
    _sweep,
    _tasks,
    _verify,
    _view,
)
from runner.cli._common import run_cli

__all__ = ["cli", "main"]

_EPILOG = """\b
Exit codes: 0 success, 1 negative answer (continue / damage / failed check),
2 usage error, 3 refused precondition, 4 halted by a kill switch, 5 runtime failure.
"""


@click.group(
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


for _module in (_verify, _digest, _tasks, _sandbox, _store, _provider, _study, _analysis, _evals,
                _sweep, _demo, _view):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    run_cli(cli)
