"""Every example in README.md, docs/*.md and the `--help` texts runs as written (offline).

* ```python blocks: each file's blocks run in order in one namespace (as a reader would paste
  them), in a scratch directory.
* Prompted shell lines (`$ ect ...`, `$ d=...`) in sh/console blocks and in `--help` texts: run
  through bash, a file's blocks in order in one scratch directory (with the repository's docs/
  and schedules/ beside it); expected output printed under a command is compared when it is
  complete (no `...`). The exit code must be 0, or 1 where the shown output is a `continue`.
* Unprompted `ect ...` lines (command lists, synopses, the study's long-running steps): every
  command and every `--option` they name must exist.
* Also: the docs stand alone (no "DESIGN §N", "INTERFACES.md" or bare "the paper"), and every
  relative link points at a file of the repository.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import click
import pytest

from runner.cli import cli

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
ECT = str(Path(sys.executable).with_name("ect"))


def _blocks(path: Path) -> list[tuple[str, str]]:
    text = path.read_text("utf-8")
    return [(m["lang"], textwrap.dedent(m["body"])) for m in FENCE.finditer(text)]


def _comment_free(line: str) -> str:
    return re.sub(r"\s+#\s.*$", "", line).strip()


def _prompted(body: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for each `$ ` line, joining `\\` continuations."""
    out: list[tuple[str, list[str]]] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            out.append((_comment_free(cmd), []))
        elif out and line.strip():
            out[-1][1].append(line)
        i += 1
    return out


def _help_texts() -> dict[str, str]:
    texts: dict[str, str] = {}

    def walk(command: click.Command, path: list[str]) -> None:
        with click.Context(command, info_name=" ".join(path)) as ctx:
            texts[" ".join(path)] = command.get_help(ctx)
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])

    walk(cli, ["ect"])
    return texts


def _scratch(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir(parents=True)
    for name in ("docs", "schedules"):
        (work / name).symlink_to(REPO / name)
    return work


def _run_prompted(commands: list[tuple[str, list[str]]], cwd: Path, where: str) -> int:
    """Run `$ ect` lines (with the `x=...` assignments before them); returns how many ran."""
    env = {**os.environ, "PATH": f"{Path(ECT).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    assignments: list[str] = []
    ran = 0
    for cmd, expected in commands:
        if re.fullmatch(r"[A-Za-z_]\w*=\S+", cmd):
            assignments.append(cmd)
            continue
        if not cmd.startswith("ect "):
            continue  # e.g. `python tests/worlds/regenerate_golden.py` rewrites repo files
        proc = subprocess.run(["bash", "-c", "; ".join([*assignments, cmd])], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        shown = "\n".join(expected)
        allowed = {0, 1} if '"decision":"continue"' in shown.replace(" ", "") else {0}
        assert proc.returncode in allowed, (where, cmd, proc.returncode, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (where, cmd, proc.stderr[-2000:])
        if expected and "..." not in shown:
            try:
                assert json.loads(proc.stdout) == json.loads(shown), (where, cmd)
            except json.JSONDecodeError:
                assert proc.stdout.strip() == shown.strip(), (where, cmd)
        ran += 1
    return ran


def _python(path: Path) -> list[str]:
    return [body for lang, body in _blocks(path) if lang == "python"]


def _shell(path: Path) -> list[tuple[str, list[str]]]:
    return [c for lang, body in _blocks(path) if lang in ("", "sh", "console")
            for c in _prompted(body)]


# Python examples this test does not execute, each with the reason (kept honest below).
NOT_RUN_HERE = {
    "integrations.md": "tests/integrations/test_docs.py runs them, filtering the framework SDKs' "
                       "own ResourceWarnings",
    "distributed.md": "reads a store made with --executor ray, which needs a Ray cluster",
}
PYTHON_DOCS = [p for p in DOCS if _python(p) and p.name not in NOT_RUN_HERE]


def test_every_example_not_run_here_exists_and_says_why() -> None:
    for name, reason in NOT_RUN_HERE.items():
        assert _python(REPO / "docs" / name), name
        assert reason
    assert (REPO / "tests" / "integrations" / "test_docs.py").is_file()
SHELL_DOCS = [p for p in DOCS if any(cmd.startswith("ect ") for cmd, _ in _shell(p))]


def test_the_examples_are_found() -> None:
    names = {p.name for p in PYTHON_DOCS} | {p.name for p in SHELL_DOCS}
    assert {"README.md", "providers.md", "sandbox.md", "control.md", "formats.md",
            "protocol.md"} <= names, names


@pytest.fixture(scope="module")
def example_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`stores/v2.db` as the docs' examples assume one: the locked study's first two cells."""
    from tests.study.support import run

    stores = tmp_path_factory.mktemp("stores")
    run(REPO / "schedules" / "v2.toml", stores / "v2.db", limit=2)
    return stores


@pytest.mark.parametrize("path", PYTHON_DOCS, ids=lambda p: p.name)
def test_python_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             request: pytest.FixtureRequest) -> None:
    blocks = _python(path)
    work = _scratch(tmp_path)
    if any("stores/v2.db" in body for body in blocks):
        (work / "stores").symlink_to(request.getfixturevalue("example_store"))
    monkeypatch.chdir(work)
    namespace: dict[str, Any] = {"__name__": f"doc_example_{path.stem}"}
    for body in blocks:
        exec(compile(body, f"{path.name} example", "exec"), namespace)


@pytest.mark.parametrize("path", SHELL_DOCS, ids=lambda p: p.name)
def test_prompted_shell_examples_run(path: Path, tmp_path: Path) -> None:
    assert _run_prompted(_shell(path), _scratch(tmp_path), path.name) > 0


def test_help_text_examples_run(tmp_path: Path) -> None:
    ran = 0
    for name, text in _help_texts().items():
        commands = _prompted("\n".join(line.strip() for line in text.splitlines()
                                       if line.strip().startswith("$ ")))
        ran += _run_prompted(commands, _scratch(tmp_path / name.replace(" ", "_")), name) \
            if commands else 0
    assert ran >= 1  # `ect sandbox run --help` shows one


def _resolve(words: list[str]) -> click.Command:
    command: click.Command = cli
    for word in words:
        if not isinstance(command, click.Group) or word not in command.commands:
            break
        command = command.commands[word]
    return command


def test_every_ect_line_names_real_commands_and_options() -> None:
    checked = 0
    lines = [(path.name, line) for path in DOCS for lang, body in _blocks(path)
             if lang in ("", "sh", "console") for line in body.splitlines()]
    lines += [(name, line) for name, text in _help_texts().items() for line in text.splitlines()]
    for where, raw in lines:
        line = _comment_free(raw.strip().removeprefix("$ "))
        if not line.startswith("ect "):
            continue
        words = re.findall(r"(?<=\s)[a-z][a-z-]*(?=\s|$)", " " + line.split("ect ", 1)[1])
        command = _resolve(words)
        assert command is not cli, (where, line)
        options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        options |= {"--help", "-h"}
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line.split(" -- ")[0]))
        assert named <= options, (where, line, sorted(named - options))
        checked += 1
    assert checked >= 30, checked


def test_docs_stand_alone() -> None:
    for path in DOCS:
        text = path.read_text("utf-8")
        for banned in ("DESIGN §", "DESIGN.md", "INTERFACES.md"):
            assert banned not in text, (path.name, banned)
        for m in re.finditer(r"the (ECT )?paper\b", text):
            tail = text[m.end():m.end() + 120]
            assert "When May an Agent Stop" in tail, (path.name, text[m.start():m.end() + 60])


def test_relative_links_resolve() -> None:
    for path in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text("utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            assert (path.parent / target).exists(), (path.name, target)
