"""No sandbox outlives its runner (issue 37, item 1): a runner SIGKILLed at a random instant --
while constructing its backend and running its self-check, with the pool idle or refilling,
while a sandbox is being set up or adopted into its cgroups, mid-call -- leaves no process, no
cgroup and no held host id behind once its reaper is done (``runner/sandbox/_reaper.py``).

``ECT_ORPHAN_KILLS`` sets how many kills (default 12; ``make test-orphans`` runs 100).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
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
CHILD_KILLS = 4
# the reaper's own give-up time is 30 s (HARD_CAP_S); it is done far sooner (benchmark:
# benchmarks/orphans.py measures the time to a clean host after each kill)
WAIT_S = 30.0

RUNNER = """
import sys
from runner.sandbox import _linux, _reaping

made = _linux.CallCgroups.__init__
tag = _reaping.ReaperLink.tag

def init(self, *a, **k):  # report each cgroup owner token as soon as it exists
    made(self, *a, **k)
    print("owner", self.owner, flush=True)

def tagged(self):  # and each launch tag before its launcher is started
    t = tag(self)
    print("tag", t, flush=True)
    return t

_linux.CallCgroups.__init__ = init
_reaping.ReaperLink.tag = tagged
sys.argv = ["kill_runner", *sys.argv[1:]]
from tests.sandbox.kill_runner import main
main()
"""


def _tagged(tags: set[str]) -> list[int]:
    """Processes whose ``argv[0]`` is one of the killed runner's launch tags (its bwrap launchers
    and sandbox pid 1s); other runners' sandboxes on this host are not looked at."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv0 = Path(entry.path, "cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if argv0.decode("ascii", "replace") in tags:
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


def _left(owners: set[str], tags: set[str]) -> dict[str, list[object]]:
    found: dict[str, list[object]] = {"processes": list(_tagged(tags)),
                                      "id_processes": list(_id_processes()),
                                      "cgroups": [str(g) for g in _groups(owners)],
                                      "held_ids": list(_held_ids())}
    return {k: v for k, v in found.items() if v}


@dataclass
class Runner:
    """A started runner child (RUNNER): the process, the cgroup owner tokens and launch tags it
    reports, an event set once it serves calls, its reaper's pid (once ready) and the thread
    reading its output (join it after the kill: then every tag is known)."""

    proc: subprocess.Popen[bytes]
    owners: set[str]
    tags: set[str]
    ready: threading.Event
    reaper: list[int]
    reader: threading.Thread


def start_runner(seed: int) -> Runner:
    """Start the runner child (RUNNER) for ``seed`` (also used by benchmarks/orphans.py)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(IDS[0]), str(IDS[1]), str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            cwd=REPO, start_new_session=True)  # fmt: skip
    owners: set[str] = set()
    tags: set[str] = set()
    reaper: list[int] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            words = line.decode().split()
            if words[:1] == ["owner"]:
                owners.add(words[1])
            elif words[:1] == ["tag"]:
                tags.add(words[1])
            elif words[:1] == ["ready"]:
                reaper.append(int(words[3]))
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return Runner(proc, owners, tags, ready, reaper, reader)


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (every thread's)."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return out


def _kill_once(seed: int, children_first: bool = False) -> tuple[dict[str, list[object]], float]:
    """SIGKILL a runner at a random instant; what is left once its reaper is done (empty: nothing)
    and how long that took. ``children_first``: the runner's direct children are SIGKILLed just
    before it, as a Ray worker does to its own as it ends (``kill_child_processes_on_worker_exit``,
    on by default): its launchers, and its reaper if the reaper were one of them."""
    rnd = random.Random(seed)
    r = start_runner(seed)
    proc, owners = r.proc, r.owners
    if not children_first and rnd.random() < 0.25:  # while the backend starts
        time.sleep(rnd.uniform(0.0, 0.6))
    else:  # while it serves calls
        assert r.ready.wait(60), "the runner never served a call"
        time.sleep(rnd.uniform(0.0, 1.2))
    if children_first:
        for kid in children(proc.pid):
            with contextlib.suppress(OSError):
                os.kill(kid, signal.SIGKILL)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    r.reader.join(5)
    assert proc.stdout is not None
    proc.stdout.close()
    killed = time.monotonic()
    left = _left(owners, r.tags)
    while left and time.monotonic() - killed < WAIT_S:
        time.sleep(0.05)
        left = _left(owners, r.tags)
    return left, time.monotonic() - killed


def test_the_check_finds_what_a_runner_without_its_reaper_leaves() -> None:
    """The check can fail: a runner whose reaper is killed first leaves its groups (and, on a
    bad instant, its sandboxes) behind, as every runner did before the reaper."""
    if os.geteuid() != 0:
        pytest.skip("per-call cgroups are made by a root parent only")
    r = start_runner(7)
    with r.proc as proc:
        assert r.ready.wait(60), "the runner never served a call"
        time.sleep(0.5)
        reaper = r.reaper[0]
        assert b"_reaper.py" in Path(f"/proc/{reaper}/cmdline").read_bytes()
        os.kill(reaper, signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
    r.reader.join(5)
    time.sleep(2.0)
    left = _left(r.owners, r.tags)
    try:
        assert left.get("cgroups"), left
    finally:  # clean up by hand what the reaper would have
        for pid in left.get("processes", []) + left.get("id_processes", []):
            with contextlib.suppress(OSError):
                os.kill(int(str(pid)), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _groups(r.owners) and time.monotonic() < deadline:
            for g in _groups(r.owners):
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


def test_a_runner_that_kills_its_children_as_it_ends_leaves_nothing_behind() -> None:
    """A Ray worker SIGKILLs its direct children as it ends (on by default). The reaper was one
    of them: it died with the launchers it guards, so the runner's groups stayed, and a sandbox
    being set up at that instant stayed for good (the orphan of docs/sandbox.md). It is no child
    of its runner now."""
    if not os.path.exists("/usr/bin/bwrap"):
        pytest.skip("no bubblewrap")
    r = start_runner(4242)
    try:
        assert r.ready.wait(60), "the runner never served a call"
        assert r.reaper[0] not in children(r.proc.pid)
    finally:
        r.proc.kill()
        r.proc.wait()
        if r.proc.stdout is not None:
            r.proc.stdout.close()
    base = random.randrange(1 << 30)
    bad = {}
    for i in range(CHILD_KILLS):
        left, _ = _kill_once(base + i, children_first=True)
        if left:
            bad[base + i] = left
            for pid in left.get("processes", []) + left.get("id_processes", []):
                with contextlib.suppress(OSError):
                    os.kill(int(str(pid)), signal.SIGKILL)
    assert not bad, f"{len(bad)} of {CHILD_KILLS} kills left something behind: {bad}"


def _tag() -> str:
    return "ect-sandbox-" + secrets.token_hex(8)


def _stuck_pid1(tag: str) -> tuple[subprocess.Popen[bytes], int, int]:
    """A bwrap launcher held between cloning the sandbox's pid 1 and letting it past its set-up
    (``--userns-block-fd``): the launcher, the pid 1 (waiting in ``eventfd_read``) and the fd
    whose write would let the launcher go on."""
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    proc = subprocess.Popen(
        [tag, "--unshare-user", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
         "--info-fd", str(info_w), "--userns-block-fd", str(block_r), "true"],
        executable="/usr/bin/bwrap", pass_fds=(info_w, block_r), start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(info_w)
    os.close(block_r)
    data = b""
    with os.fdopen(info_r, "rb") as f:
        while b"}" not in data:
            chunk = f.read1(4096)
            if not chunk:
                break
            data += chunk
    pid1 = int(json.loads(data[: data.index(b"}") + 1])["child-pid"])
    return proc, pid1, block_w


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize("by", ["backend_start", "reaper"])
def test_a_sandbox_pid_1_whose_launcher_died_in_its_set_up_is_ended(by: str) -> None:
    """bwrap's pid 1 sets its parent-death signal only once its launcher lets it past its set-up
    (bubblewrap issue 633): a launcher killed in that window leaves it waiting in
    ``eventfd_read`` for good. If the runner's reaper was killed too, the next backend's start
    or any runner's reaper ends it; a pid 1 whose launcher is alive is never taken for one."""
    if not os.path.exists("/usr/bin/bwrap"):
        pytest.skip("no bubblewrap")
    from runner.sandbox._reaper import orphaned_pid1s, reap

    proc, pid1, block_w = _stuck_pid1(_tag())
    try:
        live = orphaned_pid1s()
        assert pid1 not in live and proc.pid not in live  # its launcher is alive: not an orphan
        proc.kill()
        proc.wait()
        time.sleep(0.5)
        assert _alive(pid1), "the pid 1 did not stay: the reproduction is void"
        assert pid1 in orphaned_pid1s()
        if by == "backend_start":
            from runner.sandbox import BwrapBackend

            BwrapBackend(pool_size=0).close()
        else:
            assert reap(set(), {}, [], min_watch_s=0.0)
        assert _gone_within(pid1, 10.0), f"the orphaned pid 1 {pid1} is still there"
    finally:
        os.close(block_w)
        with contextlib.suppress(OSError):
            os.kill(pid1, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait()


def test_the_reaper_is_no_child_of_its_runner() -> None:
    from runner.sandbox._reaping import reaper_link

    link = reaper_link()
    assert link.pid not in children(os.getpid())
    assert _alive(link.pid)
    assert b"_reaper.py" in Path(f"/proc/{link.pid}/cmdline").read_bytes()


LATE_EXEC = """
import os, subprocess, sys, time
from runner.sandbox import _reaping

link = _reaping.ReaperLink()
tag = link.tag()
out = os.dup(1)  # the child's own stdout is /dev/null by the time hold() runs

def hold() -> None:  # in the forked child, before its exec: the runner is killed meanwhile
    # as close_fds does, the child lets go of its copy of the runner's socket before its exec;
    # then the exec comes late (a loaded host)
    os.close(link.sock.fileno())
    os.write(out, b"forked %d\\n" % os.getpid())
    time.sleep(1.5)

subprocess.Popen([tag, "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "sleep", "60"],
                 executable="/usr/bin/bwrap", preexec_fn=hold, start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(60)
"""


def test_a_launcher_forked_before_the_runner_died_and_execed_after_is_ended() -> None:
    """The fork-to-exec window is not covered by a timer: a launcher forked before the runner
    ended has its tag registered but is never reported started, so the reaper waits for that
    tag to appear however late the exec comes. Here the child has let go of the runner's socket
    (as ``close_fds`` does) and execs 1.5 s after the runner is killed, three times the
    reaper's minimum watch; it is still ended (else its ``sleep 60`` sandbox would run on:
    ``--die-with-parent`` set after the parent's death never fires). Before, the reaper stopped
    looking 0.5 s after the end."""
    if not os.path.exists("/usr/bin/bwrap"):
        pytest.skip("no bubblewrap")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-c", LATE_EXEC], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, env=env, cwd=REPO,
                          start_new_session=True) as proc:  # fmt: skip
        assert proc.stdout is not None
        words = proc.stdout.readline().decode().split()
        assert words[:1] == ["forked"], words
        launcher = int(words[1])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    try:
        assert _gone_within(launcher, 20.0), "the late launcher outlived its runner's reaper"
    finally:
        with contextlib.suppress(OSError):
            os.killpg(launcher, signal.SIGKILL)
