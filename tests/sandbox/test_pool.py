"""Pre-spawned single-use sandboxes (issue 30, item 1): each child serves exactly one call and is
destroyed; the pool is bounded and recorded; a child that waits too long is discarded; the
probes hold on pooled and on cold children alike."""

from __future__ import annotations

import os
import time

import pytest

from runner.sandbox import BwrapBackend, Limits, run_probes
from runner.sandbox._linux import HostIds

from .conftest import linux_only

pytestmark = linux_only


def _wait_ready(be: BwrapBackend, n: int = 1) -> None:
    until = time.monotonic() + 60.0
    while be.pool_waiting() < n and time.monotonic() < until:
        time.sleep(0.01)
    assert be.pool_waiting() >= n, "the pool never refilled"


def test_each_pooled_child_serves_one_call_then_is_replaced() -> None:
    be = BwrapBackend(pool_size=2)
    try:
        py = str(be.python)
        code = ("import os, sys; print(open('/proc/sys/kernel/random/boot_id').read().strip(),"
                " os.getuid(), sys.stdin.read(), os.path.exists('/tmp/mark'));"
                " open('/tmp/mark', 'w').write('x')")  # fmt: skip
        seen = []
        for i in range(4):
            if i:
                _wait_ready(be)
            r = be.run([py, "-I", "-S", "-c", code], stdin=b"in%d" % i, limits=Limits())
            assert r.exit_status == 0, r.stderr
            boot, _uid, got, mark = r.stdout.split()
            assert got == b"in%d" % i and mark == b"False"  # its own stdin, a fresh /tmp
            seen.append(boot)
        assert len(set(seen)) == 4  # a new sandbox (its own boot id) for every call
        assert be.pool_stats["served"] == 3 and be.pool_stats["cold"] == 1
        assert be.layers()["pool"] == {"size": 2, "max_idle_s": 30.0, "single_use": True}
    finally:
        be.close()
    assert be.pool_waiting() == 0


def test_the_pool_is_bounded_across_kinds_of_call() -> None:
    be = BwrapBackend(pool_size=2)
    try:
        py = str(be.python)
        for wall in (5.0, 6.0, 7.0, 8.0):  # four pool keys
            r = be.run([py, "-I", "-S", "-c", "print(1)"], stdin=b"", limits=Limits(wall_s=wall))
            assert r.stdout == b"1\n"
            _wait_ready(be)
            assert be.pool_waiting() <= 2
        assert be.pool_stats["discarded"] >= 1  # older keys' children made room
    finally:
        be.close()


def test_a_child_that_waited_too_long_is_discarded_unused() -> None:
    be = BwrapBackend(pool_size=1, pool_max_idle_s=1.0)
    try:
        py = str(be.python)
        be.run([py, "-I", "-S", "-c", "pass"], stdin=b"", limits=Limits())
        _wait_ready(be)
        time.sleep(1.5)
        r = be.run([py, "-I", "-S", "-c", "print(2)"], stdin=b"", limits=Limits())
        assert r.stdout == b"2\n"
        assert be.pool_stats == {"served": 0, "cold": 2, "discarded": be.pool_stats["discarded"]}
        assert be.pool_stats["discarded"] >= 1
        # nobody calls: the pool's own thread discards the refill once it has waited too long
        before = be.pool_stats["discarded"]
        until = time.monotonic() + 60.0
        while be.pool_stats["discarded"] == before and time.monotonic() < until:
            time.sleep(0.05)
        assert be.pool_stats["discarded"] == before + 1 and be.pool_waiting() == 0
    finally:
        be.close()


def test_a_call_that_finds_no_free_host_id_reclaims_waiting_children() -> None:
    if os.geteuid() != 0:
        pytest.skip("per-call host ids need a root parent")
    # three ids: the pool's waiting children (two) and the call's; a second backend's call takes
    # an id from a waiting child of the first instead of waiting for the first to go idle
    ids = range(64_910, 64_913)
    a = BwrapBackend(pool_size=2, host_ids=ids)
    b = BwrapBackend(pool_size=0, host_ids=ids)
    try:
        py = str(a.python)
        a.run([py, "-I", "-S", "-c", "pass"], stdin=b"", limits=Limits())
        _wait_ready(a, 2)
        other = HostIds(ids)  # the third id is held elsewhere (another runner, say)
        held = other.lease(5.0)
        r = b.run([py, "-I", "-S", "-c", "import os; print(os.getuid())"], stdin=b"",
                  limits=Limits())  # fmt: skip
        assert int(r.stdout) in ids and a.pool_stats["discarded"] >= 1
        other.release(held)
    finally:
        a.close()
        b.close()


def test_pool_size_is_validated_and_zero_turns_it_off() -> None:
    for bad in (-1, True, 10_000):
        with pytest.raises(ValueError, match="pool_size"):
            BwrapBackend(pool_size=bad)
    be = BwrapBackend(pool_size=0)
    py = str(be.python)
    assert be.run([py, "-I", "-S", "-c", "print(3)"], stdin=b"", limits=Limits()).stdout == b"3\n"
    assert be.pool_stats == {"served": 0, "cold": 0, "discarded": 0} and be.pool_waiting() == 0
    assert be.layers()["pool"]["size"] == 0


ISSUE_28 = ["seccomp.keyctl_named", "identity.per_call_uid", "identity.capabilities",
            "host.mountinfo", "host.cgroup_names", "host.boot_id", "host.key_users",
            "record.rlimits", "limits.cpu_tree", "exec.scratch"]  # fmt: skip


def test_probes_hold_on_cold_children_too() -> None:
    """tests/sandbox/test_probes.py runs every probe through the default (pooled) backend."""
    cold = BwrapBackend(pool_size=0)
    for r in run_probes(cold, only=ISSUE_28):
        assert r.passed, (r.name, r.expected, r.observed, r.detail)


def _pool_idle(be: BwrapBackend) -> None:
    """Returns once the pool's thread has run every refill asked for so far (it runs them in
    order, so a marker job queued now runs after them)."""
    import threading

    if be._pool_thread is None:  # no refill was ever asked for
        return
    done = threading.Event()
    be._pool_jobs.put(done.set)
    assert done.wait(60.0), "the pool's thread never ran its jobs"


def test_a_one_off_call_starts_no_replacement_child() -> None:
    # Issue 37: every probe call asked the pool for replacements of its key, also the probes
    # with limits of their own (no other call has their key): 24-26 sandboxes per preflight were
    # started only to be discarded unused, and their refills evicted the children of the key the
    # other probes share (a tenth of preflight's CPU).
    be = BwrapBackend(pool_size=2)
    try:
        py = str(be.python)
        with be.one_off_calls():
            r = be.run([py, "-I", "-S", "-c", "print(1)"], stdin=b"", limits=Limits(wall_s=9.0))
        assert r.stdout == b"1\n"
        be.run([py, "-I", "-S", "-c", "print(2)"], stdin=b"", limits=Limits(wall_s=8.0))
        _pool_idle(be)
        # only the ordinary call's key got children (the one-off call's started none)
        assert be.pool_waiting() == 2
        with be.one_off_calls():
            r = be.run([py, "-I", "-S", "-c", "print(3)"], stdin=b"", limits=Limits(wall_s=8.0))
        assert r.stdout == b"3\n"
        _pool_idle(be)
        assert be.pool_stats == {"served": 1, "cold": 2, "discarded": 0}  # served, not refilled
        assert be.pool_waiting() == 1
    finally:
        be.close()


def test_probes_with_limits_of_their_own_leave_no_child_waiting() -> None:
    be = BwrapBackend(pool_size=2)
    try:
        [r] = run_probes(be, only=["limits.output_flood"])
        assert r.passed, r
        _pool_idle(be)
        assert be.pool_waiting() == 0 and be.pool_stats["discarded"] == 0
        [r] = run_probes(be, only=["network.inet_socket"])  # the key the other probes share
        assert r.passed, r
        _pool_idle(be)
        assert be.pool_waiting() == 2
    finally:
        be.close()
