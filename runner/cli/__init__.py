"""The ``ect`` command line: a thin layer over the library (README.md).

Each command module builds one library object, calls one method, and maps the error root to an
exit code and a one-line message (see :mod:`runner.cli._common`).
"""

from runner.cli._app import cli, main

__all__ = ["cli", "main"]
