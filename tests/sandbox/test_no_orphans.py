"""No sandbox outlives its runner (issue 37, item 1): a runner SIGKILLed at a random instant --
while constructing its backend and running its self-check, with the pool idle or refilling,
while a sandbox is being set up or adopted into its cgroups, mid-call -- leaves no process, no
cgroup and no held host id behind once its reaper is done (``runner/sandbox/_reaper.py``).

``ECT_ORPHAN_KILLS`` sets how many kills (default 12; ``make test-orphans`` runs 100).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runner.sandbox._linux import _mounts, _own_cgroups, _try_lock

from .conftest import linux_only

pytestmark = linux_only

REPO = Path(__file__).resolve().parents[2]
# host ids of their own (no other test or runner on this host uses them), so any process
# running as one of them, or any lease of one, is the killed runner's
IDS = (61_000, 61_063)
KILLS = int(os.environ.get("ECT_ORPHAN_KILLS", "12"))
# the reaper's own give-up time is 30 s (HARD_CAP_S); it is done far sooner (benchmark:
# benchmarks/orphans.py measures the time to a clean host after each kill)
WAIT_S = 30.0

RUNNER = """
import sys
from runner.sandbox import _linux

made = _linux.CallCgroups.__init__

def init(self, *a, **k):  # report each cgroup owner token as soon as it exists
    made(self, *a, **k)
    print("owner", self.owner, flush=True)

_linux.CallCgroups.__init__ = init
sys.argv = ["kill_runner", *sys.argv[1:]]
from tests.sandbox.kill_runner import main
main()
"""


def _tagged_orphans(me: int) -> list[int]:
    """Tagged bwrap launchers and sandbox pid 1s that do not descend from this process."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv0 = Path(entry.path, "cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if not argv0.startswith(b"ect-sandbox-"):
            continue
        pid = int(entry.name)
        while pid > 1 and pid != me:
            try:
                pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                break
        if pid != me:
            out.append(int(entry.name))
    return out


def _id_processes() -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uids = {int(v) for v in fields.get("Uid", "").split()}
        if fields.get("State", "").split()[:1] != ["Z"] and \
                any(IDS[0] <= u <= IDS[1] for u in uids):
            out.append(int(entry.name))
    return out


def _groups(owners: set[str]) -> list[Path]:
    own = _own_cgroups()
    found: list[Path] = []
    for point, fstype, opts in _mounts():
        for ctl in ([""] if fstype == "cgroup2" else sorted(opts & set(own))):
            base = Path(point) / own.get(ctl, "/").lstrip("/")
            for owner in owners:
                with contextlib.suppress(OSError):
                    found += base.glob(f"ect-sandbox-{owner}-*")
    return sorted(set(found))


def _held_ids() -> list[int]:
    held = []
    for uid in range(IDS[0], IDS[1] + 1):
        fd = _try_lock(f"uid-{uid}.lock")
        if fd is None:
            held.append(uid)
        else:
            os.close(fd)
    return held


def _left(owners: set[str]) -> dict[str, list[object]]:
    found: dict[str, list[object]] = {"processes": list(_tagged_orphans(os.getpid())),
                                      "id_processes": list(_id_processes()),
                                      "cgroups": [str(g) for g in _groups(owners)],
                                      "held_ids": list(_held_ids())}
    return {k: v for k, v in found.items() if v}


def start_runner(seed: int) -> tuple[subprocess.Popen[bytes], set[str], threading.Event,
                                     threading.Thread]:
    """Start the runner child (RUNNER) for ``seed``: the process, the owner tokens it reports,
    an event set once it serves calls, and the thread reading its output (also used by
    benchmarks/orphans.py)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(IDS[0]), str(IDS[1]), str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            cwd=REPO, start_new_session=True)  # fmt: skip
    owners: set[str] = set()
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            words = line.decode().split()
            if words[:1] == ["owner"]:
                owners.add(words[1])
            elif words[:1] == ["ready"]:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return proc, owners, ready, reader


def _kill_once(seed: int) -> tuple[dict[str, list[object]], float]:
    rnd = random.Random(seed)
    proc, owners, ready, reader = start_runner(seed)
    if rnd.random() < 0.25:  # while the backend starts (self-check, cgroup discovery)
        time.sleep(rnd.uniform(0.0, 0.6))
    else:  # while it serves calls
        ready.wait(60)
        time.sleep(rnd.uniform(0.0, 1.2))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    reader.join(5)
    assert proc.stdout is not None
    proc.stdout.close()
    killed = time.monotonic()
    left = _left(owners)
    while left and time.monotonic() - killed < WAIT_S:
        time.sleep(0.05)
        left = _left(owners)
    return left, time.monotonic() - killed


def test_the_check_finds_what_a_runner_without_its_reaper_leaves() -> None:
    """The check can fail: a runner whose reaper is killed first leaves its groups (and, on a
    bad instant, its sandboxes) behind, as every runner did before the reaper."""
    if os.geteuid() != 0:
        pytest.skip("per-call cgroups are made by a root parent only")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-c", RUNNER, str(IDS[0]), str(IDS[1]), "7"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=REPO,
                          start_new_session=True) as proc:  # fmt: skip
        assert proc.stdout is not None
        owners = set()
        for line in proc.stdout:
            words = line.decode().split()
            if words[:1] == ["owner"]:
                owners.add(words[1])
            if words[:1] == ["ready"]:
                break
        time.sleep(0.5)
        reaper = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text()
                  .split() if b"_reaper.py" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(reaper) == 1
        os.kill(reaper[0], signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
    time.sleep(2.0)
    left = _left(owners)
    try:
        assert left.get("cgroups"), left
    finally:  # clean up by hand what the reaper would have
        for pid in left.get("processes", []) + left.get("id_processes", []):
            with contextlib.suppress(OSError):
                os.kill(int(str(pid)), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _groups(owners) and time.monotonic() < deadline:
            for g in _groups(owners):
                with contextlib.suppress(OSError):
                    g.rmdir()
            time.sleep(0.05)


def test_random_sigkills_of_a_runner_leave_nothing_behind() -> None:
    if not os.path.exists("/usr/bin/bwrap"):
        pytest.skip("no bubblewrap")
    base = random.randrange(1 << 30)
    bad = {}
    for i in range(KILLS):
        left, _ = _kill_once(base + i)
        if left:
            bad[base + i] = left
            for pid in left.get("processes", []) + left.get("id_processes", []):
                with contextlib.suppress(OSError):  # ours (by tag or id): never left running
                    os.kill(int(str(pid)), signal.SIGKILL)
    assert not bad, f"{len(bad)} of {KILLS} kills left something behind: {bad}"
