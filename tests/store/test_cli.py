"""`ect store ...`: exit codes, output, help texts."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import cli
from runner.store import Store, merkle

from .conftest import drop_triggers, raw, restore_triggers


@pytest.fixture
def sealed(new_store: Callable[..., Store]) -> Path:
    s = new_store(n=9)
    s.checkpoint()
    s.close()
    return s.path


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


@pytest.mark.parametrize("sub", ["verify", "show", "salvage", "proof", "keygen"])
def test_help(sub: str) -> None:
    code, out = _run("store", sub, "--help")
    assert code == 0 and f"store {sub} [OPTIONS]" in out


def test_verify_intact_and_json(sealed: Path, tmp_path: Path) -> None:
    code, out = _run("store", "verify", str(sealed))
    assert code == 0 and "intact" in out
    code, out = _run(
        "store", "verify", str(sealed), "--full", "--json",
        "--public-key", str(tmp_path / "signing.key.pub"),
    )  # fmt: skip
    assert code == 0
    rep = json.loads(out)
    assert rep["ok"] is True and rep["records"] == 10 and rep["full"] is True


def test_verify_damage_exit_1(sealed: Path) -> None:
    conn = raw(sealed)
    saved = drop_triggers(conn)
    conn.execute("DELETE FROM records WHERE seq = 4")
    restore_triggers(conn, saved)
    conn.close()
    code, out = _run("store", "verify", str(sealed))
    assert code == 1 and "DAMAGED (tamper) at seq 4: " in out and "tamper" in out
    code, out = _run("store", "verify", str(sealed), "--json")
    assert code == 1
    assert json.loads(out)["first_bad_seq"] == 4


def test_verify_not_a_store_is_refused_exit_2(tmp_path: Path) -> None:
    # issue 29: a file that never was a store is a usage error, not "DAMAGED" (exit 1) ...
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 50)
    code, out = _run("store", "verify", str(junk))
    assert code == 2 and ": not an ect run store" in out and "DAMAGED" not in out
    # ... but the same bytes with a store's checkpoint beside them are a store whose first page
    # was overwritten: damage, exit 1
    (tmp_path / "junk.db.checkpoint").write_text("{}", "utf-8")
    code, out = _run("store", "verify", str(junk))
    assert code == 1 and "DAMAGED (corrupt)" in out


def test_verify_usage_exit_2(tmp_path: Path) -> None:
    code, _ = _run("store", "verify", str(tmp_path / "missing.db"))
    assert code == 2
    code, _ = _run("store", "verify")
    assert code == 2


def test_show(sealed: Path) -> None:
    code, out = _run("store", "show", str(sealed), "--json")
    assert code == 0
    info = json.loads(out)
    assert info["records"] == 10 and info["header"]["format"] == "ect.store/1"
    # orphaned attempts are counted over the study's cell records; these bodies are not ones
    assert info["orphan_attempts"] is None
    code, out = _run("store", "show", str(sealed), "--seq", "3", "--json")
    assert code == 0
    rec = json.loads(out)
    assert rec["seq"] == 3 and rec["body"]["row"] == 2
    code, _ = _run("store", "show", str(sealed), "--seq", "99")
    assert code == 2


def test_proof_verifies_against_signed_root(sealed: Path) -> None:
    code, out = _run("store", "proof", str(sealed), "--seq", "6", "--json")
    assert code == 0
    p = json.loads(out)
    root = bytes.fromhex(p["checkpoint"]["checkpoint"]["root"])
    merkle.verify_inclusion(
        bytes.fromhex(p["leaf"]), 6, p["tree_size"], [bytes.fromhex(h) for h in p["proof"]], root
    )
    code, out = _run("store", "proof", str(sealed), "--seq", "6")
    assert code == 0 and "(signed)" in out


def test_salvage_and_keygen(sealed: Path, tmp_path: Path) -> None:
    new = tmp_path / "copy.db"
    code, out = _run("store", "salvage", str(sealed), str(new))
    assert code == 0 and "salvaged 10" in out
    assert _run("store", "verify", str(new), "--full")[0] == 0
    assert _run("store", "salvage", str(sealed), str(new))[0] == 2  # never overwrites
    k = tmp_path / "new.key"
    code, _ = _run("store", "keygen", str(k))
    assert code == 0 and stat.S_IMODE(os.stat(k).st_mode) == 0o600 and Path(f"{k}.pub").exists()
    assert _run("store", "keygen", str(k))[0] == 2
