"""The pool of pre-spawned single-use sandboxes of the bwrap backend (docs/sandbox.md).

A ``tool`` or ``exec`` call is served by a child that applied every layer and loaded the worker
before the call was known (keyed by everything it was started with: config, limits, the content
of its binds); the call's own fields reach it on its stdin. Each child serves one call and is
destroyed; a replacement is started in the background by one long-lived thread. At most
``pool_size`` children wait across all keys (the oldest of other keys make room); one that
waited longer than ``pool_max_idle_s`` or died is discarded unused. The backend
(:class:`runner.sandbox._bwrap.BwrapBackend`) starts (``_launch``), feeds (``_finish``) and
releases (``_release``) children; this mixin decides which child serves a call.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.canonical import canonical_bytes
from runner.errors import SandboxError
from runner.sandbox._backend import ChildResult, Limits
from runner.sandbox._child import _Child
from runner.sandbox._linux import CallGroup

__all__ = ["ChildPool"]


class ChildPool:
    """The pool of pre-spawned single-use children, mixed into the bwrap backend."""

    if TYPE_CHECKING:  # provided by the backend
        def _launch(self, cfg: dict[str, Any], limits: Limits,
                    ro_binds: Sequence[tuple[Path, str]], key: bytes, dirs: Sequence[str] = (),
                    background: bool = False) -> _Child: ...

        def _finish(self, child: _Child, stdin: bytes, limits: Limits,
                    started: float) -> ChildResult: ...

        def _release(self, group: CallGroup | None, uid: int | None, tag: str | None) -> None: ...

    def _init_pool(self, pool_size: int, pool_max_idle_s: float, host_ids: range) -> None:
        """An empty pool of at most ``pool_size`` children (fewer than ``host_ids``: a call
        started cold needs an id of its own)."""
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 0 \
                or pool_size >= len(host_ids):
            raise ValueError(f"pool_size must be 0..{len(host_ids) - 1}, got {pool_size!r}")
        if not pool_max_idle_s > 0:
            raise ValueError(f"pool_max_idle_s must be positive, got {pool_max_idle_s!r}")
        self.pool_size = pool_size
        self.pool_max_idle_s = float(pool_max_idle_s)
        self._pool: dict[bytes, list[_Child]] = {}
        self._pending: dict[bytes, int] = {}
        self._pool_lock = threading.Lock()
        self._pool_pid = os.getpid()
        self._pool_jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._pool_thread: threading.Thread | None = None
        self._closed = False
        # calls served by a waiting child, calls that started their own, children discarded
        self.pool_stats = {"served": 0, "cold": 0, "discarded": 0}
        self._one_off = threading.local()

    @contextlib.contextmanager
    def one_off_calls(self) -> Iterator[None]:
        """Calls made by this thread inside the block start no replacement child: a caller that
        knows no other call will have the same key (e.g. a probe with limits of its own) keeps
        the pool from starting children nobody takes (each was a sandbox started for nothing,
        and its refill evicted waiting children of the keys that are used)."""
        before = getattr(self._one_off, "on", False)
        self._one_off.on = True
        try:
            yield
        finally:
            self._one_off.on = before

    # -- pre-spawned single-use children -------------------------------------------------------

    def _signature(self, binds: Sequence[tuple[Path, str]]) -> list[Any]:
        """Identity of every bind source's content (a pooled child holds copies made at spawn)."""
        out: list[Any] = []
        for host, dest in binds:
            paths = [Path(host)]
            if paths[0].is_dir():
                paths += sorted(Path(r) / f for r, _, fs in os.walk(host) for f in fs)
            for p in paths:
                st = os.stat(p, follow_symlinks=False)
                out.append([dest, str(p), *(str(v) for v in (st.st_dev, st.st_ino, st.st_size,
                                                                st.st_mtime_ns, st.st_ctime_ns))])
        return out

    def _take(self, key: bytes) -> _Child | None:
        """A ready child for ``key`` (discarding any that waited too long or died), or None."""
        stale: list[_Child] = []
        found = None
        with self._pool_lock:
            ready = self._pool.get(key, [])
            while ready and found is None:
                child = ready.pop(0)
                if time.monotonic() - child.waiting_since > self.pool_max_idle_s or \
                        child.proc.poll() is not None:
                    stale.append(child)
                else:
                    found = child
        for child in stale:
            self._discard(child)
        return found

    def _replenish(self, key: bytes, cfg: dict[str, Any], limits: Limits,
                   binds: Sequence[tuple[Path, str]], dirs: Sequence[str]) -> None:  # fmt: skip
        """Start children for ``key`` in the background until ``pool_size`` wait in all (the
        oldest waiting children of other keys make room)."""

        def fill() -> None:
            while True:
                evict: list[_Child] = []
                with self._pool_lock:
                    if self._closed:
                        return
                    mine = len(self._pool.get(key, [])) + self._pending.get(key, 0)
                    if mine >= self.pool_size:
                        return
                    others = sorted((c for k, cs in self._pool.items() if k != key for c in cs),
                                    key=lambda c: c.born)  # fmt: skip
                    total = sum(len(cs) for cs in self._pool.values()) + sum(
                        self._pending.values())
                    while total >= self.pool_size and others:
                        old = others.pop(0)
                        self._pool[old.key].remove(old)
                        evict.append(old)
                        total -= 1
                    self._pending[key] = self._pending.get(key, 0) + 1
                for old in evict:
                    self._discard(old)
                try:
                    child: _Child | None = self._launch(dict(cfg), limits, binds, key, dirs,
                                                        background=True)  # fmt: skip
                except (OSError, SandboxError, ValueError):
                    with self._pool_lock:  # the call that needs one starts it (and reports)
                        self._pending[key] -= 1
                    return
                with self._pool_lock:
                    self._pending[key] -= 1
                    if child is not None and not self._closed:
                        child.waiting_since = time.monotonic()
                        self._pool.setdefault(key, []).append(child)
                        child = None
                if child is not None:
                    self._discard(child)
                    return

        # one long-lived thread starts every pooled child: bwrap's --die-with-parent is the
        # parent-death signal, which fires when the *thread* that started it ends
        with self._pool_lock:
            if self._pool_thread is None:
                self._pool_thread = threading.Thread(target=self._pool_loop,
                                                     name="ect-sandbox-pool", daemon=True)
                self._pool_thread.start()
        self._pool_jobs.put(fill)

    def _pool_loop(self) -> None:
        while True:
            try:
                job = self._pool_jobs.get(timeout=self.pool_max_idle_s / 2)
            except queue.Empty:  # idle: discard the children that waited too long
                self.discard_waiting(older_than=self.pool_max_idle_s)
                continue
            try:
                job()
            except Exception:  # a failed refill: the call that needs a child starts one itself
                continue

    def discard_waiting(self, older_than: float = 0.0) -> int:
        """Destroy the waiting children that waited longer than ``older_than`` seconds; returns
        how many (they hold cgroups and host ids while they wait)."""
        now = time.monotonic()
        with self._pool_lock:
            gone = [c for cs in self._pool.values() for c in cs
                    if now - c.waiting_since >= older_than]  # fmt: skip
            for c in gone:
                self._pool[c.key].remove(c)
        for c in gone:
            self._discard(c)
        return len(gone)

    def _run_pooled(self, config: Mapping[str, Any], stdin: bytes, limits: Limits,
                    ro_binds: Sequence[tuple[Path, str]]) -> ChildResult:  # fmt: skip
        """Serve one call from a pre-spawned child (or one started now, cold), then start its
        replacement: the child applied every layer and loaded the worker (and in tool mode the
        tools) before the call was known; it gets the call's own fields on its stdin."""
        cfg = dict(config)
        binds = list(ro_binds)
        request: dict[str, Any] = {}
        dirs: list[str] = []
        if cfg["mode"] == "exec":
            request["argv"] = cfg.pop("argv")
        else:  # tool: the world's snapshot goes in the request, so one pool serves every world
            request["world_id"] = cfg.pop("world_id")
            snap = cfg.pop("snapshot")
            host = [h for h, d in binds if d == snap]
            binds = [(h, d) for h, d in binds if d != snap]
            if len(host) != 1:
                raise SandboxError(f"no bind gives the snapshot {snap}")
            request["snapshot_data"] = Path(host[0]).read_text("utf-8")
            # its directory still exists, read-only, as it does around a bound snapshot
            dirs = [str(Path(snap).parent)]
        cfg["await_request"] = True
        key = canonical_bytes({"cfg": cfg, "limits": asdict(limits), "dirs": dirs,
                               "binds": self._signature(binds)})  # fmt: skip
        if os.getpid() != self._pool_pid:  # a forked copy: the parent's children are not ours
            self._forget_pool()
        child = self._take(key)
        with self._pool_lock:
            self.pool_stats["served" if child is not None else "cold"] += 1
        if child is None:
            child = self._launch(dict(cfg), limits, binds, key, dirs)
        if not getattr(self._one_off, "on", False):
            self._replenish(key, cfg, limits, binds, dirs)
        head = canonical_bytes(request)
        return self._finish(child, b"%010d" % len(head) + head + stdin, limits, time.monotonic())

    def _forget_pool(self) -> None:
        self._pool_pid = os.getpid()
        self._pool_lock = threading.Lock()
        self._pool = {}
        self._pending = {}
        self._pool_jobs = queue.SimpleQueue()
        self._pool_thread = None

    def pool_waiting(self) -> int:
        """How many pre-spawned children wait for a call now."""
        with self._pool_lock:
            return sum(len(cs) for cs in self._pool.values())

    def close(self) -> None:
        """Destroy every waiting pre-spawned child (also at exit)."""
        with self._pool_lock:
            self._closed = True
            children = [c for cs in self._pool.values() for c in cs]
            self._pool.clear()
        for child in children:
            self._discard(child)

    def _discard(self, child: _Child) -> None:
        """Destroy a child that will serve no call."""
        with self._pool_lock:
            self.pool_stats["discarded"] += 1
        with contextlib.suppress(OSError):
            if child.pidfd >= 0:
                signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(child.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            child.proc.communicate(timeout=5)
        if child.pidfd >= 0:
            with contextlib.suppress(OSError):
                os.close(child.pidfd)
        self._release(child.group, child.uid, child.tag)


_BACKENDS: weakref.WeakSet[ChildPool] = weakref.WeakSet()


def _reclaim_waiting() -> None:
    """Discard every waiting pre-spawned child of every backend in this process (a call that
    finds no free host id: the waiting children hold them)."""
    for backend in list(_BACKENDS):
        backend.discard_waiting()
