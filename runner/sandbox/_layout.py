"""The layout of one call's sandbox under bwrap (docs/sandbox.md): its namespaces and identity,
its mount tree (read-only ``/usr``, the interpreter at :data:`PYTHON_PREFIX`, the pinned worker
(compiled),
the caller's binds copied into memfds, ``/proc`` with its kernel knobs covered, four devices, a
size-capped ``/tmp``, all remounted read-only), the seccomp filter's fd, and the Landlock rules
the worker applies. Mixed into :class:`runner.sandbox._bwrap.BwrapBackend`, whose settings it
reads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.sandbox._backend import Limits

__all__ = ["MAX_BIND_BYTES", "MAX_BIND_FILES", "MIN_LANDLOCK_ABI", "PYTHON_PREFIX", "SANDBOX_GID",
           "SANDBOX_UID", "WORKER_PATH", "BwrapLayout"]  # fmt: skip

SANDBOX_UID = 65534
SANDBOX_GID = 65534
# A bind's bytes are copied into a memfd per call (so no host path shows in mountinfo):
# directory binds are bounded in files and bytes.
MAX_BIND_FILES = 512
MAX_BIND_BYTES = 256 << 20
# The pinned worker, compiled by the parent's interpreter (the one every call runs): a .pyc file's
# bytes, which the interpreter runs as a script without compiling the source first.
WORKER_PATH = "/ect/worker.pyc"
# Where an interpreter installed outside /usr (a version manager's directory under a home, a
# relocatable build) is bound inside the sandbox: a fixed path, so no call learns the host's.
PYTHON_PREFIX = "/ect/python"
# Landlock ABI 1 (Linux 5.13) provides the one guarantee no other layer gives: execute only
# beneath the read-only binds. Everything else has a layer on any kernel bwrap runs on
# (runner/sandbox/_layers.py); newer ABIs add defence in depth and are applied when present.
MIN_LANDLOCK_ABI = 1
_PROC_KNOBS = ("/proc/sys", "/proc/sysrq-trigger", "/proc/fs", "/proc/irq", "/proc/bus")
_RESERVED = ("/usr", "/proc", "/dev", "/tmp", "/ect/worker.py", WORKER_PATH, PYTHON_PREFIX)


class BwrapLayout:
    """bwrap's argv, the Landlock rules and the binds of a call, for the bwrap backend."""

    if TYPE_CHECKING:  # the backend's settings
        bwrap: str
        drops_root: bool
        env: dict[str, str]
        prefix: Path
        emulate_landlock_abi: int | None
        allow_weaker_landlock_unsafe: bool

    def _landlock(self, ro_dests: Sequence[str]) -> dict[str, Any]:
        read = ["/usr", str(self.prefix), "/ect", *ro_dests]
        return {
            "min_abi": MIN_LANDLOCK_ABI,
            "emulate_abi": self.emulate_landlock_abi,
            "allow_weaker_landlock_unsafe": self.allow_weaker_landlock_unsafe,
            "read": read,
            "read_nox": ["/proc"],
            "write": ["/tmp"],
            "devices": ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"],
        }

    def bwrap_argv(self, limits: Limits, ro_binds: Sequence[tuple[int, str] | tuple[int, str, int]],
                   seccomp_fd: int, worker_fd: int, prefix_fd: int | None = None,
                   proc_data: Sequence[tuple[int, str]] = ()) -> list[str]:  # fmt: skip
        """bwrap's argv. ``ro_binds`` are ``(fd, dest[, mode])``: a memfd holding a copy of the
        file the parent read (``--ro-bind-data``, so the mount table names no host path and no
        path can be swapped between the check and the mount), or ``-1`` for a directory of a
        copied tree. ``prefix_fd`` is an ``O_PATH`` descriptor of the interpreter prefix, bound at
        ``PYTHON_PREFIX``. ``proc_data`` are files laid over ``/proc`` entries (the per-call
        ``boot_id``, the masked ``key-users``)."""
        if self.drops_root:
            # Root parent: no user namespace (it could only map the sandbox to host root). bwrap,
            # as root, makes the other namespaces; the command keeps only CAP_SETPCAP, CAP_SETUID and
            # CAP_SETGID, which the pinned worker uses first thing to empty the capability bounding
            # set and become host_id, losing every capability.
            ids = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                   "--unshare-cgroup", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID",
                   "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]  # fmt: skip
        else:
            ids = ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID),
                   "--gid", str(SANDBOX_GID), "--disable-userns", "--cap-drop", "ALL"]  # fmt: skip
        argv = [
            self.bwrap, *ids,
            "--die-with-parent", "--new-session",
            "--hostname", "ect-sandbox",
            "--clearenv",
        ]  # fmt: skip
        for k, v in self.env.items():
            argv += ["--setenv", k, v]
        argv += ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
            p = Path(top)
            if p.is_symlink():
                argv += ["--symlink", os.readlink(p), top]
            elif p.is_dir():
                argv += ["--ro-bind", top, top]
        # bwrap would copy a bind source's parent mode (often 0700) onto directories it creates
        # for the destination, so they are made explicitly: readable, not writable
        made = {"/", "/ect"}
        argv += ["--perms", "0555", "--dir", "/ect"]
        if prefix_fd is not None:
            # an interpreter installed outside /usr, at a fixed path (no host path inside)
            argv += ["--ro-bind-fd", str(prefix_fd), PYTHON_PREFIX]
        for bind in ro_binds:
            for parent in reversed(Path(bind[1]).parents):
                if str(parent) not in made:
                    made.add(str(parent))
                    argv += ["--perms", "0555", "--dir", str(parent)]
        argv += ["--perms", "0444", "--ro-bind-data", str(worker_fd), WORKER_PATH]
        for bind in ro_binds:
            fd, dest = bind[0], bind[1]
            mode = bind[2] if len(bind) > 2 else 0o444
            if fd < 0:
                if dest not in made:
                    made.add(dest)
                    argv += ["--perms", "0555", "--dir", dest]
            else:
                argv += ["--perms", f"{mode:04o}", "--ro-bind-data", str(fd), dest]
        proc_over = []
        for fd, dest in proc_data:
            proc_over += ["--perms", "0444", "--ro-bind-data", str(fd), dest]
        argv += [
            "--proc", "/proc",
            *self._proc_covers(),
            *proc_over,
            # only the four devices a tool may need (bwrap's --dev would add pts, shm, tty, full)
            "--perms", "0555", "--dir", "/dev",
            "--dev-bind", "/dev/null", "/dev/null",
            "--dev-bind", "/dev/zero", "/dev/zero",
            "--dev-bind", "/dev/random", "/dev/random",
            "--dev-bind", "/dev/urandom", "/dev/urandom",
            "--perms", "1777", "--size", str(int(limits.tmpfs_bytes)), "--tmpfs", "/tmp",
            "--remount-ro", "/",
            "--chdir", "/tmp",
            "--seccomp", str(seccomp_fd),
        ]  # fmt: skip
        return argv

    @staticmethod
    def _proc_covers() -> list[str]:
        """Read-only binds over the kernel knobs in ``/proc``, whatever the uid and Landlock.

        bwrap itself covers ``irq`` and ``bus`` but, as measured with bwrap 0.8 under a root
        parent, not ``sys`` or ``sysrq-trigger``; ``fs`` holds writable knobs too (nfsd).
        """
        argv: list[str] = []
        for knob in _PROC_KNOBS:
            if os.path.lexists(knob):
                argv += ["--ro-bind", knob, knob]
        return argv

    def _check_binds(self, ro_binds: Sequence[tuple[Path, str]]) -> None:
        for host, dest in ro_binds:
            if not dest.startswith("/") or ".." in dest.split("/") or dest == "/":
                raise ValueError(f"bind destination must be an absolute path, got {dest!r}")
            for r in _RESERVED:
                if dest == r or dest.startswith(r + "/"):
                    raise ValueError(f"bind destination {dest!r} is reserved by the sandbox")
            if not Path(host).exists():
                raise FileNotFoundError(2, "No such file or directory", str(host))

    def _copy_binds(self, ro_binds: Sequence[tuple[Path, str]]) -> list[tuple[int, str, int]]:
        """Copy each bind's bytes into memfds: ``(fd, dest, mode)``, ``fd = -1`` for a directory.

        Why copies: a bind mount shows its source path in ``/proc/self/mountinfo`` (the tools
        file's checkout, the snapshot and bytecode directories); data binds show bwrap's own
        temporary name. A directory is copied file by file (regular files and directories only,
        at most ``MAX_BIND_FILES`` files and ``MAX_BIND_BYTES`` bytes in all)."""
        out: list[tuple[int, str, int]] = []
        total = 0

        def copy(path: Path, dest: str) -> None:
            nonlocal total
            src = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            try:
                st = os.fstat(src)
                total += st.st_size
                if len(out) >= MAX_BIND_FILES or total > MAX_BIND_BYTES:
                    raise ValueError(f"binds exceed {MAX_BIND_FILES} files or "
                                     f"{MAX_BIND_BYTES} bytes (at {path})")  # fmt: skip
                fd = os.memfd_create("ect-bind", os.MFD_CLOEXEC)
                out.append((fd, dest, 0o555 if st.st_mode & 0o111 else 0o444))
                left = st.st_size
                while left > 0:
                    n = os.sendfile(fd, src, None, left)
                    if n == 0:
                        break
                    left -= n
                os.lseek(fd, 0, os.SEEK_SET)
            finally:
                os.close(src)

        for host, dest in ro_binds:
            host = Path(host)
            if not host.is_dir():
                copy(host, dest)
                continue
            out.append((-1, dest, 0o555))
            for root, dirs, files in os.walk(host):
                dirs.sort()
                rel = Path(root).relative_to(host)
                for d in list(dirs):
                    if (Path(root) / d).is_symlink():
                        raise ValueError(f"bind source {host} holds a symlink: {Path(root) / d}")
                    out.append((-1, str(Path(dest) / rel / d), 0o555))
                for f in sorted(files):
                    p = Path(root) / f
                    if p.is_symlink() or not p.is_file():
                        raise ValueError(f"bind source {host} holds a symlink or special file: {p}")
                    copy(p, str(Path(dest) / rel / f))
        return out
