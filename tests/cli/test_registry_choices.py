"""Every closed-set option of the CLI offers exactly its library table's names (issue 40): the
sandbox backends, the executors, the stop reasons and the providers are read from the tables,
never spelled out in runner/cli, so a name added to a table is offered everywhere."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click

from runner.cli._app import cli
from runner.cli._params import TableChoice
from runner.control import StopReason
from runner.providers import PROVIDERS
from runner.sandbox import BACKENDS, EXECUTORS
from runner.study._executor import EXECUTORS as STUDY_EXECUTORS

CLI_DIR = Path(__file__).resolve().parents[2] / "runner" / "cli"

# option name -> the table its choices must equal
TABLES: dict[str, tuple[str, ...]] = {
    "sandbox_backend": tuple(BACKENDS),
    "backend": tuple(BACKENDS),
    "executor": tuple(EXECUTORS),
    "expect": tuple(r.value for r in StopReason),
    "provider_name": tuple(PROVIDERS),
}


def _commands(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None
        if isinstance(cmd, click.Group):
            yield from ((f"{name} {sub}", c) for sub, c in _commands(cmd, ctx))
        else:
            yield name, cmd


def _table_options() -> list[tuple[str, str, tuple[str, ...]]]:
    ctx = click.Context(cli)
    return [(path, p.name, tuple(p.type.choices))
            for path, cmd in _commands(cli, ctx) for p in cmd.params
            if p.name is not None and isinstance(p.type, click.Choice) and p.name in TABLES]


def test_every_table_option_offers_its_table() -> None:
    found = _table_options()
    # each table is offered somewhere (a renamed option would otherwise pass silently)
    assert {"sandbox_backend", "backend", "executor", "expect", "provider_name"} <= \
        {name for _, name, _ in found}
    wrong = [(path, name, got) for path, name, got in found if got != TABLES[name]]
    assert not wrong
    assert STUDY_EXECUTORS == EXECUTORS  # the study runs exactly the executors offered


def test_a_name_added_to_a_table_is_offered_at_once() -> None:
    table = ["a", "b"]
    choice = TableChoice(lambda: tuple(table))
    assert choice.choices == ("a", "b")
    table.append("c")
    assert choice.convert("c", None, None) == "c"


def test_no_closed_set_is_spelled_in_the_cli() -> None:
    literal = re.compile(r"click\.Choice\(\s*[\[(]")
    spelled = [f"{p.name}:{n}" for p in sorted(CLI_DIR.glob("*.py"))
               for n, line in enumerate(p.read_text("utf-8").splitlines(), 1)
               if literal.search(line)]
    assert not spelled
