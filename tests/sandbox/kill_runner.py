"""A runner to SIGKILL at a random instant (tests/sandbox/test_no_orphans.py): a pooled bwrap
backend serving calls of varied lengths (each forks a child), with discards, refills, cold
starts and cgroup adoption all under way, on its own range of host ids so that whatever it
leaves behind can be told apart from other runners' sandboxes.

Prints ``ready <pid> <cgroup owner token or -> <reaper pid>`` once its backend is up.
"""

from __future__ import annotations

import os
import random
import sys
import threading

from runner.sandbox import BwrapBackend, Limits
from runner.sandbox._reaping import reaper_link


def main() -> None:
    first, last, seed = (int(a) for a in sys.argv[1:4])
    rnd = random.Random(seed)
    be = BwrapBackend(pool_size=2, host_ids=range(first, last + 1))
    owner = be.cgroups.owner if be.cgroups is not None else "-"
    print(f"ready {os.getpid()} {owner} {reaper_link().pid}", flush=True)
    py = str(be.python)

    def calls() -> None:
        while True:
            nap = rnd.choice([0.0, 0.0, 0.01, 0.05, 0.2])
            code = f"import os, time; os.fork(); time.sleep({nap})"
            be.run([py, "-I", "-S", "-c", code], stdin=b"", limits=Limits(wall_s=10.0))
            if rnd.random() < 0.2:
                be.discard_waiting()

    for _ in range(2):
        threading.Thread(target=calls, daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
