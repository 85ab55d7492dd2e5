"""An over-limit process is recorded as ``memory`` (issue 37, item 5): a call whose process the
kernel's OOM killer ends in its per-call memory cgroup was recorded as ``signal``."""

from __future__ import annotations

import pytest

from runner.sandbox import BwrapBackend, Limits

from .conftest import linux_only

pytestmark = linux_only

TOUCH = "b = bytearray({n} << 20); b[::4096] = b'x' * len(b[::4096]); print(len(b))"


def test_a_process_over_the_call_memory_limit_is_recorded_as_memory(bwrap: BwrapBackend) -> None:
    if bwrap.cgroups is None:
        pytest.skip("no per-call memory cgroup (non-root parent): RLIMIT_AS answers MemoryError")
    py = str(bwrap.python)
    limits = Limits(memory_bytes=64 << 20, wall_s=30.0)
    over = bwrap.run([py, "-I", "-S", "-c", TOUCH.format(n=160)], stdin=b"", limits=limits)
    assert (over.exit_status, over.kill_reason) == (None, "memory"), over
    # the same group, reused, under the limit: no stale count makes it "memory"
    for _ in range(3):
        ok = bwrap.run([py, "-I", "-S", "-c", TOUCH.format(n=8)], stdin=b"", limits=limits)
        assert (ok.exit_status, ok.kill_reason) == (0, None), ok
    killed = bwrap.run([py, "-I", "-S", "-c", "import os, signal; os.kill(os.getpid(), 9)"],
                       stdin=b"", limits=limits)  # fmt: skip
    assert killed.kill_reason == "signal"  # a SIGKILL that was not the OOM killer's
