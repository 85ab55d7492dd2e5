"""docs/sandbox.md matches the code: the probe table and the seccomp deny list."""

from __future__ import annotations

import tomllib
from pathlib import Path

from runner.sandbox import load_probes

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "sandbox.md").read_text("utf-8")


def test_probe_table_matches_the_catalogue() -> None:
    rows = {}
    for line in DOC.splitlines():
        if line.startswith("| `") and line.count("|") >= 4:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells[1]
    for p in load_probes():
        assert rows.get(p.name) == p.expect, p.name


def test_every_denied_syscall_is_documented() -> None:
    policy = tomllib.loads((REPO / "sandbox_profiles" / "seccomp.toml").read_text())
    for name in policy["deny"]:
        assert f"`{name}`" in DOC, name
    for req in policy["ioctl"]["deny_requests"]:
        assert req in DOC
