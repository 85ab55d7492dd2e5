"""The kernel-reach decision over simulated kernels: which layer gives each guarantee."""

from __future__ import annotations

import pytest

from runner.sandbox._layers import GUARANTEES, KERNELS, HostFacts, assess, kernel_matrix


@pytest.mark.parametrize("abi", range(1, 8))
def test_every_landlock_abi_from_1_keeps_every_guarantee(abi: int) -> None:
    held, missing = assess(HostFacts(landlock_abi=abi, cgroups="v2", host_uid=64999))
    assert missing == []
    assert all(held[g.key] for g in GUARANTEES)
    # network isolation never rests on Landlock: the namespace provides it on every ABI
    assert held["network"][0] == "network namespace (loopback only)"
    assert ("Landlock TCP bind/connect rules (ABI 4)" in held["network"]) == (abi >= 4)
    assert ("Landlock signal scoping (ABI 6)" in held["processes"]) == (abi >= 6)


def test_no_landlock_names_the_one_guarantee_left_without_a_layer() -> None:
    held, missing = assess(HostFacts(landlock_abi=0, cgroups="v1", host_uid=64999))
    assert missing == ["exec"]
    assert held["exec"] == []
    # the filesystem guarantees still hold by the mount namespace alone
    assert held["persistent_writes"] == ["mount namespace: read-only binds, --remount-ro /"]


def test_memory_falls_back_to_per_process_and_says_so() -> None:
    held, missing = assess(HostFacts(landlock_abi=4, cgroups=None, host_uid=1000))
    assert missing == []
    assert held["memory"] == ["fallback: RLIMIT_AS per process only"]
    assert held["process_count"] == ["rlimits: RLIMIT_NPROC (non-root host uid)"]


def test_host_root_has_no_layer_and_nproc_rlimit_does_not_count_for_root() -> None:
    _held, missing = assess(HostFacts(landlock_abi=4, cgroups=None, host_uid=0))
    assert "host_root" in missing
    assert "process_count" in missing  # RLIMIT_NPROC never applies to uid 0, no cgroup either


def test_named_kernels_keep_every_guarantee() -> None:
    for name, (_, abi) in KERNELS.items():
        _, missing = assess(HostFacts(landlock_abi=abi, cgroups="v2", host_uid=64999))
        assert missing == [], name
    rows = kernel_matrix()
    tcp = next(r for r in rows if r["layer"].startswith("Landlock TCP"))
    assert tcp["kernels"] == {"Ubuntu 22.04 (5.15)": False, "Debian 12 (6.1)": False,
                              "Ubuntu 24.04 (6.8)": True, "Debian 13 (6.12)": True}  # fmt: skip
    # the kernel's seccomp pass-through is in the matrix too (x86_64 from 6.11)
    passthrough = [r for r in rows if r["layer"].startswith("exception: ")]
    assert [r["layer"].split(" (")[0] for r in passthrough] == ["exception: uretprobe",
                                                                 "exception: uprobe"]
    for r in passthrough:
        assert r["kernels"] == {"Ubuntu 22.04 (5.15)": False, "Debian 12 (6.1)": False,
                                "Ubuntu 24.04 (6.8)": False, "Debian 13 (6.12)": True}
