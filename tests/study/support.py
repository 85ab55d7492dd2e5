"""Helpers shared by the study tests: a small study of our own, runs, digests, subprocesses.

The committed ``schedules/v2.lock.json`` pins a source-tree digest, so it goes stale whenever
anything under ``runner/`` changes; these tests therefore build their own study in a temporary
directory (a copy of ``schedules/v2.toml`` shrunk to one world and one seed: 6 tasks x 2
checkpoints x 1 seed x 4 policies = 48 rows) and lock it against the tree as it is.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.study import (
    PreflightReport,
    ProviderChoice,
    RunSettings,
    RunSummary,
    execute,
    load_spec,
    run_preflight,
    study_paths,
    write_lock,
    write_schedule,
)

REPO = Path(__file__).resolve().parents[2]
SMALL_ROWS = 48
DRIVER = Path(__file__).resolve().with_name("cli_driver.py")


def make_study(directory: Path, *, worlds: tuple[str, ...] = ("w10",), seeds: int = 1,
               edits: dict[str, str] | None = None) -> Path:
    """Copy ``schedules/v2.toml`` into ``directory`` (shrunk), build its schedule and lock."""
    text = (REPO / "schedules" / "v2.toml").read_text("utf-8")
    world_list = ", ".join(f'"{w}"' for w in worlds)
    text, n = re.subn(r"(?m)^worlds = .*$", f"worlds = [{world_list}]", text)
    assert n == 1, "schedules/v2.toml has no [design] worlds line"
    text, n = re.subn(r"(?m)^seeds = \d+$", f"seeds = {seeds}", text)
    assert n == 1, "schedules/v2.toml has no [design] seeds line"
    for old, new in (edits or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    directory.mkdir(parents=True, exist_ok=True)
    spec_path = directory / "v2.toml"
    spec_path.write_text(text, "utf-8")
    relock(spec_path)
    return spec_path


def relock(spec_path: Path) -> dict[str, Any]:
    spec = load_spec(spec_path)
    paths = study_paths(spec_path)
    write_schedule(spec, paths, replace=True)
    return write_lock(spec, paths, replace=True)


def preflight(spec_path: Path, store_path: Path,
              provider: ProviderChoice | None = None) -> PreflightReport:
    """Preflight with the two mandatory denial probes only (fast; recorded in the report)."""
    return run_preflight(spec_path, store_path, provider, probes="mandatory")


def run(spec_path: Path, store_path: Path, *, resume: bool = False,
        on_cell: Callable[[dict[str, Any], RunSummary], None] | None = None,
        **settings: Any) -> RunSummary:
    """``execute`` after a passing mandatory-probe preflight."""
    report = preflight(spec_path, store_path, settings.get("provider"))
    assert report.passed, [c.to_json() for c in report.checks if not c.ok]
    return execute(RunSettings(spec_path, store_path, **settings), resume=resume,
                   preflight=report, on_cell=on_cell)


def bodies(store_path: Path) -> list[dict[str, Any]]:
    from runner.store import Store

    with Store.open(store_path) as store:
        return [rec.body for rec in store.records(1)]


def result_digests(store_path: Path) -> dict[str, str]:
    """``{cell_id: result_digest}`` of every committed cell."""
    return {b["cell_id"]: b["result_digest"] for b in bodies(store_path)}


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def ect_argv(*args: str, all_probes: bool = False) -> list[str]:
    """argv for the ``ect`` CLI in a child interpreter.

    ``all_probes`` runs ``python -m runner`` as shipped; otherwise the driver runs the same CLI
    with preflight limited to the mandatory denial probes (to keep the suite fast).
    """
    if all_probes:
        return [sys.executable, "-m", "runner", *args]
    return [sys.executable, str(DRIVER), *args]


def ect(*args: str, all_probes: bool = False, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(ect_argv(*args, all_probes=all_probes), cwd=REPO,
                          env=env or subprocess_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def orphaned_cells(store_path: Path) -> set[str]:
    """Cells with journaled provider attempts but no committed record, read without writing
    (safe while another process is appending)."""
    import sqlite3

    from runner.canonical import loads_strict

    conn = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
    try:
        attempted = {r[0] for r in conn.execute("SELECT DISTINCT cell_id FROM attempts")}
        committed = {loads_strict(r[0])["cell_id"]
                     for r in conn.execute("SELECT body FROM records WHERE seq > 0")}
    except sqlite3.Error:
        return set()
    finally:
        conn.close()
    return attempted - committed


def start_run(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``ect run`` (mandatory probes) as a child with JSON logs on a pipe."""
    return subprocess.Popen(ect_argv("run", *args, "--log-json", "--quiet"), cwd=REPO,
                            env=env or subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_commits(proc: subprocess.Popen[str], n: int, log: list[str]) -> int:
    """Read the child's JSON log until ``n`` cells were committed; return how many were."""
    assert proc.stderr is not None
    committed = 0
    for line in proc.stderr:
        log.append(line)
        if '"cell.committed"' in line:
            committed += 1
            if committed >= n:
                break
    return committed


def reap(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Kill the child if it still runs, collect what it wrote and close its pipes."""
    if proc.poll() is None:
        proc.kill()
    return proc.communicate(timeout=120)


def tampered_copy(store_path: Path, dest: Path, seq: int) -> Path:
    """A copy of the store (and its checkpoint) whose record ``seq`` was rewritten behind the
    store's back: the append-only trigger is dropped, the body edited, the trigger put back."""
    import shutil
    import sqlite3

    shutil.copyfile(store_path, dest)
    shutil.copyfile(store_path.with_name(store_path.name + ".checkpoint"),
                    dest.with_name(dest.name + ".checkpoint"))
    conn = sqlite3.connect(dest, isolation_level=None)
    try:
        trigger = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'records_no_update'").fetchone()[0]
        conn.execute("DROP TRIGGER records_no_update")
        body = conn.execute("SELECT body FROM records WHERE seq = ?", (seq,)).fetchone()[0]
        conn.execute("UPDATE records SET body = ? WHERE seq = ?",
                     (body.replace(b'"turns":', b'"turns":1', 1), seq))
        conn.execute(trigger)
    finally:
        conn.close()
    return dest
