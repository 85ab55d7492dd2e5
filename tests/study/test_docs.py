"""docs/study.md stays in step with the code: every outcome field, record body key, decision
verdict, command and exit code it must explain is there."""

from __future__ import annotations

import re

import click

from runner.cli._app import cli
from runner.control import VerdictKind
from runner.loop import OUTCOME_FIELDS, DecisionVerdict
from tests.study.support import REPO

DOC = (REPO / "docs" / "study.md").read_text("utf-8")
TEXT = " ".join(DOC.split())


def test_every_outcome_field_is_documented() -> None:
    for name in OUTCOME_FIELDS:
        assert f"`{name}`" in DOC, name


def test_record_body_keys_and_result_digest() -> None:
    for key in ("row", "cell_id", "schedule_row", "schedule_row_digest", "result",
                "result_digest", "audit", "audit_digest", "artifacts", "code_version"):
        assert f'"{key}"' in DOC, key
    assert 'digest("ect/record/v1", result)' in TEXT and "**without** `timing`" in TEXT


def test_every_decision_verdict_is_documented() -> None:
    verdicts = {"executed", "tool_failed", "stopped"}
    verdicts |= {f"finish_{d}" for d in ("complete", "continue", "stuck", "needs_human")}
    verdicts |= {v.value for v in VerdictKind if v not in (VerdictKind.EXECUTE,
                                                          VerdictKind.CHECK_FINISH,
                                                          VerdictKind.STOP)}
    for v in verdicts:
        assert f"`{v}`" in DOC, v
    assert {v.value for v in DecisionVerdict} == verdicts  # the one vocabulary of the record


def test_documented_commands_and_options_exist() -> None:
    for cmd in set(re.findall(r"`ect ([a-z]+(?: [a-z]+)?)", DOC)):
        name, *sub = cmd.split()
        command = cli.commands.get(name)
        assert command is not None, cmd
        if sub and isinstance(command, click.Group):
            assert sub[0] in command.commands, cmd
    commands = [c for c in cli.commands.values()]
    commands += [s for c in commands if isinstance(c, click.Group) for s in c.commands.values()]
    options = {o for c in commands for p in c.params for o in getattr(p, "opts", [])}
    benchmark_only = {"--cells"}
    for opt in set(re.findall(r"`(--[a-z-]+)", DOC)) - benchmark_only:
        assert opt in options, opt
    assert "--cells" in (REPO / "benchmarks" / "study.py").read_text("utf-8")


def test_exit_codes_are_documented() -> None:
    for code, words in ((1, "negative answer"), (2, "usage error"), (3, "refused"),
                        (4, "halted by a kill switch"), (5, "runtime failure")):
        assert f"{code} {words}" in TEXT, code
    assert "**exit code 4**" in DOC
