"""Every preflight probe, asserted through the real bwrap backend (no mocks)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.errors import FormatError, SandboxError
from runner.sandbox import BwrapBackend, ProbeResult, load_probes, run_probes
from runner.sandbox._probes import PREFLIGHT_DIR

from .conftest import linux_only

PROBES = load_probes()


@pytest.fixture(scope="module")
def results(bwrap: BwrapBackend) -> dict[str, ProbeResult]:
    return {r.name: r for r in run_probes(bwrap)}


def test_probe_catalogue_covers_every_category() -> None:
    names = {p.name for p in PROBES}
    for required in ("network.inet_socket", "network.inet6_socket", "network.netlink_socket",
                     "network.loopback_listener", "network.dns", "write.root", "write.over_snapshot",
                     "write.usr", "env.canary", "env.proc1_environ", "process.pid_namespace",
                     "process.kill_init", "process.ptrace", "process.unshare_user", "process.mount",
                     "limits.cpu", "limits.memory", "limits.file_size", "limits.processes",
                     "limits.output_flood", "limits.wall_clock", "limits.detached_grandchild"):  # fmt: skip
        assert required in names
    for p in PROBES:
        assert p.expect and p.why


@linux_only
@pytest.mark.parametrize("name", [p.name for p in PROBES])
def test_probe(results: dict[str, ProbeResult], name: str) -> None:
    r = results[name]
    assert r.observed == r.expected, (
        f"{name}: expected {r.expected}, observed {r.observed} {r.detail}"
    )
    assert r.passed


@linux_only
def test_a_wrong_expectation_fails(bwrap: BwrapBackend, tmp_path: Path) -> None:
    shutil.copytree(PREFLIGHT_DIR, tmp_path / "pf")
    (tmp_path / "pf" / "probes.toml").write_text(
        'format = "ect.probes/1"\n[[probe]]\nname = "x"\nprogram = "net.py"\nargs = ["inet"]\n'
        'expect = "allowed"\nwhy = "deliberately wrong"\n'
    )
    [r] = run_probes(bwrap, preflight_dir=tmp_path / "pf")
    assert (r.observed, r.passed) == ("EAFNOSUPPORT", False)


@linux_only
def test_unknown_probe_names_are_refused(bwrap: BwrapBackend) -> None:
    with pytest.raises(SandboxError, match="unknown probe"):
        run_probes(bwrap, only=["network.nope"])


def test_malformed_catalogue_is_a_format_error(tmp_path: Path) -> None:
    shutil.copytree(PREFLIGHT_DIR, tmp_path / "pf")
    cat = tmp_path / "pf" / "probes.toml"
    cat.write_text('format = "ect.probes/2"\n')
    with pytest.raises(FormatError, match=r"ect\.probes/1"):
        load_probes(tmp_path / "pf")
    cat.write_text(
        'format = "ect.probes/1"\n[[probe]]\nname="a"\nprogram="nope.py"\nexpect="x"\nwhy="y"\n'
    )
    with pytest.raises(FormatError, match=r"no program nope\.py"):
        load_probes(tmp_path / "pf")
    cat.write_text(
        'format = "ect.probes/1"\n[[probe]]\nname="a"\nprogram="net.py"\nexpect="x"\nwhy="y"\nkind="vibes"\n'
    )
    with pytest.raises(FormatError, match="bad fields"):
        load_probes(tmp_path / "pf")
