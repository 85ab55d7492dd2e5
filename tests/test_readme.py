"""The README's examples are the product's behaviour: its commands exist and its output is real."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from runner.cli import cli

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text("utf-8")


def test_first_screen_has_the_two_setup_commands() -> None:
    first_block = README.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text("utf-8")
    assert re.search(r"^demo:.*\n\t\$\(VPY\) -m runner demo$", makefile, re.M)
    assert re.search(r"^test:.*\n\t\$\(VPY\) -m pytest -q$", makefile, re.M)
    assert "make test" in (REPO / ".ci" / "run").read_text("utf-8")


def test_every_ect_command_the_readme_names_exists() -> None:
    named = set(re.findall(r"(?<![A-Za-z-])ect ([a-z]+)", README))
    assert named, "the README names no ect command"
    assert named <= set(cli.commands), sorted(named - set(cli.commands))


def test_the_verify_example_prints_what_the_readme_says() -> None:
    block = README.split("$ d=docs/examples/aggregation", 1)[1].split("```", 1)[0]
    lines = [line.strip() for line in block.strip().splitlines()]
    pairs = [(lines[i], lines[i + 1]) for i in range(0, len(lines), 2)]
    assert len(pairs) == 2
    runner = CliRunner()
    for command, expected in pairs:
        argv = shlex.split(command.removeprefix("$ ").replace("$d", "docs/examples/aggregation"))
        assert argv[0] == "ect"
        args = [a if not a.startswith("docs/") else str(REPO / a) for a in argv[1:]]
        result = runner.invoke(cli, args)
        assert result.stdout.strip() == expected
        assert result.exit_code == (0 if '"complete"' in expected else 1)


def test_the_counts_the_readme_states_are_the_code_s() -> None:
    """Counts in the README are read from the code, not remembered (issue 39: it said `ect
    sandbox probe` runs 49 probes when it ran 59)."""
    from runner.sandbox._probes import load_probes
    from runner.study import load_spec, read_schedule
    from runner.worlds import static_grid

    probes = len(load_probes())
    assert f"`ect sandbox probe` checks a machine: it runs {probes}\ndenial and limit probes" in README
    rows = len(read_schedule(REPO / "schedules" / "v2.schedule.jsonl"))
    assert f"canonical {rows}-trajectory schedule" in README
    assert f"v2.schedule.jsonl ({rows} rows)" in README
    spec = load_spec(REPO / "schedules" / "v2.toml")
    pipelines, seeds = len(spec.policies), spec.seeds
    tasks = rows // (2 * pipelines * seeds)
    assert f"({tasks} tasks × 2 checkpoints × {pipelines} termination pipelines × {seeds}\n  seeds)" \
        in README
    assert f"static/` ({len(static_grid())} snapshots × 7 policies)" in README
