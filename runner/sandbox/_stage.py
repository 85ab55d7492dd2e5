"""The interpreter's staged copy, bound at ``PYTHON_PREFIX`` for an interpreter installed outside
``/usr`` (docs/sandbox.md, the filesystem layer).

A bind mount shows its source in ``/proc/self/mountinfo``: the mount's root, i.e. the source's
path within its filesystem. Binding the installation itself would name e.g.
``/home/alice/.pyenv/versions/3.11.9`` to every call; binding a copy of it in a host directory
names that directory (``/var/cache/ect-sandbox/python-<key>``). So under a root parent the copy
is the whole of a tmpfs of its own (``/run/ect-sandbox/python-<key>``, source ``ect-python``,
read-only once complete, made once per boot): a bind of a filesystem's root shows ``/`` as its
root, and no host path at all. An unprivileged parent cannot mount a filesystem on the host, so
its copy is a directory (``/var/tmp/ect-python-<uid>-<key>``), which its calls' mountinfo names.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import stat as st_mod
import tempfile
from pathlib import Path

__all__ = ["STAGE_SOURCE", "remove_staged", "staged_prefix", "tmpfs_root"]

# Where a root parent's copies are mounted (a tmpfs each), and the mounts' source name.
STAGE_RUN_DIR = Path("/run/ect-sandbox")
STAGE_SOURCE = "ect-python"
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT = 1, 2, 4, 32
_MNT_DETACH = 2


def _skip_in_lib(directory: str, names: list[str]) -> set[str]:
    skip = {"site-packages", "dist-packages", "test", "idle_test", "__pycache__"}
    return {n for n in names if n in skip}


def _copy_installation(exe: Path, prefix: Path, dest: Path) -> None:
    """The interpreter's binary and ``prefix/lib`` (without site-packages or the test suite)
    into the empty directory ``dest``, readable by all, writable by no one else."""
    (dest / "bin").mkdir()
    shutil.copy2(exe, dest / "bin" / exe.name)
    lib = prefix / "lib"
    if lib.is_dir():
        shutil.copytree(lib, dest / "lib", symlinks=False, ignore_dangling_symlinks=True,
                        ignore=_skip_in_lib)  # fmt: skip
    for root, dirs, files in os.walk(dest):
        for name in dirs:
            os.chmod(Path(root) / name, 0o755)
        for name in files:
            f = Path(root) / name
            os.chmod(f, 0o755 if f.stat().st_mode & 0o111 else 0o644)
    dest.chmod(0o755)
    (dest / ".complete").write_text("")


def _libc_call(name: str, *args: object) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def tmpfs_root(path: Path) -> bool:
    """Whether ``path`` is the root of a tmpfs mounted there with source ``STAGE_SOURCE``."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        fs_type, source = line.split(" - ", 1)[1].split()[:2]
        if fields[4] == str(path) and fields[3] == "/" and fs_type == "tmpfs" \
                and source == STAGE_SOURCE:
            return True
    return False


def _trusted(d: Path, uid: int) -> bool:
    try:
        s = d.lstat()
        return (st_mod.S_ISDIR(s.st_mode) and s.st_uid == uid and not s.st_mode & 0o022
                and (d / ".complete").is_file())  # fmt: skip
    except OSError:
        return False


def _size_of(exe: Path, prefix: Path) -> int:
    total = exe.stat().st_size
    for root, dirs, files in os.walk(prefix / "lib", followlinks=True):
        dirs[:] = [d for d in dirs if d not in _skip_in_lib(root, dirs)]
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_size
    return total


def _stage_in_tmpfs(exe: Path, prefix: Path, key: str) -> Path:
    """A root parent's copy: a tmpfs of its own at ``STAGE_RUN_DIR/python-<key>``, made under
    an exclusive lock (one runner stages, the others wait and reuse), read-only once complete."""
    STAGE_RUN_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    final = STAGE_RUN_DIR / f"python-{key}"
    if tmpfs_root(final) and _trusted(final, 0):
        return final
    lock = os.open(STAGE_RUN_DIR / f".python-{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                   0o600)  # fmt: skip
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if tmpfs_root(final) and _trusted(final, 0):
            return final
        if tmpfs_root(final):  # a stager that died half way: start again
            _libc_call("umount2", str(final).encode(), _MNT_DETACH)
        if final.is_symlink() or (final.exists() and not final.is_dir()):
            raise OSError(17, f"{final} exists and is not a directory: remove it")
        final.mkdir(mode=0o755, exist_ok=True)
        size = _size_of(exe, prefix) * 5 // 4 + (8 << 20)
        _libc_call("mount", STAGE_SOURCE.encode(), str(final).encode(), b"tmpfs",
                   _MS_NOSUID | _MS_NODEV, f"mode=0755,size={size}".encode())  # fmt: skip
        try:
            _copy_installation(exe, prefix, final)
            _libc_call("mount", STAGE_SOURCE.encode(), str(final).encode(), b"tmpfs",
                       _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV,
                       f"mode=0755,size={size}".encode())  # fmt: skip
        except BaseException:
            with contextlib.suppress(OSError):
                _libc_call("umount2", str(final).encode(), _MNT_DETACH)
            raise
        return final
    finally:
        os.close(lock)


def staged_prefix(exe: Path, prefix: Path) -> Path:
    """A copy of the interpreter installed at ``prefix`` (its binary and ``lib/`` without
    ``site-packages`` or the test suite), at a path naming nothing of the host's, made once.

    Under a root parent the copy is a tmpfs of its own (see the module's docstring); otherwise
    it lives in ``/var/tmp/ect-python-<uid>-<key>``. ``key`` is a digest of the interpreter's
    path, size and mtime. An existing copy is used only if it is complete, owned by this user and
    writable by no one else.
    """
    info = exe.stat()
    key = hashlib.sha256(f"{exe}\0{prefix}\0{info.st_size}\0{info.st_mtime_ns}".encode()
                         ).hexdigest()[:16]  # fmt: skip
    uid = os.geteuid()
    if uid == 0:
        return _stage_in_tmpfs(exe, prefix, key)
    base = Path("/var/tmp")
    final = base / f"ect-python-{uid}-{key}"
    if _trusted(final, uid):
        return final
    if final.exists() or final.is_symlink():
        raise OSError(17, f"{final} exists but is not a complete copy of the interpreter "
                          "owned by this user: remove it")  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=base))
    try:
        _copy_installation(exe, prefix, tmp)
        try:
            tmp.rename(final)
        except OSError:  # another runner made it first
            if not _trusted(final, uid):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def remove_staged(path: Path) -> None:
    """Remove a staged copy (a test's throwaway interpreter): unmount its tmpfs, or delete it."""
    if tmpfs_root(path):
        _libc_call("umount2", str(path).encode(), _MNT_DETACH)
        with contextlib.suppress(OSError):
            path.rmdir()
        with contextlib.suppress(OSError):
            (path.parent / f".{path.name}.lock").unlink()
        return
    shutil.rmtree(path, ignore_errors=True)
