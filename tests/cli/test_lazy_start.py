"""`ect COMMAND` imports only that command's module; `ect verify` on small files does not load
msgspec; listing the commands still shows every one of them, in the same order.

Each start-up check runs in a fresh interpreter (this test process has imported everything).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from runner.cli import _app, cli

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLE = REPO / "docs" / "examples" / "aggregation"

_PROBE = """
import json, sys
sys.argv = ["ect", *json.loads(sys.argv[1])]
code = None
try:
    from runner.cli import main
    main()
except SystemExit as e:
    code = e.code
mods = sorted(m for m in sys.modules if m.startswith("runner.cli._") or m.split(".")[0] == "msgspec")
sys.stderr.write("LOADED " + json.dumps(mods) + "\\n")
sys.exit(code or 0)
"""


def _run(argv: list[str]) -> tuple[int, list[str], str, str]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv)],  # noqa: TID251
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.splitlines()
    loaded = json.loads(lines[-1].removeprefix("LOADED "))
    return proc.returncode, loaded, proc.stdout, "\n".join(lines[:-1])


def _verify_argv(ledger: Path) -> list[str]:
    return ["verify", "--contract", str(EXAMPLE / "contract.json"), "--ledger", str(ledger),
            "--certificate", str(EXAMPLE / "certificate.json")]


def test_verify_loads_its_own_module_and_no_msgspec() -> None:
    code, loaded, out, _ = _run(_verify_argv(EXAMPLE / "ledger.json"))
    assert (code, json.loads(out)["decision"]) == (0, "complete")
    assert [m for m in loaded if m.startswith("runner.cli._")] == [
        "runner.cli._app", "runner.cli._common", "runner.cli._verify"]
    assert not [m for m in loaded if m.startswith("msgspec")]


def test_verify_of_large_files_uses_the_compiled_parser_with_the_same_decision(
    tmp_path: Path,
) -> None:
    from runner.cli._verify import COMPILED_FROM_BYTES

    # The example ledger, indented: the same document, now above the compiled parser's size.
    doc = json.loads((EXAMPLE / "ledger.json").read_bytes())
    big = tmp_path / "ledger.json"
    big.write_text(json.dumps(doc, indent=1) + " " * COMPILED_FROM_BYTES)  # noqa: TID251
    small_code, _, small_out, _ = _run(_verify_argv(EXAMPLE / "ledger.json"))
    code, loaded, out, _ = _run(_verify_argv(big))
    assert (code, out) == (small_code, small_out)
    assert "msgspec" in loaded


def test_a_command_runs_from_its_module_alone() -> None:
    code, loaded, out, _ = _run(["store", "--help"])
    assert code == 0 and out.startswith("Usage: ect store")
    assert "runner.cli._store" in loaded and "runner.cli._study" not in loaded


def test_an_unknown_command_is_still_matched_against_every_command() -> None:
    code, loaded, _, err = _run(["preflite"])
    assert code == 2
    assert "No such command 'preflite'" in err and "preflight" in err
    assert {f"runner.cli.{m}" for m in _app.MODULES} <= set(loaded)


def test_homes_name_the_module_of_every_command() -> None:
    homes = {c.name: m for m in _app.MODULES
             for c in importlib.import_module(f"runner.cli.{m}").COMMANDS}
    assert homes == _app.HOMES


def test_commands_are_listed_in_module_order_whichever_ran_first() -> None:
    fresh = _app._LazyGroup(name="ect")
    assert fresh.get_command(None, "run") is not None  # type: ignore[arg-type]
    names = list(fresh.commands)
    assert names == [c.name for m in _app.MODULES
                     for c in importlib.import_module(f"runner.cli.{m}").COMMANDS]
    assert names == list(cli.commands)
    help_text = CliRunner().invoke(cli, ["--help"]).output
    assert all(f"  {name} " in help_text for name in names)


# The executor chain `ect run` needs and `ect preflight` does not: the trajectory engine, its
# controller (structlog), the simulated provider and the providers' HTTP stack.
EXECUTOR_CHAIN = ("runner.loop._trajectory", "runner.control._controller",
                  "runner.providers._adapter", "runner.providers._simulated", "httpx", "structlog")


def test_preflight_does_not_load_the_executor_chain(tmp_path: Path) -> None:
    # Issue 37: `ect preflight` imported runner.study, whose __init__ imported every module of
    # the study and so the loop, the policies and the providers (1.1 of 1.25 s of imports at
    # load 3.4). A store that is not one ends the preflight after its lock, store, credential,
    # generation and sandbox checks, before the probes, so this start-up check runs in seconds.
    store = tmp_path / "store.db"
    store.write_bytes(b"not a store")
    code, _, _, err = _run(["preflight", "--store", str(store)])
    assert code == 3 and "does not verify" in err, err
    probe = ("import json, sys, runpy; sys.argv = ['ect', 'preflight', '--store', sys.argv[1]]\n"
             "try:\n    runpy.run_module('runner', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print(json.dumps(sorted(sys.modules)))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", probe, str(store)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    loaded = set(json.loads(proc.stdout.splitlines()[-1]))
    assert "runner.study._preflight" in loaded and "runner.sandbox" in loaded
    assert not [m for m in EXECUTOR_CHAIN if m in loaded]
