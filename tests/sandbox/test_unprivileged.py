"""A normal user's sandbox (issue 37, item 5), run here as a uid with no account through
``setpriv``: the identity the record gives is the one the sandbox has, as the host sees it. With
bwrap >= 0.8 ``--disable-userns`` puts the command in a nested user namespace whose ``uid_map``
(read inside) is ``65534 65534 1``: the record said ``host_uid 65534``, so the documented
unprivileged fallbacks were not applied and ``kernel.proc_keys`` and ``identity.per_call_uid``
failed (``ect preflight`` refused as a normal user)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .conftest import linux_only

pytestmark = linux_only

REPO = Path(__file__).resolve().parents[2]
UID = 61_500  # no account uses it (HostIds-style ids of the tests: 61000-61063 elsewhere)

SCRIPT = """
import json
from runner.canonical import canonical_bytes
from runner.sandbox import BwrapBackend, run_probes
be = BwrapBackend(pool_size=0)
L = be.layers()
res = {r.name: [r.observed, r.expected, r.passed] for r in run_probes(
    be, only=["kernel.proc_keys", "identity.per_call_uid", "identity.capabilities"])}
print(canonical_bytes({"host_uid": L["host_uid"], "nested": L["nested_user_namespace"],
                       "uid_map": L["uid_map"], "uid_map_host": L["uid_map_host"],
                       "probes": res}).decode())
"""


def _searchable_above(path: Path) -> bool:
    """Whether a uid with no account can reach ``path``: every directory above it searchable."""
    return all(p.stat().st_mode & 0o001 for p in path.parents)


def _stage(into: Path) -> Path:
    """A copy the throwaway uid can read of what the script imports and the sandbox reads: the
    checkout may sit in a directory only its owner can enter (``mktemp -d`` makes one 0700), and
    the virtualenv with it. The copy holds ``runner/``, ``sandbox_profiles/`` and the one
    third-party package the script loads (``rfc8785``)."""
    import rfc8785

    tree = into / "tree"
    shutil.copytree(REPO / "runner", tree / "runner",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for policy in ("sandbox_profiles", "preflight"):  # the pinned policy, the probe set
        shutil.copytree(REPO / policy, tree / policy)
    shutil.copytree(Path(rfc8785.__file__).parent, tree / "rfc8785",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for p in (into, *into.rglob("*")):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return tree


def test_a_normal_user_records_its_own_uid_and_its_fallbacks_apply() -> None:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run as a throwaway uid")
    python = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    if not (_searchable_above(python) and python.stat().st_mode & 0o004):
        pytest.skip(f"the interpreter {python} is not reachable by another uid")
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp)
        if not _searchable_above(staged):
            pytest.skip(f"the temporary directory {tmp} sits where other uids cannot reach")
        tree = _stage(staged)
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(tree),
               "LANG": "C.UTF-8"}
        r = subprocess.run([setpriv, f"--reuid={UID}", f"--regid={UID}", "--clear-groups",
                            "--inh-caps=-all", str(python), "-s", "-c", SCRIPT],
                           cwd="/", env=env, capture_output=True, timeout=300)  # fmt: skip
    if r.returncode != 0 and b"bwrap" in r.stderr and b"namespace" in r.stderr:
        pytest.skip("this host forbids unprivileged user namespaces")
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    seen = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert seen["host_uid"] == UID  # was 65534: the nested namespace's map, read inside
    assert seen["uid_map_host"][1] == UID
    if seen["uid_map"][1] != UID:
        assert seen["nested"] is True
    for name, (observed, expected, passed) in seen["probes"].items():
        assert passed, (name, observed, expected)
    # the fallback the record now calls for: the sandbox shares the parent's uid
    assert seen["probes"]["identity.per_call_uid"][:2] == ["shared-uid", "shared-uid"]
