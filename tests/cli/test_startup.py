"""`ect` starts fast: importing the CLI (and so `ect --help`, `ect verify`) loads no heavy package.

Each check runs in a fresh interpreter, since this test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
HEAVY = ("numpy", "scipy", "google.genai", "httpx")
EXAMPLE = REPO / "docs" / "examples" / "aggregation"

# Runs `ect ARGV` (or only `import runner.cli`) and reports which HEAVY modules got loaded.
_PROBE = """
import json, sys
argv, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["ect", *argv]
code = None
try:
    if argv == ["--import-only"]:
        import runner.cli
    else:
        from runner.cli import main
        main()
except SystemExit as e:
    code = e.code
sys.stderr.write("LOADED " + json.dumps(sorted(m for m in heavy if m in sys.modules)) + "\\n")
sys.exit(code or 0)
"""


def _loaded(argv: list[str], heavy: tuple[str, ...] = HEAVY) -> tuple[int, list[str], str]:
    args = [json.dumps(argv), json.dumps(heavy)]  # noqa: TID251 - argv text, not hashed
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED ")]
    assert line, proc.stderr
    return proc.returncode, json.loads(line[-1].removeprefix("LOADED ")), proc.stdout


def test_import_runner_cli_loads_no_heavy_package() -> None:
    code, heavy, _ = _loaded(["--import-only"])
    assert code == 0
    assert heavy == []


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["demo", "--help"],
                                  ["static", "--help"], ["report", "--help"],
                                  ["sandbox", "run", "--help"], ["provider", "smoke", "--help"]])
def test_help_loads_no_heavy_package(argv: list[str]) -> None:
    code, heavy, out = _loaded(argv)
    assert code == 0 and out.startswith("Usage: ect")
    assert heavy == []


def test_listing_the_commands_loads_no_library_package() -> None:
    # the provider options' help is written from the provider table only when a command's own
    # help shows it: `ect --help` (which defines every command) reads no library package
    code, loaded, out = _loaded(["--help"], ("runner.providers", "runner.study", "dataclasses"))
    assert code == 0 and out.startswith("Usage: ect")
    assert loaded == []


def test_verify_loads_no_heavy_package() -> None:
    code, heavy, out = _loaded(["verify", "--contract", str(EXAMPLE / "contract.json"),
                                "--ledger", str(EXAMPLE / "ledger.json"),
                                "--certificate", str(EXAMPLE / "certificate.json")])
    assert (code, json.loads(out)["decision"]) == (0, "complete")
    assert heavy == []


def test_a_command_that_needs_analysis_still_gets_it() -> None:
    # The laziness moves imports, it does not drop them: `ect report` on a missing store fails
    # inside the library (which it imported), with a one-line error and no traceback.
    code, heavy, _ = _loaded(["report", "--store", "/nonexistent/v2.db", "--out", "/tmp/x"])
    assert code in (2, 3)
    assert "numpy" in heavy


def test_the_report_seed_shown_in_help_is_the_library_default() -> None:
    from runner.analysis import DEFAULT_REPORT_SEED
    from runner.cli._analysis import REPORT_SEED

    assert REPORT_SEED == DEFAULT_REPORT_SEED


def test_the_provider_names_the_cli_offers_are_the_registry_s() -> None:
    from runner.cli._params import ProviderName
    from runner.providers import PROVIDER_NAMES as REGISTRY

    assert ProviderName().choices == REGISTRY


def test_sandbox_run_default_output_cap_is_the_tools_limit() -> None:
    from click.testing import CliRunner

    from runner.cli import cli
    from runner.sandbox import Limits

    assert Limits().output_bytes == 4 << 20  # what `ect sandbox run --help` says: 4 MiB
    text = CliRunner().invoke(cli, ["sandbox", "run", "--help"]).output
    assert "4 MiB" in " ".join(text.split())
