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
                     "limits.output_flood", "limits.wall_clock", "limits.detached_grandchild",
                     "seccomp.keyctl_named", "identity.per_call_uid", "identity.capabilities",
                     "host.mountinfo", "host.cgroup_names", "host.boot_id", "host.key_users",
                     "seccomp.kernel_passthrough", "record.rlimits", "limits.cpu_tree"):  # fmt: skip
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


# -- the kernel matrix: the probes that depend on Landlock, at every ABI this kernel emulates ----

ABI_SENSITIVE = ["network.inet_socket", "network.loopback_listener", "write.root",
                 "write.over_snapshot", "write.scratch_control", "env.proc1_environ",
                 "process.kill_init", "exec.scratch", "exec.scratch_by_fd", "exec.system_control",
                 "exec.memfd", "identity.host_uid", "kernel.proc_sys_write",
                 "kernel.proc_keys"]  # fmt: skip


@linux_only
@pytest.mark.parametrize("abi", [1, 2, 3, 4, 5, 6])
def test_probes_hold_at_every_older_landlock_abi(bwrap: BwrapBackend, abi: int) -> None:
    """Apply ABI n's rule set on this kernel: every guarantee must still hold (by another layer
    where Landlock's newer rules are missing), and the record says which ABI was applied."""
    if abi > bwrap.kernel_landlock_abi:
        pytest.skip(f"this kernel offers Landlock ABI {bwrap.kernel_landlock_abi} only")
    older = BwrapBackend(emulate_landlock_abi=abi)
    layers = older.describe()["layers"]
    assert (layers["landlock_abi"], layers["landlock_applied"]) == (abi, abi)
    assert layers["missing_guarantees"] == []
    for r in run_probes(older, only=ABI_SENSITIVE):
        assert r.passed, f"ABI {abi}: {r.name}: expected {r.expected}, observed {r.observed}"


@linux_only
def test_without_landlock_the_exec_guarantee_is_the_one_refused(bwrap: BwrapBackend) -> None:
    with pytest.raises(SandboxError, match="no layer is left for: programs run only"):
        BwrapBackend(emulate_landlock_abi=0)
    weak = BwrapBackend(emulate_landlock_abi=0, allow_weaker_landlock_unsafe=True)
    assert weak.describe()["layers"]["missing_guarantees"] == ["exec"]
    by_name = {r.name: r for r in run_probes(weak, only=["exec.scratch", "exec.memfd",
                                                         "network.inet_socket", "write.usr",
                                                         "kernel.proc_sys_write",
                                                         "identity.host_uid"])}  # fmt: skip
    # the documented fallback is observed: the scratch binary runs; the other layers still hold,
    # and without Landlock /proc/sys/kernel/core_pattern is still not writable
    assert by_name["exec.scratch"].observed == "exit 0" and by_name["exec.scratch"].passed
    assert all(r.passed for r in by_name.values())
