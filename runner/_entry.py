"""The ``ect`` process entry point (``python -m runner`` and the ``ect`` script).

Interrupts are handled from the first instruction: importing the command line takes a moment,
and a Ctrl-C or SIGTERM that lands while it does must end with one ``ect:`` line and the
documented exit code (4), not a ``KeyboardInterrupt`` traceback. Nothing has been written at
that point, so the process simply ends. :func:`runner.cli._common.run_cli` then installs the
handlers the commands use.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

__all__ = ["install_early_interrupt_handlers", "main"]

EXIT_HALTED = 4


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    os.write(2, b"ect: interrupted (Ctrl-C or SIGTERM) while starting; nothing was done\n")
    os._exit(EXIT_HALTED)


def install_early_interrupt_handlers() -> None:
    """SIGINT and SIGTERM end the process with one line and exit 4 until the CLI is ready."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _interrupted_while_starting)


def main() -> None:
    install_early_interrupt_handlers()
    from runner.cli import main as cli_main

    cli_main()
