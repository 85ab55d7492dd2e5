"""Mutation testing of runner/control with mutmut: the score, the survivors, a bounded CI run.

``python -m tests.control.mutation [-v|--markdown]`` prints the score of the mutants judged so far in
``./mutants`` (killed over killed + survived + timeouts + suspicious; mutants no test reaches
count as survivors), per module and overall; ``-v`` lists the survivors.

:func:`run_bounded` runs mutmut on a fixed, small set of modules in a scratch copy of the
repository, so CI measures a deterministic subset in minutes (``tests/control/test_mutation.py``)
while the full run stays opt-in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# The modules CI mutates: the stopping rules, guards, ledger (with its idempotency claims) and
# result: 633 mutants, 121 s on an idle two-core machine (measured 2026-12-02; issue 38 grew
# _ledger from 184 to 426 mutants, about 875 in all, not yet timed on an idle machine; the six-module
# subset with _budget and _killswitch, 1,088 mutants, took 197 s, which with the suite's other
# new tests put .ci/run past its 15-minute budget). `make mutate` covers all of runner/control;
# docs/control.md "Mutation testing" has its last score.
CI_MODULES = tuple(f"runner/control/{m}.py" for m in (
    "_rules", "_guards", "_result", "_ledger"))
# ...and the tests that may kill them: the same per-mutant selection as `make mutate`
# (pyproject.toml [tool.mutmut]); the traced first pass maps each function to the tests that
# reach it, so a mutant runs only those.
CI_TESTS = ("tests/control", "--ignore=tests/control/test_mutants.py",
            "--ignore=tests/control/test_mutation.py",
            "--ignore=tests/control/test_extra_mutation.py",
            "--ignore=tests/control/test_maintainer_bugs.py")

# Status names as mutmut 3 records them (exit code of the test run against each mutant).
_KILLED = {1, 3}
_SURVIVED = {0}
_NO_TESTS = {5, 33}


def statuses(mutants_dir: Path) -> dict[str, int | None]:
    """``{mutant name: exit code}`` from mutmut's ``*.meta`` files (None: not run yet)."""
    out: dict[str, int | None] = {}
    for meta in sorted(mutants_dir.rglob("*.py.meta")):
        data = json.loads(meta.read_text("utf-8"))
        out.update(data.get("exit_code_by_key", {}))
    return out


def summarise(codes: dict[str, int | None]) -> dict[str, Any]:
    killed = sum(1 for c in codes.values() if c in _KILLED)
    survived = sorted(k for k, c in codes.items() if c in _SURVIVED or c in _NO_TESTS)
    not_run = sum(1 for c in codes.values() if c is None)
    other = len(codes) - killed - len(survived) - not_run  # timeouts, suspicious: not killed
    judged = killed + len(survived) + other
    return {"total": len(codes), "killed": killed, "survived": len(survived), "other": other,
            "not_run": not_run, "score": round(killed / judged, 4) if judged else None,
            "survivors": survived}


def module_of(mutant: str) -> str:
    return mutant.split(".x", 1)[0].split(".xǁ", 1)[0]


def _toml(value: Any) -> str:
    """A TOML value for strings, booleans and lists of strings (JSON spells them the same)."""
    return json.dumps(value)  # noqa: TID251 - a config value written for mutmut, never hashed


def run_bounded(workdir: Path, modules: tuple[str, ...] = CI_MODULES,
                tests: tuple[str, ...] = CI_TESTS, timeout_s: float = 1500) -> dict[str, Any]:
    """Copy the repository's package, control tests and docs into ``workdir``, restrict
    mutmut to ``modules`` and run it there. Returns :func:`summarise` of the run."""
    for part in ("runner", "tests", "docs", "schedules"):
        shutil.copytree(REPO / part, workdir / part,
                        ignore=shutil.ignore_patterns("__pycache__", "mutants"))
    for name in ("README.md",):
        shutil.copy2(REPO / name, workdir / name)
    config = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    mm = dict(config["tool"]["mutmut"])
    mm["only_mutate"] = list(modules)
    mm["pytest_add_cli_args_test_selection"] = [*tests, "-k", "not processes"]
    ini = config["tool"]["pytest"]["ini_options"]
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{k} = {_toml(ini[k])}" for k in ("addopts", "filterwarnings", "markers")]
    lines += ["", "[tool.mutmut]"]
    lines += [f"{k} = {_toml(v)}" for k, v in mm.items()]
    (workdir / "pyproject.toml").write_text("\n".join(lines) + "\n", "utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MUTANT"))}
    proc = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", "2"],
                          cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    codes = statuses(workdir / "mutants")
    if not codes:
        raise RuntimeError(f"mutmut produced no results:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return summarise(codes)


def by_module(codes: dict[str, int | None]) -> dict[str, dict[str, Any]]:
    """:func:`summarise` per module (``runner.control._ledger``, ...)."""
    groups: dict[str, dict[str, int | None]] = {}
    for name, code in codes.items():
        groups.setdefault(module_of(name), {})[name] = code
    return {mod: summarise(group) for mod, group in sorted(groups.items())}


def main(argv: list[str]) -> int:
    mutants = REPO / "mutants"
    codes = statuses(mutants)
    if not codes:
        print("no mutation results: run `make mutate` first", file=sys.stderr)
        return 2
    rows = [*by_module(codes).items(), ("all of runner/control", summarise(codes))]
    if "--markdown" in argv:  # the table in docs/control.md
        print("| module | mutants | killed | survived | timeout | not run | score |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for mod, s in rows:
            score = f"{s['score']:.1%}" if s["score"] is not None else "n/a"
            print(f"| `{mod.removeprefix('runner.control.')}` | {s['total']} | {s['killed']} | "
                  f"{s['survived']} | {s['other']} | {s['not_run']} | {score} |")
        return 0
    print(f"{'module':<34} {'mutants':>7} {'killed':>7} {'survived':>8} {'other':>5} "
          f"{'not run':>7} {'score':>7}")
    for mod, s in rows:
        score = f"{s['score']:.1%}" if s["score"] is not None else "n/a"
        print(f"{mod:<34} {s['total']:>7} {s['killed']:>7} {s['survived']:>8} {s['other']:>5} "
              f"{s['not_run']:>7} {score:>7}")
    if "-v" in argv:
        for name in summarise(codes)["survivors"]:
            print(f"  survived: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
