"""One host identity per call, nothing of the host inside, and a record that is the worker's own
report (issue 28). The probes (``seccomp.keyctl_named``, ``identity.*``, ``host.*``,
``record.rlimits``, ``limits.cpu_tree``) run through tests/sandbox/test_probes.py."""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path

import pytest

from runner.sandbox import BwrapBackend, Limits, SandboxUnavailable
from runner.sandbox._linux import HostIds, _try_lock

from .conftest import linux_only


def _free_block(size: int) -> int:
    """The first id of ``size`` ids in 64000-64999 (not the default range) that no process
    holds now: concurrent runs of this suite on one host (two checkouts) lease the same lock
    files, so a fixed block made one run's leases fail in the other. The search starts at a
    block picked by this process's pid."""
    blocks = list(range(64_000, 65_000 - size, size))
    start = os.getpid() % len(blocks)
    for first in blocks[start:] + blocks[:start]:
        fds = [_try_lock(f"uid-{uid}.lock") for uid in range(first, first + size)]
        for fd in fds:
            if fd is not None:
                os.close(fd)
        if all(fd is not None for fd in fds):
            return first
    raise AssertionError("no free block of test host ids in 64000-64999")


def test_host_ids_are_leased_one_per_call_least_recently_used_first() -> None:
    b0 = _free_block(3)
    ids = HostIds(range(b0, b0 + 3))
    a, b = ids.lease(1.0), ids.lease(1.0)
    assert (a, b) == (b0, b0 + 1)
    ids.release(a)
    # the id just returned comes back last: the one never used yet comes first
    assert ids.lease(1.0) == b0 + 2
    assert ids.lease(1.0) == b0
    with pytest.raises(SandboxUnavailable, match="all 3 sandbox host ids are in use"):
        ids.lease(0.05)
    # another backend (or runner process) over the same range never gets a leased id
    other = HostIds(range(b0, b0 + 3))
    with pytest.raises(SandboxUnavailable, match="in use"):
        other.lease(0.05)
    ids.release(b0 + 1)
    assert other.lease(1.0) == b0 + 1


def test_a_call_waits_for_a_released_id() -> None:
    first_id = _free_block(1)
    ids = HostIds(range(first_id, first_id + 1))
    first = ids.lease(1.0)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(ids.lease(10.0)))
    waiter.start()
    ids.release(first)
    waiter.join(10.0)
    assert got == [first]


def test_host_id_ranges_are_checked() -> None:
    for bad in (range(0, 3), range(5, 5), range(10, 20, 2)):
        with pytest.raises(ValueError, match="host_ids"):
            HostIds(bad)
    import pwd

    account = next((e for e in pwd.getpwall() if e.pw_uid > 0), None)
    if account is None:
        pytest.skip("no non-root account on this host")
    with pytest.raises(SandboxUnavailable, match=f"belongs to user '{account.pw_name}'"):
        HostIds(range(account.pw_uid, account.pw_uid + 1))


@linux_only
def test_binds_are_copies_and_odd_sources_are_refused(bwrap: BwrapBackend, tmp_path: Path) -> None:
    src = tmp_path / "tree"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("A")
    (src / "sub" / "b.sh").write_text("echo b")
    (src / "sub" / "b.sh").chmod(0o700)  # unreadable to others: the parent reads it
    py = str(bwrap.python)
    code = ("import os; print(open('/ect/t/a.txt').read(), open('/ect/t/sub/b.sh').read(),"
            " oct(os.stat('/ect/t/sub/b.sh').st_mode & 0o777),"
            " any(str(os.sep) + 'tree' in l for l in open('/proc/self/mountinfo')))")  # fmt: skip
    r = bwrap.run([py, "-I", "-S", "-c", code], stdin=b"", limits=Limits(),
                  ro_binds=[(src, "/ect/t")])  # fmt: skip
    assert r.stdout.split() == [b"A", b"echo", b"b", b"0o555", b"False"], r.stderr
    (src / "link").symlink_to("/etc/passwd")
    with pytest.raises(ValueError, match="symlink"):
        bwrap.run([py, "-c", "pass"], stdin=b"", limits=Limits(), ro_binds=[(src, "/ect/t")])


@linux_only
def test_the_record_is_what_the_worker_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove one layer (the worker is not given RLIMIT_NPROC): the record changes with it."""
    full = BwrapBackend().layers()
    assert full["rlimits"]["nproc"] == Limits().nproc
    planned = Limits.rlimits
    monkeypatch.setattr(Limits, "rlimits",
                        lambda self: {k: v for k, v in planned(self).items() if k != "nproc"})  # fmt: skip
    without = BwrapBackend().layers()
    inherited = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    # what the worker has now is the parent's limit, and the record says exactly that
    assert without["rlimits"]["nproc"] == (None if inherited == resource.RLIM_INFINITY
                                           else inherited)  # fmt: skip
    if inherited == resource.RLIM_INFINITY:
        assert "rlimits: RLIMIT_NPROC (non-root host uid)" not in without["guarantees"][
            "process_count"]
    monkeypatch.undo()
    # remove the per-call cgroups: the bounds fall back, and the record says which
    import runner.sandbox._bwrap as bw

    monkeypatch.setattr(bw.CallCgroups, "detect", classmethod(lambda cls: None))
    bare = BwrapBackend().layers()
    assert bare["cgroups"] is None and bare["cgroup_controllers"] == []
    assert bare["bounds"]["cpu"].startswith("rlimit RLIMIT_CPU per process")
    assert bare["guarantees"]["cpu"] == [
        "fallback: RLIMIT_CPU per process only (the wall clock bounds the call)"]
    assert bare["guarantees"]["memory"] == ["fallback: RLIMIT_AS per process only"]
    if full["cgroups"] is not None:
        assert full["guarantees"]["memory"] == ["cgroup memory limit, no swap (root parent)"]


@linux_only
@pytest.mark.skipif(os.geteuid() != 0, reason="per-call host ids need a root parent")
def test_concurrent_calls_run_as_different_host_ids(bwrap: BwrapBackend) -> None:
    py = str(bwrap.python)
    out: list[bytes] = []

    def call() -> None:
        r = bwrap.run([py, "-I", "-S", "-c", "import os, time; time.sleep(0.5); print(os.getuid())"],
                      stdin=b"", limits=Limits())  # fmt: skip
        out.append(r.stdout)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    uids = {int(o) for o in out}
    assert len(uids) == 3 and uids <= set(bwrap.ids.ids if bwrap.ids else ())
