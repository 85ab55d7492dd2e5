"""map_errors: the most specific class of an error decides its exit code, whatever the order."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from runner.cli._common import EXIT_REFUSED, EXIT_RUNTIME, EXIT_USAGE, map_errors
from runner.errors import EctError, StudyError


class _Specific(StudyError):
    pass


def _command(error: Exception) -> click.Command:
    @click.command()
    @map_errors({EctError: EXIT_RUNTIME, StudyError: EXIT_USAGE, _Specific: EXIT_REFUSED})
    def cmd() -> None:
        raise error

    return cmd


@pytest.mark.parametrize(
    ("error", "code"),
    [(_Specific("x"), EXIT_REFUSED), (StudyError("x"), EXIT_USAGE), (EctError("x"), EXIT_RUNTIME)],
)
def test_most_specific_class_wins(error: Exception, code: int) -> None:
    res = CliRunner().invoke(_command(error))
    assert res.exit_code == code
    assert res.stderr == "ect: x\n"
