"""docs/sandbox.md matches the code: the probe table, the allow-list, the kernel matrix, and every
layer's claim names probes that exist."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

from runner.sandbox import load_probes
from runner.sandbox._layers import KERNELS, kernel_matrix

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "sandbox.md").read_text("utf-8")
POLICY = tomllib.loads((REPO / "sandbox_profiles" / "seccomp.toml").read_text())


def _rows() -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in DOC.splitlines() if line.startswith("| ")]  # fmt: skip


def test_probe_table_matches_the_catalogue() -> None:
    rows = {r[0].strip("`"): r for r in _rows() if len(r) == 4}
    for p in load_probes():
        assert p.name in rows, p.name
        assert rows[p.name][1] == p.expect, p.name
        assert rows[p.name][3] == p.why, p.name


def test_every_allowed_syscall_is_documented_with_its_reason() -> None:
    rows = {r[0].strip("`"): r[1] for r in _rows() if len(r) == 2}
    for name, why in POLICY["allow"].items():
        assert rows.get(name) == why, name
    for rule in POLICY["arg"]:
        assert rule["why"] in rows.get(rule["syscall"], ""), rule["syscall"]
    for name, why in POLICY["enosys"].items():
        assert why in rows.get(name, ""), name
    for name in POLICY["refused"]:
        assert f"`{name}`" in DOC, name


def test_kernel_matrix_matches_the_decision_code() -> None:
    rows = [r for r in _rows() if len(r) == 3 + len(KERNELS) and r[0].startswith("`")]
    expected = [[f"`{m['guarantee']}`", m["layer"], m["minimum"],
                 *("yes" if m["kernels"][k] else "no" for k in KERNELS)]
                for m in kernel_matrix()]  # fmt: skip
    assert rows == expected
    header = next(r for r in _rows() if r[0] == "guarantee")
    assert header[3:] == list(KERNELS)


def test_every_layer_claim_names_probes_that_exist() -> None:
    names = [p.name for p in load_probes()]
    section = DOC.split("## Linux: what holds, layer by layer")[1].split("### Which kernels")[0]
    layer_rows = [r for r in _rows() if len(r) == 3 and r[0] != "layer" and r[1] in section]
    assert len(layer_rows) >= 8
    for layer, _, probes in layer_rows:
        refs = re.findall(r"`([^`]+)`", probes)
        assert refs, layer
        for ref in refs:
            assert fnmatch.filter(names, ref), f"{layer}: no probe matches {ref}"
