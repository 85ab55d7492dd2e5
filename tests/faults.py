"""Real faults for the reliability tests: read-only mounts, a full filesystem, the shipped CLI.

Mounting needs root (CAP_SYS_ADMIN), which CI has (``.ci/run`` runs ``make test`` as root).
Root bypasses file permissions, so ``chmod -w`` proves nothing there: a read-only *mount* is the
one fault root cannot write through. On a machine where mounting is impossible the tests that
need it are skipped with that reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _mount(*args: str) -> None:
    res = subprocess.run(["mount", *args], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount ({res.stderr.strip() or res.returncode}): these fault tests "
                    "need root (CAP_SYS_ADMIN), as in CI")


def _umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def readonly_view(src: Path) -> Iterator[Path]:
    """``src`` bind-mounted read-only at a fresh directory (even root gets EROFS there)."""
    mnt = Path(tempfile.mkdtemp(prefix="ect-ro-"))
    try:
        _mount("--bind", str(src), str(mnt))
        try:
            _mount("-o", "remount,ro,bind", str(mnt))
            yield mnt
        finally:
            _umount(mnt)
    finally:
        with contextlib.suppress(OSError):
            mnt.rmdir()


@contextlib.contextmanager
def small_tmpfs(size_kib: int = 256) -> Iterator[Path]:
    """A fresh tmpfs of ``size_kib`` KiB, unmounted afterwards."""
    mnt = Path(tempfile.mkdtemp(prefix="ect-tmpfs-"))
    try:
        _mount("-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(mnt))
        try:
            yield mnt
        finally:
            _umount(mnt)
    finally:
        with contextlib.suppress(OSError):
            mnt.rmdir()


def fill(directory: Path) -> Path:
    """Fill the filesystem holding ``directory`` to the last byte; return the filler file."""
    filler = directory / ".filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 16, 4096, 1):
            try:
                while f.write(b"\0" * size):
                    pass
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    return filler


def listing(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (relative path -> bytes), the filler excluded."""
    out: dict[str, bytes] = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file() and p.name != ".filler":
            out[str(p.relative_to(directory))] = p.read_bytes()
    return out


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def one_line_error(self) -> str:
        """The error line of a failed command: exactly one ``ect: ...`` line (or, for a bad
        flag value caught by the argument parser, click's one ``Error: ...`` line), never a
        traceback or ``Aborted!``."""
        assert "Traceback" not in self.err, self.err
        lines = [ln for ln in self.err.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith(("ect: ", "Error: "))]
        assert len(errors) == 1, self.err
        assert "Aborted!" not in self.err, self.err
        return errors[0]


def ect(*args: str, cwd: Path | None = None, timeout: float = 120, driver: bool = False,
        stdin: str | None = None) -> Result:
    """Run the shipped CLI (``python -m runner``) in a child process.

    ``driver=True`` runs ``tests/study/cli_driver.py`` instead (the shipped CLI with preflight
    limited to the mandatory probes, for commands that run a study).
    """
    entry = [str(REPO / "tests" / "study" / "cli_driver.py")] if driver else ["-m", "runner"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, *entry, *args], cwd=cwd, capture_output=True,
                         text=True, timeout=timeout, env=env, input=stdin)
    return Result(res.returncode, res.stdout, res.stderr)
