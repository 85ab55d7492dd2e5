"""Backend selection never falls back to running without a sandbox."""

from __future__ import annotations

import os
import sys

import pytest

import runner.sandbox as sandbox
from runner.sandbox import BwrapBackend, SandboxUnavailable, select_backend


def test_public_surface() -> None:
    assert set(sandbox.__all__) == {
        "BACKENDS", "EXECUTORS", "PINNED_FILES", "Backend", "BwrapBackend", "KillReason", "Limits",
        "PinMismatch", "Probe", "ProbeResult", "ChildResult", "SandboxExecBackend",
        "SandboxUnavailable", "ToolSandbox", "WorkerFailed", "compile_policy",
        "compile_policy_file", "iter_probes", "load_probes", "pins_digest", "read_pinned",
        "run_probes",
        "select_backend", "verify_pins",
        "write_pins",  # `ect sandbox pins --write` (the CLI imports no private name)
    }  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux default")
def test_linux_default_is_bwrap() -> None:
    be = select_backend()
    assert isinstance(be, BwrapBackend) and be.name == "bwrap"
    assert be.describe()["landlock_abi"] >= 1


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(SandboxUnavailable, match="unknown sandbox backend 'none'"):
        select_backend("none")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap backend is Linux-only")
def test_missing_bwrap_is_unavailable_not_a_fallback() -> None:
    with pytest.raises(SandboxUnavailable, match="bubblewrap not found"):
        select_backend("bwrap", bwrap="/nonexistent/bwrap")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap backend is Linux-only")
def test_old_landlock_is_refused_unless_explicitly_weakened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import runner.sandbox._bwrap as bw

    # ABI 3 (e.g. a 6.2-6.6 kernel) keeps every guarantee: accepted, and recorded as the worker
    # applied it (the record is the worker's report, so the rule set is emulated, not assumed)
    be = select_backend("bwrap", emulate_landlock_abi=3)
    layers = be.describe()["layers"]
    assert layers["landlock_abi"] == 3 and layers["missing_guarantees"] == []
    assert "Landlock TCP bind/connect rules (ABI 4)" not in layers["guarantees"]["network"]
    assert layers["guarantees"]["network"][0] == "network namespace (loopback only)"
    # no Landlock at all: the exec guarantee has no layer left -> refused, naming it
    monkeypatch.setattr(bw, "landlock_abi", lambda: 0)
    with pytest.raises(SandboxUnavailable,
                       match="Landlock ABI is 0: no layer is left for: programs run only"):  # fmt: skip
        select_backend("bwrap")
    monkeypatch.undo()
    be = select_backend("bwrap", allow_weaker_landlock_unsafe=True, emulate_landlock_abi=0)
    assert be.describe()["allow_weaker_landlock_unsafe"] is True
    assert be.describe()["layers"]["missing_guarantees"] == ["exec"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap backend is Linux-only")
def test_forbidden_user_namespaces_are_reported_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.sandbox._bwrap as bw

    monkeypatch.setattr(
        bw, "userns_restrictions", lambda: ["AppArmor restricts unprivileged user namespaces"]
    )
    # only an unprivileged parent needs user namespaces (a root parent makes none)
    monkeypatch.setattr(bw.os, "geteuid", lambda: 1000)
    with pytest.raises(
        SandboxUnavailable, match="forbids the user namespaces bwrap needs: AppArmor"
    ):
        select_backend("bwrap")


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="wall_s"):
        sandbox.Limits(wall_s=0)
    with pytest.raises(ValueError, match="nproc"):
        sandbox.Limits(nproc=-1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap backend is Linux-only")
def test_host_that_cannot_create_namespaces_is_named_plainly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What bwrap prints on a host whose policy forbids unprivileged user namespaces."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(SandboxUnavailable, match="forbids the unprivileged user namespaces"):
        select_backend("bwrap", bwrap=str(fake))


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="a root parent on Linux")  # fmt: skip
def test_a_root_parent_needs_no_user_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.sandbox._bwrap as bw

    monkeypatch.setattr(
        bw, "userns_restrictions", lambda: ["AppArmor restricts unprivileged user namespaces"]
    )
    be = select_backend("bwrap")
    assert "--unshare-user" not in be.bwrap_argv(sandbox.Limits(), [], 7, 8)
    assert be.describe()["layers"]["host_uid"] == bw.SANDBOX_HOST_ID

