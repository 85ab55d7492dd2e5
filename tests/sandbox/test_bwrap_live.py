"""The real bwrap backend (no mocks): policy flags, env scrubbing, limits, kills, cleanup."""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
import time
from pathlib import Path

import pytest

from runner.sandbox import BwrapBackend, Limits
from runner.sandbox._bwrap import SANDBOX_ENV

from .conftest import linux_only

pytestmark = linux_only


def _py(be: BwrapBackend, code: str) -> list[str]:
    return [str(be.python), "-I", "-S", "-c", code]


def test_argv_has_every_policy_flag(bwrap: BwrapBackend) -> None:
    argv = bwrap.bwrap_argv(Limits(tmpfs_bytes=1234567), [(9, "/ect/x/y"), (-1, "/ect/d"),
                            (11, "/ect/d/run.sh", 0o555)], 7, 8, 10,
                            [(12, "/proc/sys/kernel/random/boot_id")])  # fmt: skip
    joined = " ".join(argv)
    common = ("--die-with-parent", "--new-session", "--cap-drop ALL", "--clearenv",
              "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
              "--unshare-cgroup", "--ro-bind /usr /usr", "--perms 1777 --size 1234567 --tmpfs /tmp",
              "--seccomp 7", "--ro-bind-data 8 /ect/worker.pyc",
              "--perms 0444 --ro-bind-data 9 /ect/x/y", "--perms 0555 --dir /ect/d",
              "--perms 0555 --ro-bind-data 11 /ect/d/run.sh",
              "--perms 0555 --dir /ect/x", "--ro-bind /proc/sys /proc/sys")  # fmt: skip
    # binds are copies (no host path in mountinfo); the per-call boot_id lies over /proc/sys's
    assert "--ro-bind-fd 9" not in joined
    assert argv.index("/proc/sys/kernel/random/boot_id") > argv.index("/proc/sys")
    if os.geteuid() == 0:
        # no user namespace (it could only map to host root); the worker drops to host_id
        flags = (*common, "--cap-add CAP_SETUID", "--cap-add CAP_SETGID", "--cap-add CAP_SETPCAP")
        assert "--unshare-user" not in argv and "--unshare-all" not in argv
    else:
        flags = (*common, "--unshare-user", "--uid 65534 --gid 65534", "--disable-userns")
    for flag in flags:
        assert flag in joined, flag
    assert argv.index("--remount-ro") > argv.index("--tmpfs")
    # an interpreter outside /usr is bound at a fixed path, never at its host path
    assert "--ro-bind-fd 10 /ect/python" in joined
    assert argv.index("/ect/python") > argv.index("/ect")
    # the environment is built from nothing: only these --setenv pairs exist
    env = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
    assert env == dict(SANDBOX_ENV) | ({"LD_LIBRARY_PATH": "/ect/python/lib"}
                                      if "LD_LIBRARY_PATH" in bwrap.env else {})


def test_exit_code_stdout_stderr_and_stdin(bwrap: BwrapBackend, fast_limits: Limits) -> None:
    code = (
        "import sys; d=sys.stdin.read(); print(d.upper()); print('e', file=sys.stderr); sys.exit(3)"
    )
    r = bwrap.run(_py(bwrap, code), stdin=b"hello", limits=fast_limits)
    assert (r.exit_status, r.term_signal, r.kill_reason) == (3, None, None)
    assert r.stdout == b"HELLO\n" and r.stderr == b"e\n"


def test_large_stdin_and_output_do_not_deadlock(bwrap: BwrapBackend, fast_limits: Limits) -> None:
    data = secrets.token_bytes(300_000).hex().encode()
    code = "import sys; d=sys.stdin.buffer.read(); sys.stdout.buffer.write(d)"
    r = bwrap.run(_py(bwrap, code), stdin=data, limits=fast_limits)
    assert r.exit_status == 0 and r.stdout == data


def test_canary_never_reaches_the_child(bwrap: BwrapBackend, fast_limits: Limits,
                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    canary = "ECTCANARY-" + secrets.token_hex(16)
    monkeypatch.setenv("ECT_TEST_SECRET", canary)
    code = (
        "import os\n"
        "print(sorted(os.environ))\n"
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit():\n"
        "        for f in ('environ', 'cmdline'):\n"
        "            try: print(open(f'/proc/{p}/{f}','rb').read())\n"
        "            except OSError as e: print(p, f, e.errno)\n"
    )
    r = bwrap.run(_py(bwrap, code), stdin=b"", limits=fast_limits)
    assert r.exit_status == 0
    assert canary.encode() not in r.stdout + r.stderr
    assert b"ECT_TEST_SECRET" not in r.stdout
    assert r.stdout.splitlines()[0] == b"['HOME', 'LANG', 'PATH', 'PWD', 'TMPDIR']"


def test_host_side_environ_of_every_sandbox_process_is_clean(bwrap: BwrapBackend,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Read /proc/<pid>/environ of bwrap and its pid 1 from the host while the call runs:
    --clearenv alone would leave the parent's variables in bwrap's own environ."""
    canary = "ECTCANARY-" + secrets.token_hex(16)
    monkeypatch.setenv("ECT_TEST_SECRET", canary)
    marker = "ect-env-" + secrets.token_hex(6)
    seen: list[bytes] = []

    def scan() -> None:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            hits = []
            for p in pids:
                try:
                    cmd = Path(f"/proc/{p}/cmdline").read_bytes()
                    if marker.encode() in cmd:
                        hits.append(Path(f"/proc/{p}/environ").read_bytes())
                except OSError:
                    continue
            if len(hits) >= 2:
                seen.extend(hits)
                return
            time.sleep(0.01)

    t = threading.Thread(target=scan)
    t.start()
    # a cold child: its argv (with the marker) is bwrap's own; a pooled child gets it on stdin
    cold = BwrapBackend(pool_size=0)
    r = cold.run(
        _py(cold, f"import time; time.sleep(3)  # {marker}"), stdin=b"", limits=Limits(wall_s=10)
    )
    t.join()
    assert r.exit_status == 0
    assert len(seen) >= 2  # the outer bwrap and the sandbox's pid 1 (and the python itself)
    for env in seen:
        assert canary.encode() not in env
        assert b"ECT_TEST_SECRET" not in env


def test_wall_clock_kills_the_process_group(bwrap: BwrapBackend) -> None:
    r = bwrap.run(_py(bwrap, "import time; time.sleep(60)"), stdin=b"", limits=Limits(wall_s=1.0))
    assert r.kill_reason == "timeout" and r.exit_status is None


def test_wall_clock_applies_after_the_child_closes_its_output(bwrap: BwrapBackend) -> None:
    r = bwrap.run(["sh", "-c", "exec >&- 2>&-; sleep 30"], stdin=b"", limits=Limits(wall_s=1.0))
    assert r.kill_reason == "timeout" and r.exit_status is None


def test_cpu_limit(bwrap: BwrapBackend) -> None:
    r = bwrap.run(_py(bwrap, "while True: pass"), stdin=b"", limits=Limits(cpu_s=1, wall_s=20))
    assert r.kill_reason == "cpu" and r.term_signal == signal.SIGXCPU


def test_output_cap_truncates_and_kills(bwrap: BwrapBackend) -> None:
    code = "import os\nwhile True: os.write(1, b'y' * 65536)"
    r = bwrap.run(_py(bwrap, code), stdin=b"", limits=Limits(output_bytes=200_000))
    assert r.kill_reason == "output_cap"
    assert len(r.stdout) == 200_000 and set(r.stdout) == {ord("y")}


def test_stderr_counts_towards_the_cap(bwrap: BwrapBackend) -> None:
    code = "import os\nwhile True: os.write(2, b'z' * 65536)"
    r = bwrap.run(_py(bwrap, code), stdin=b"", limits=Limits(output_bytes=100_000))
    assert r.kill_reason == "output_cap" and len(r.stderr) == 100_000


def test_signal_death_is_reported(bwrap: BwrapBackend, fast_limits: Limits) -> None:
    r = bwrap.run(_py(bwrap, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"), stdin=b"",
                  limits=fast_limits)  # fmt: skip
    assert r.exit_status is None and r.term_signal == signal.SIGSEGV and r.kill_reason == "signal"


def test_detached_grandchild_does_not_survive(bwrap: BwrapBackend, fast_limits: Limits) -> None:
    marker = "ect-orphan-" + secrets.token_hex(6)
    code = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', '{marker}'])\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "import time; time.sleep(0.3)\n"
    )
    r = bwrap.run(_py(bwrap, code), stdin=b"", limits=fast_limits)
    assert r.exit_status == 0

    def alive() -> bool:
        for p in os.listdir("/proc"):
            try:
                if p.isdigit() and marker.encode() in Path(f"/proc/{p}/cmdline").read_bytes():
                    return True
            except OSError:
                pass
        return False

    deadline = time.monotonic() + 3
    while alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive()


def test_scratch_is_fresh_per_call(bwrap: BwrapBackend, fast_limits: Limits) -> None:
    w = bwrap.run(_py(bwrap, "open('/tmp/persist','w').write('x')"), stdin=b"", limits=fast_limits)
    assert w.exit_status == 0
    r = bwrap.run(_py(bwrap, "import os; print(os.path.exists('/tmp/persist'))"), stdin=b"",
                  limits=fast_limits)  # fmt: skip
    assert r.stdout == b"False\n"


def test_extra_binds_are_read_only(
    bwrap: BwrapBackend, fast_limits: Limits, tmp_path: Path
) -> None:
    (tmp_path / "data.txt").write_text("payload")
    tmp_path.chmod(0o755)  # under a root parent the sandbox reads only what others may read
    code = ("import os\nprint(open('/ect/data/data.txt').read())\n"
            "try: open('/ect/data/data.txt','a')\nexcept OSError as e: print(e.errno)\n"
            "print(bool(os.statvfs('/ect/data').f_flag & os.ST_RDONLY))")  # fmt: skip
    r = bwrap.run(
        _py(bwrap, code), stdin=b"", limits=fast_limits, ro_binds=[(tmp_path, "/ect/data")]
    )
    # a read-only mount; under a root parent the sandbox's uid owns nothing, so DAC (EACCES)
    # refuses before the mount would (EROFS)
    refused = b"13" if os.geteuid() == 0 else b"30"
    assert r.stdout == b"payload\n" + refused + b"\nTrue\n"
    assert (tmp_path / "data.txt").read_text() == "payload"


def test_reserved_or_relative_bind_destinations_are_refused(
    bwrap: BwrapBackend, tmp_path: Path
) -> None:
    for dest in ("/usr/x", "relative", "/tmp", "/ect/worker.py", "/ect/worker.pyc", "/a/../usr"):
        with pytest.raises(ValueError):
            bwrap.run(["/bin/true"], stdin=b"", limits=Limits(), ro_binds=[(tmp_path, dest)])


def test_host_files_outside_the_binds_are_invisible(
    bwrap: BwrapBackend, fast_limits: Limits
) -> None:
    code = ("import os\n"
            "for p in ('/etc/passwd', '/root', '/work', '/home'):\n"
            "    print(p, os.path.exists(p))")  # fmt: skip
    r = bwrap.run(_py(bwrap, code), stdin=b"", limits=fast_limits)
    assert r.stdout.split(b"\n")[:4] == [b"/etc/passwd False", b"/root False", b"/work False",
                                         b"/home False"]  # fmt: skip


def test_landlock_is_applied_inside(bwrap: BwrapBackend, fast_limits: Limits) -> None:
    r = bwrap.run_worker({"mode": "check"}, stdin=b"", limits=fast_limits)
    assert r.exit_status == 0
    seen = json.loads(r.stdout)
    assert {k: seen[k] for k in ("abi", "weaker", "net", "scoped", "seccomp")} == {
        "abi": bwrap.landlock_abi, "weaker": False, "net": True, "scoped": True, "seccomp": "2"}
    # the uid map seen inside: never host root
    if os.geteuid() == 0:
        assert seen["uid_map"] == [0, 0, 4294967295]  # no user namespace; the worker dropped
    else:
        assert seen["uid_map"] == [65534, os.geteuid(), 1]
    # listing / is not allowed by Landlock even though the mount is visible
    r = bwrap.run(_py(bwrap, "import os\ntry: os.listdir('/')\nexcept OSError as e: print(e.errno)"),
                  stdin=b"", limits=fast_limits)  # fmt: skip
    assert r.stdout == b"13\n"  # EACCES


def test_root_parent_puts_each_call_in_its_own_cgroups(
    bwrap: BwrapBackend, fast_limits: Limits
) -> None:
    if bwrap.cgroups is None:
        pytest.skip("non-root parent: RLIMIT_NPROC and RLIMIT_AS apply, no cgroup is used")
    code = "print(open('/proc/self/cgroup').read())"
    a = bwrap.run(_py(bwrap, code), stdin=b"", limits=fast_limits)
    lines = [ln for ln in a.stdout.decode().split() if "ect-sandbox-" in ln]
    assert a.exit_status == 0
    if bwrap.cgroups.version == 1:
        cpu = {"cpu", "cpuacct"} if bwrap.cgroups.cpu else set()
        assert {c for ln in lines for c in ln.split(":")[1].split(",")} == {"pids", "memory", *cpu}
    else:
        assert [ln.split(":")[1] for ln in lines] == [""]
    # named by random tokens: the runner's pid is a host fact the sandbox does not see
    assert all(str(os.getpid()) not in ln.split(":")[2].split("-") for ln in lines)
    nproc = bwrap.run(
        _py(bwrap, "import os\nfor _ in range(100): os.fork() or os._exit(0)\n"),
        stdin=b"",
        limits=Limits(nproc=4),
    )
    assert b"BlockingIOError" in nproc.stderr  # fork -> EAGAIN at the cgroup's pids.max


def test_memory_is_bounded_for_the_whole_tree(bwrap: BwrapBackend) -> None:
    """Four children each touching 96 MiB (each well under RLIMIT_AS) exceed a 256 MiB call."""
    if bwrap.cgroups is None:
        pytest.skip("non-root parent without cgroup delegation: memory is bounded per process")
    code = ("import os, time\n"
            "kids = []\n"
            "for _ in range(4):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        b = b'\\x01' * (96 << 20)\n"
            "        time.sleep(2)\n"
            "        os._exit(0)\n"
            "    kids.append(pid)\n"
            "print(sorted(os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids))\n")  # fmt: skip
    small = Limits(wall_s=20.0, memory_bytes=256 << 20)
    r = bwrap.run(_py(bwrap, code), stdin=b"", limits=small)
    assert r.exit_status == 0, r.stderr
    codes = json.loads(r.stdout)
    assert -9 in codes  # the cgroup's OOM killer ended at least one child
    big = Limits(wall_s=20.0, memory_bytes=1 << 30)
    r = bwrap.run(_py(bwrap, code), stdin=b"", limits=big)
    assert r.exit_status == 0 and json.loads(r.stdout) == [0, 0, 0, 0]  # positive control
