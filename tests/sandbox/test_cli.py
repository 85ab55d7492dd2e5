"""``ect sandbox run|probe|pins`` through the real backend."""

from __future__ import annotations

import json
import os
import sys

import pytest
from click.testing import CliRunner

from runner.cli._app import cli
from runner.sandbox._bwrap import SANDBOX_HOST_IDS

from .conftest import linux_only

pytestmark = linux_only


def test_help_texts() -> None:
    runner = CliRunner()
    for args in (["sandbox", "--help"], ["sandbox", "run", "--help"], ["sandbox", "probe", "--help"],
                 ["sandbox", "pins", "--help"]):  # fmt: skip
        r = runner.invoke(cli, args)
        assert r.exit_code == 0 and "Usage:" in r.output


def test_run_propagates_exit_code_and_output() -> None:
    r = CliRunner().invoke(cli, ["sandbox", "run", "--", "sh", "-c", "id -u; echo err >&2; exit 7"])
    assert r.exit_code == 7
    # a root parent runs each call as its own host id from the range, never as (host) root
    if os.geteuid() == 0:
        assert int(r.stdout) in SANDBOX_HOST_IDS
    else:
        assert r.stdout == "65534\n"


def test_run_timeout_is_reported() -> None:
    r = CliRunner().invoke(cli, ["sandbox", "run", "--timeout", "0.5", "--", "sleep", "30"])
    assert r.exit_code == 137
    assert "killed (timeout)" in r.stderr


def test_run_output_is_capped() -> None:
    r = CliRunner().invoke(cli, ["sandbox", "run", "--output-cap", "1000", "--", "yes"])
    assert len(r.stdout) == 1000 and "killed (output_cap)" in r.stderr


def test_run_unknown_backend_is_a_usage_error() -> None:
    r = CliRunner().invoke(cli, ["sandbox", "run", "--backend", "none", "--", "true"])
    assert r.exit_code == 2


def test_pins_command() -> None:
    r = CliRunner().invoke(cli, ["sandbox", "pins"])
    assert (
        r.exit_code == 0
        and "sandbox_profiles/worker.sb" in r.stdout
        and "pins digest: sha256:" in r.stdout
    )


@pytest.mark.skipif(sys.platform != "linux", reason="probes run through bwrap here")
def test_probe_json_passes_at_debian_12s_landlock_abi() -> None:
    """The whole catalogue with Landlock ABI 2's rule set (Debian 12's 6.1 kernel) applied."""
    r = CliRunner().invoke(cli, ["sandbox", "probe", "--json", "--landlock-abi", "2"])
    doc = json.loads(r.stdout)
    failed = [p for p in doc["probes"] if not p["passed"]]
    assert r.exit_code == 0, failed
    assert doc["passed"] is True and doc["backend"]["backend"] == "bwrap"
    assert len(doc["probes"]) >= 49
    layers = doc["backend"]["layers"]
    assert (layers["landlock_abi"], layers["emulated_landlock_abi"]) == (2, 2)
    assert layers["landlock_applied"] == 2 and layers["missing_guarantees"] == []


def test_probe_says_plainly_when_user_namespaces_are_forbidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import runner.sandbox._bwrap as bw

    monkeypatch.setattr(
        bw, "userns_restrictions", lambda: ["AppArmor restricts unprivileged user namespaces"]
    )
    # only an unprivileged parent needs user namespaces (a root parent makes none)
    monkeypatch.setattr(bw.os, "geteuid", lambda: 1000)
    r = CliRunner().invoke(cli, ["sandbox", "probe"])
    assert r.exit_code == 5
    assert "forbids the user namespaces bwrap needs: AppArmor" in r.stderr


def test_pin_mismatch_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.sandbox._pins as pins

    real = pins.read_pins
    monkeypatch.setattr(
        pins, "read_pins", lambda root=pins.REPO_ROOT: {k: "0" * 64 for k in real(root)}
    )
    r = CliRunner().invoke(cli, ["sandbox", "pins"])
    assert r.exit_code == 3 and "does not match pin 0000" in r.stderr
