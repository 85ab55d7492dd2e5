"""Fixtures for the store tests: keys, headers and small stores on real SQLite files."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.canonical import digest
from runner.store import ManifestCell, ScheduleMismatch, Store, generate_key
from runner.store._keys import Ed25519PrivateKey

WRITER = Path(__file__).with_name("_writer.py")


def make_header(**extra: Any) -> dict[str, Any]:
    return {
        "lock_digest": digest("ect/lock/v1", {"lock": "test"}),
        "preflight_digest": digest("ect/lock/v1", {"preflight": "test"}),
        **extra,
    }


def cell_body(i: int, *, tag: str = "c") -> dict[str, Any]:
    """A record body shaped like runner.study's (INTERFACES: Record body)."""
    row = {"row": i, "cell_id": f"{tag}{i:03d}", "task_id": f"t{i % 3}", "seed": i % 2}
    result = {"outcome": {"stop_reason": "goal_met" if i % 3 else "needs_human"}, "n": i}
    audit = {"attempts": [i]}
    return {
        "row": i,
        "cell_id": row["cell_id"],
        "schedule_row": row,
        "schedule_row_digest": digest("ect/schedule-row/v1", row),
        "result": result,
        "result_digest": digest("ect/value/v1", result),
        "audit": audit,
        "audit_digest": digest("ect/value/v1", audit),
        "artifacts": {},
        "code_version": "test",
    }


def manifest_cell(i: int, *, tag: str = "c") -> ManifestCell:
    """What runner.study hands the manifest export for :func:`cell_body` ``(i)``."""
    body = cell_body(i, tag=tag)
    return ManifestCell(body["row"], body["cell_id"], body["result_digest"],
                        body["audit_digest"], body["result"]["outcome"]["stop_reason"])


def cell_of(seq: int, body: Any) -> ManifestCell:
    """The caller's reading of a :func:`cell_body` record for manifest verification (the store
    reads no field of a body itself)."""
    if not isinstance(body, dict) or "cell_id" not in body:
        raise ScheduleMismatch(f"record {seq} is not a cell record")
    return ManifestCell(body["row"], body["cell_id"], body["result_digest"],
                        body["audit_digest"], body["result"]["outcome"]["stop_reason"])


def run_writer(
    *args: str, stdin: str = "", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WRITER), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def raw(path: Path) -> sqlite3.Connection:
    """A plain connection that bypasses the store (the attacker's view)."""
    return sqlite3.connect(path, isolation_level=None)


def drop_triggers(conn: sqlite3.Connection) -> list[str]:
    sqls = [r[0] for r in conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'trigger'")]
    for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    return sqls


def restore_triggers(conn: sqlite3.Connection, sqls: list[str]) -> None:
    for sql in sqls:
        conn.execute(sql)


@pytest.fixture
def key(tmp_path: Path) -> Ed25519PrivateKey:
    return generate_key(tmp_path / "signing.key")


@pytest.fixture
def key_path(tmp_path: Path, key: Ed25519PrivateKey) -> Path:
    return tmp_path / "signing.key"


@pytest.fixture
def new_store(tmp_path: Path, key: Ed25519PrivateKey) -> Callable[..., Store]:
    def make(name: str = "run.db", n: int = 0, **kw: Any) -> Store:
        store = Store.create(tmp_path / name, header=make_header(), signing_key=key, **kw)
        if n:
            store.append_batch([cell_body(i) for i in range(n)])
        return store

    return make
