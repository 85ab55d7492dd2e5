"""Pins: every policy file matches PINS; a tampered copy is refused, naming file and digests."""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
from pathlib import Path

import pytest

from runner.canonical import digest, is_digest
from runner.sandbox import PINNED_FILES, BwrapBackend, PinMismatch, pins_digest, verify_pins
from runner.sandbox._seatbelt import SandboxExecBackend
from runner.sandbox._seccomp import ARCHES, compile_policy_file

REPO = Path(__file__).resolve().parents[2]


def _copy_policy(dst: Path) -> Path:
    for rel in (*PINNED_FILES, "sandbox_profiles/PINS"):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, dst / rel)
    return dst


def test_committed_pins_verify() -> None:
    pins = verify_pins()
    assert set(pins) == set(PINNED_FILES)
    for rel, sha in pins.items():
        assert hashlib.sha256((REPO / rel).read_bytes()).hexdigest() == sha
    d = pins_digest()
    assert is_digest(d) and d == digest("ect/lock/v1", {"sandbox_pins": pins})


@pytest.mark.parametrize("rel", PINNED_FILES)
def test_tampered_file_is_refused(tmp_path: Path, rel: str) -> None:
    root = _copy_policy(tmp_path)
    verify_pins(root)
    original = (root / rel).read_bytes()
    (root / rel).write_bytes(original + b"\n")
    expected = hashlib.sha256(original).hexdigest()
    actual = hashlib.sha256(original + b"\n").hexdigest()
    with pytest.raises(PinMismatch) as err:
        verify_pins(root)
    msg = str(err.value)
    assert rel in msg and expected in msg and actual in msg


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap backend is Linux-only")
@pytest.mark.parametrize(
    "rel",
    [
        "runner/sandbox/_worker.py",
        "sandbox_profiles/seccomp.toml",
        "sandbox_profiles/seccomp-x86_64.bpf",
    ],
)
def test_bwrap_backend_refuses_tampered_policy(tmp_path: Path, rel: str) -> None:
    root = _copy_policy(tmp_path)
    BwrapBackend(policy_root=root)  # the untouched copy is accepted
    with (root / rel).open("ab") as fh:
        fh.write(
            b"# tampered\n" if not rel.endswith(".bpf") else b"\x06\x00\x00\x00\x00\x00\xff\x7f"
        )
    if rel.endswith(".bpf") and not rel.endswith(f"{BwrapBackend().arch}.bpf"):
        pytest.skip("filter of another architecture")
    with pytest.raises(PinMismatch, match=re.escape(str(root / rel))):
        BwrapBackend(policy_root=root)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap backend is Linux-only")
def test_filter_that_does_not_match_its_source_is_refused_even_if_repinned(tmp_path: Path) -> None:
    """Rewriting a filter and its pin together still fails: it must compile from the pinned source."""
    root = _copy_policy(tmp_path)
    arch = BwrapBackend().arch
    rel = f"sandbox_profiles/seccomp-{arch}.bpf"
    allow_all = b"\x06\x00\x00\x00\x00\x00\xff\x7f"  # RET ALLOW
    (root / rel).write_bytes(allow_all)
    pins = (root / "sandbox_profiles/PINS").read_text()
    old = hashlib.sha256((REPO / rel).read_bytes()).hexdigest()
    (root / "sandbox_profiles/PINS").write_text(
        pins.replace(old, hashlib.sha256(allow_all).hexdigest())
    )
    with pytest.raises(
        PinMismatch, match=r"is not what sandbox_profiles/seccomp\.toml compiles to"
    ):
        BwrapBackend(policy_root=root)


def test_sandbox_exec_backend_refuses_tampered_profile(tmp_path: Path) -> None:
    root = _copy_policy(tmp_path)
    SandboxExecBackend(policy_root=root, check_platform=False)
    prof = root / "sandbox_profiles/worker.sb"
    prof.write_bytes(prof.read_bytes().replace(b"(deny network*)", b"(allow network*)"))
    with pytest.raises(PinMismatch, match=r"worker\.sb"):
        SandboxExecBackend(policy_root=root, check_platform=False)


def test_every_arch_has_a_pinned_filter() -> None:
    source = (REPO / "sandbox_profiles/seccomp.toml").read_bytes()
    for arch in ARCHES:
        assert f"sandbox_profiles/seccomp-{arch}.bpf" in PINNED_FILES
        assert (
            compile_policy_file(source, arch)
            == (REPO / f"sandbox_profiles/seccomp-{arch}.bpf").read_bytes()
        )


def test_write_pins_regenerates_the_committed_state(tmp_path: Path) -> None:
    from runner.sandbox._pins import write_pins

    root = _copy_policy(tmp_path)
    for arch in ARCHES:
        (root / f"sandbox_profiles/seccomp-{arch}.bpf").unlink()
    (root / "sandbox_profiles/PINS").write_text("")
    assert write_pins(root) == verify_pins()
    assert (root / "sandbox_profiles/PINS").read_bytes() == (
        REPO / "sandbox_profiles/PINS"
    ).read_bytes()
