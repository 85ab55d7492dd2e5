"""The Ray executor on a real local Ray cluster started by this module.

One cluster for the module (Ray's own ``ray.cluster_utils.Cluster``): a head that takes no work
and two worker nodes of one CPU each; tests that kill or tamper with a node add their own node
and remove it. Every run is compared cell by cell with the local executor's reference run of
the same 48-row study (``tests/study/conftest.py``). The cluster is shut down by the fixture's
finalizer, which also checks that no process it started is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.canonical import loads_strict
from runner.store import Store
from runner.study import NoUsableNode, RayExecutor, load_spec
from runner.study._ray import RAY_ENV_DEFAULTS, NodeExpectations
from runner.study._spec import SandboxLimits, sandbox_limits
from tests.sizes import STUDY_CELLS
from tests.study.conftest import Reference
from tests.study.fake_openai import FakeOpenAI
from tests.study.support import REPO, SMALL_ROWS, ect, result_digests, run, subprocess_env

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::PendingDeprecationWarning",
                                        "ignore::FutureWarning")

LIMITS = SandboxLimits(wall_s=10.0, cpu_s=5, output_bytes=1 << 20)
HALF = SMALL_ROWS // 2  # the fault tests run the first half of the slice


def _first(reference: Reference, n: int) -> dict[str, str]:
    """The reference digests of the schedule's first ``n`` cells."""
    from tests.study.support import bodies

    return {b["cell_id"]: b["result_digest"] for b in bodies(reference.store)[:n]}


def _node_pids(node: Any) -> list[int]:
    pids = []
    for infos in node.all_processes.values():
        pids.extend(info.process.pid for info in infos if info.process is not None)
    return pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    for key, value in RAY_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    # The GCS declares a silent node dead after this many missed health checks (Ray's default:
    # 5 checks 3 s apart). Killed nodes are declared dead sooner, so adding a node after a kill
    # (``wait_for_nodes`` counts live nodes) does not wait 15 s; a check still times out only
    # after Ray's default 10 s, so a busy but live node is not declared dead.
    health = {"health_check_period_ms": 1000, "health_check_failure_threshold": 5}
    c = cluster_utils.Cluster(initialize_head=True,
                              head_node_args={"num_cpus": 0, "include_dashboard": False,
                                              "_system_config": health})
    try:
        for _ in range(2):
            c.add_node(num_cpus=1)
        c.wait_for_nodes()
        yield c
    finally:
        # Every process the cluster started descends from this one (daemons, then workers).
        ours = [p for p in _descendants(os.getpid()) if b"ray" in _cmdline(p)]
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in ours) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [p for p in ours if _alive(p)]
    for pid in left:  # ours, by id: do not leave them running even when the check fails
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"Ray processes left behind: {[_cmdline(p)[:80] for p in left]}"


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""


def _expectations(spec_path: Path, *, probes: str = "mandatory",
                  limits: SandboxLimits = LIMITS) -> NodeExpectations:
    from runner.study import read_lock, study_paths

    spec = load_spec(spec_path)
    return NodeExpectations.for_run(read_lock(study_paths(spec_path).lock), spec.worlds, None,
                                    limits, probes)


def _executor_blob(store: Path) -> dict[str, Any]:
    with Store.open(store) as s:
        header = s.header
        blob: dict[str, Any] = loads_strict(s.get_blob(header["executor_blob"]))
    assert header["executor"] == blob["name"]
    return blob


def test_a_48_cell_slice_through_ray_equals_the_local_run(cluster: Any, reference: Reference,
                                                         tmp_path: Path) -> None:
    store = tmp_path / "ray.db"
    summary = run(reference.spec, store, concurrency=2, executor="ray",
                  ray_address=cluster.address)
    assert summary.committed == SMALL_ROWS and summary.halted is None
    assert summary.executor == "ray" and summary.tool_calls > 0
    assert result_digests(store) == reference.digests  # cell by cell

    nodes = _executor_blob(store)
    assert nodes["name"] == "ray" and len(nodes["used"]) == 2 and not nodes["excluded"]
    for report in nodes["nodes"]:
        assert report["ok"] is True
        assert report["node"]["node_id"] in nodes["used"]
        assert report["node"]["kernel"] == os.uname().release
        assert report["layers"]["backend"] == "bwrap"
        assert report["layers"]["landlock_applied"]
        names = {c["name"] for c in report["checks"]}
        assert names == {"source_tree", "sandbox_pins", "sandbox", "worlds", "probes"}
        probes = {p["name"]: p["passed"] for p in report["probes"]}
        assert any(n.startswith("network.") for n in probes)
        assert any(n.startswith("write.") for n in probes) and all(probes.values())
    with Store.open(reference.store) as s:
        assert s.header["executor"] == "local"


def test_a_call_lost_with_its_node_is_rerun_elsewhere(cluster: Any, reference: Reference,
                                                      tmp_path: Path) -> None:
    """Many calls queued on two nodes, one node killed under them: every call still returns
    the local sandbox's response, and each lost attempt is reported as a retry."""
    from runner.sandbox import ToolSandbox, select_backend
    from runner.worlds import write_snapshot

    doomed = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    # Enough queued work that the node is removed while calls are still waiting on it, even
    # on an idle machine where each sandboxed call takes a few tens of milliseconds.
    calls = [("w10", "get_parent", {"entity": f"s{i % 6 + 1:02d}"}) for i in range(160)]
    write_snapshot("w10", tmp_path)
    local = ToolSandbox(select_backend(), tmp_path, sandbox_limits(LIMITS))
    # The local sandbox's response to each of the six distinct calls (a response is a function
    # of the world snapshot and the call), for every queued copy of it.
    local_response = {c[2]["entity"]: local.call(*c) for c in calls[:6]}
    expected = [local_response[c[2]["entity"]] for c in calls]

    executor = RayExecutor.start(cluster.address, _expectations(reference.spec))
    retries: list[dict[str, Any]] = []
    try:
        doomed_id = doomed.node_id
        assert doomed_id in executor.describe()["used"]
        import anyio

        async def go() -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = [{}] * len(calls)
            first = anyio.Event()

            async def one(i: int) -> None:
                out[i] = await executor.call(*calls[i], on_retry=retries.append)
                first.set()

            async with anyio.create_task_group() as tg:
                for i in range(len(calls)):
                    tg.start_soon(one, i)
                await first.wait()
                await anyio.to_thread.run_sync(_kill_nodes, cluster, [doomed])
            return out

        got = anyio.run(go)
    finally:
        executor.close()
    assert got == expected
    assert retries, "the killed node had calls queued: they must have been re-run"
    assert {r["node_id"] for r in retries} == {doomed_id}
    assert all(r["tool_id"] == "get_parent" and r["error"] for r in retries)


def test_a_worker_node_killed_mid_run_still_gives_the_local_results(
        cluster: Any, reference: Reference, tmp_path: Path) -> None:
    doomed = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    store = tmp_path / "killed.db"
    killed: list[int] = []

    def on_cell(body: dict[str, Any], summary: Any) -> None:
        if summary.committed == 8 and not killed:
            killed.append(summary.committed)
            _kill_nodes(cluster, [doomed])

    summary = run(reference.spec, store, concurrency=3, executor="ray",
                  ray_address=cluster.address, on_cell=on_cell, limit=HALF)
    assert killed and summary.committed == HALF and summary.halted is None
    assert result_digests(store) == _first(reference, HALF)
    with Store.open(store) as s:
        retried = [a for a in s.attempts() if "tool_retry" in a.begin]
    assert len(retried) == summary.tool_retries  # every re-run is in the journal


def _tampered_tree(dest: Path) -> Path:
    """A copy of the project whose compiled seccomp filter and its pin were both edited: a node
    running it has a self-consistent but different sandbox from the lock's."""
    import hashlib
    import platform

    for part in ("runner", "sandbox_profiles", "preflight"):
        shutil.copytree(REPO / part, dest / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    arch = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}[platform.machine()]
    bpf = dest / f"sandbox_profiles/seccomp-{arch}.bpf"
    old = hashlib.sha256(bpf.read_bytes()).hexdigest()
    bpf.write_bytes(bpf.read_bytes()[:-8])  # one BPF instruction fewer
    pins = dest / "sandbox_profiles/PINS"
    pins.write_text(pins.read_text("utf-8").replace(
        old, hashlib.sha256(bpf.read_bytes()).hexdigest()), "utf-8")
    return dest


def test_a_node_whose_pins_differ_is_excluded_and_never_used(
        cluster: Any, reference: Reference, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _tampered_tree(tmp_path / "other-install")
    odd = cluster.add_node(num_cpus=1, env_vars={"PYTHONPATH": str(tree)})
    cluster.wait_for_nodes()
    # Ray puts the driver's working directory on every worker's path: run from elsewhere, as
    # a driver on another machine would.
    monkeypatch.chdir(tmp_path)
    try:
        executor = RayExecutor.start(cluster.address, _expectations(reference.spec))
        try:
            described = executor.describe()
            assert odd.node_id not in described["used"] and len(described["used"]) == 2
            [excluded] = described["excluded"]
            assert excluded["node"]["node_id"] == odd.node_id
            assert "sandbox_pins: differ from the lock's pins: sandbox_profiles/seccomp-" \
                in excluded["reason"]
            assert odd.node_id[:12] in excluded["reason"]
            import anyio

            async def some() -> list[dict[str, Any]]:
                return [await executor.call("w10", "get_parent", {"entity": "s01"})
                        for _ in range(4)]

            assert len(anyio.run(some)) == 4

            # A tool call's own failure comes back as the local executor raises it.
            from runner.errors import SandboxError
            from runner.sandbox import ToolSandbox, select_backend

            local = ToolSandbox(select_backend(), tmp_path, sandbox_limits(LIMITS))
            with pytest.raises(SandboxError) as here:
                local.call("no such world!", "get_parent", {})
            with pytest.raises(SandboxError) as there:
                anyio.run(lambda: executor.call("no such world!", "get_parent", {}))
            assert type(there.value) is type(here.value)
            assert str(there.value) == str(here.value) == "invalid world id 'no such world!'"
            assert all(s.node.node_id != odd.node_id for s in executor.slots)
        finally:
            executor.close()
    finally:
        cluster.remove_node(odd)


def _over_limit_on_node(expectations: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """On a node: its worker's preflight, then one call allocating 96 MiB under the limits the
    worker built from the expectations (what its ``call`` runs under)."""
    from runner.study._ray import NodeWorker

    worker = NodeWorker(expectations)
    report = worker.preflight()
    sandbox = worker._sandbox
    assert report.ok and sandbox is not None, report.to_json()
    code = "b = bytearray(96 << 20); b[::4096] = b'x' * len(b[::4096]); print(len(b))"
    py = str(sandbox.backend.python)
    r = sandbox.backend.run([py, "-I", "-S", "-c", code], stdin=b"", limits=sandbox.limits)
    return report.to_json(), r.exit_status, r.kill_reason, r.stdout


def test_a_ray_node_enforces_the_spec_memory_limit(cluster: Any, small_study: Path) -> None:
    """Issue 37, item 3: a node ran every call at the 512 MiB default whatever the spec said
    (the Ray path sent only wall, CPU and output). With ``[sandbox].memory_bytes`` = 48 MiB,
    every node reports that limit in the run header's executor record and a 96 MiB call on a
    node is killed for memory; under the default it would have passed."""
    from dataclasses import replace

    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    small = replace(LIMITS, memory_bytes=48 << 20)
    expect = _expectations(small_study, limits=small)
    executor = RayExecutor.start(cluster.address, expect)
    try:
        nodes = executor.describe()["nodes"]
        assert nodes and all(n["ok"] for n in nodes)
        for n in nodes:
            assert n["limits"]["memory_bytes"] == 48 << 20
            assert n["limits"]["wall_s"] == LIMITS.wall_s and n["limits"]["cpu_s"] == LIMITS.cpu_s
        if "cgroup" not in nodes[0]["layers"]["layers"]["bounds"]["memory"]:
            pytest.skip("no per-call memory cgroup on this host (non-root): RLIMIT_AS applies")
        node_id = executor.slots[0].node.node_id
        task = ray.remote(num_cpus=0)(_over_limit_on_node).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
        report, status, reason, out = ray.get(task.remote(expect.to_json()), timeout=300)
        assert report["limits"]["memory_bytes"] == 48 << 20
        assert status != 0 and out == b"", (status, reason, out)
        # the same call under the default limit passes: the kill above is the spec's limit
        default = _expectations(small_study)
        _, status, _, out = ray.get(task.remote(default.to_json()), timeout=300)
        assert status == 0 and out.strip() == str(96 << 20).encode()
    finally:
        executor.close()


def test_no_node_passing_preflight_refuses_the_run(cluster: Any, reference: Reference) -> None:
    from dataclasses import replace

    from runner.study import read_lock, study_paths

    spec = load_spec(reference.spec)
    lock = replace(read_lock(study_paths(reference.spec).lock),
                   source_tree="sha256:" + "0" * 64, sandbox_pins={}, task_manifest="x")
    wrong = NodeExpectations.for_run(lock, spec.worlds, None, LIMITS, "mandatory")
    with pytest.raises(NoUsableNode, match=r"no Ray node passed its preflight.*source_tree"):
        RayExecutor.start(cluster.address, wrong)
    assert not ray.is_initialized()


def test_unreachable_cluster_refuses_with_one_line(reference: Reference, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = ect("run", "--study", str(reference.spec), "--store", str(tmp_path / "x.db"),
               "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--limit", "2",
               "--quiet", env=subprocess_env(**RAY_ENV_DEFAULTS), timeout=180)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("ect: cannot reach the Ray cluster at 127.0.0.1:")
    assert "Traceback" not in done.stderr and not (tmp_path / "x.db").exists()


def test_ray_address_without_ray_executor_is_a_usage_error(reference: Reference,
                                                          tmp_path: Path) -> None:
    done = ect("run", "--study", str(reference.spec), "--store", str(tmp_path / "y.db"),
               "--ray-address", "127.0.0.1:1", "--limit", "1", "--quiet")
    assert done.returncode == 2 and "--ray-address needs --executor ray" in done.stderr


def test_canary_credential_reaches_no_ray_process_object_or_session_file(
        cluster: Any, reference: Reference, tmp_path: Path) -> None:
    canary = "sk-ect-canary-" + secrets.token_hex(16)
    store = tmp_path / "runs" / "live.db"
    store.parent.mkdir()
    env = subprocess_env(ECT_CANARY_KEY=canary, **RAY_ENV_DEFAULTS)
    with FakeOpenAI() as server:
        done = ect("run", "--study", str(reference.spec), "--store", str(store),
                   "--provider", "openai", "--base-url", server.url,
                   "--credential-env", "ECT_CANARY_KEY", "--limit", "4", "--json",
                   "--executor", "ray", "--ray-address", cluster.address, env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["committed"] == 4 and summary["executor"] == "ray"
    assert summary["tool_calls"] >= 4  # the tool calls went through the cluster
    # Positive control: the provider (in the parent) did send the key.
    assert server.seen and all(s.headers.get("authorization") == f"Bearer {canary}"
                               for s in server.seen)
    assert canary not in done.stderr and canary not in done.stdout

    # Every process of the cluster (raylets, GCS, workers and the actors that ran the calls):
    # neither its environment nor its argv holds the key.
    needle = canary.encode()
    scanned = 0
    for node in [cluster.head_node, *cluster.worker_nodes]:
        for pid in _node_pids(node):
            for child in [pid, *_descendants(pid)]:
                for what in ("environ", "cmdline"):
                    try:
                        data = Path(f"/proc/{child}/{what}").read_bytes()
                    except OSError:
                        continue
                    scanned += 1
                    assert needle not in data, f"/proc/{child}/{what}"
    assert scanned > 10
    # Ray's session directory (logs, runtime-env resources, sockets' neighbours) and the
    # shared-memory object store files.
    session = Path(cluster.head_node.get_session_dir_path())
    roots = [session, Path("/dev/shm")]
    files = 0
    for root in roots:
        for path in root.rglob("*"):
            try:
                if path.is_file() and not path.is_symlink():
                    files += 1
                    assert needle not in path.read_bytes(), path
            except OSError:
                continue
    assert files > 0
    # The object store itself: each raylet's shared-memory mapping, read through /proc. A
    # positive control first: a marker this test puts in the store is found by the same scan.
    ray.init(address=cluster.address)
    try:
        marker = secrets.token_hex(16).encode()
        held = ray.put(marker * 8192)  # large enough to live in the shared-memory store
        stores = [p for n in [cluster.head_node, *cluster.worker_nodes] for p in _node_pids(n)
                  if _plasma_regions(p)]
        assert stores, "no raylet maps a shared-memory object store"
        assert any(marker in chunk for p in stores for chunk in _plasma_chunks(p))
        for pid in stores:
            assert not any(needle in chunk for chunk in _plasma_chunks(pid)), pid
        del held
        # The job's runtime environment and config as the cluster records them (GCS job table).
        jobs = ray._private.state.jobs()
        assert jobs and canary not in repr(jobs)
        assert all(not j.get("RuntimeEnv") or "ECT_CANARY_KEY" not in repr(j["RuntimeEnv"])
                   for j in jobs)
    finally:
        ray.shutdown()


def _plasma_regions(pid: int) -> list[tuple[int, int]]:
    try:
        maps = Path(f"/proc/{pid}/maps").read_text("ascii", "replace")
    except OSError:
        return []
    out = []
    for line in maps.splitlines():
        if "/dev/shm/plasma" in line:
            lo, hi = line.split()[0].split("-")
            out.append((int(lo, 16), int(hi, 16)))
    return out


def _plasma_chunks(pid: int, size: int = 8 << 20) -> Iterator[bytes]:
    """The bytes of ``pid``'s object-store mappings, in overlapping chunks (as root)."""
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for lo, hi in _plasma_regions(pid):
            at = lo
            while at < hi:
                mem.seek(at)
                try:
                    yield mem.read(min(size + 256, hi - at))
                except OSError:
                    pass
                at += size


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True, check=False).stdout.split()
    kids = [int(p) for p in out]
    return kids + [d for k in kids for d in _descendants(k)]


def _tool_calls(body: dict[str, Any]) -> int:
    """How many tool calls a committed cell made (its decisions that executed a call)."""
    from runner.study import CellRecord

    return sum(d.verdict in ("executed", "tool_failed")
               for d in CellRecord.from_json(body).result.decisions)


def _kill_nodes(cluster: Any, nodes: list[Any]) -> None:
    """Kill ``nodes`` as a machine dies: every process each node had started, workers included;
    return once all of them have exited.

    ``Cluster.remove_node`` SIGKILLs a node's raylet and daemons but not the worker processes
    the raylet started. An orphaned worker notices that its raylet is gone only at its next
    poll (about once a second) and until then still answers actor calls, which go straight
    from the driver to the worker. A test that removed every node and relied on that poll
    raced it: on an idle machine the short remainder of a run could be served by the orphans
    and never halt. So the workers (the run's preflighted actors among them) are SIGKILLed
    too, through pidfds taken before the removal (no pid can be reused in between).
    """
    import select

    fds = []
    for pid in [p for node in nodes for d in _node_pids(node) for p in [d, *_descendants(d)]]:
        with contextlib.suppress(ProcessLookupError):
            fds.append(os.pidfd_open(pid))
    try:
        for node in nodes:
            cluster.remove_node(node, allow_graceful=False)
        for fd in fds:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        # A pidfd turns readable when its process has exited.
        deadline = time.monotonic() + 60
        for fd in fds:
            readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            assert readable, "a process of a killed node did not exit"
    finally:
        for fd in fds:
            os.close(fd)


def test_losing_every_node_halts_at_a_cell_boundary_and_resume_finishes(
        cluster: Any, reference: Reference, tmp_path: Path) -> None:
    """Takes the module's worker nodes away after two commits (and adds two fresh ones at the
    end): the next tool call finds no node, the run halts with ClusterLost and a verified
    prefix, and a resume through the restored cluster finishes with the local results."""
    from runner.study import ClusterLost, Halted
    from tests.study.support import bodies

    at = 2
    # The slice must still need a tool call after the removal, or nothing could notice it.
    assert sum(_tool_calls(b) for b in bodies(reference.store)[at:HALF]) > 0
    store = tmp_path / "lost.db"
    gone: list[int] = []

    def on_cell(body: dict[str, Any], summary: Any) -> None:
        # Runs on the run's event loop: no call is dispatched while the nodes go away.
        if summary.committed == at and not gone:
            _kill_nodes(cluster, list(cluster.worker_nodes))
            gone.append(summary.committed)

    try:
        with pytest.raises(Halted, match="ray cluster unavailable: no live node left") as info:
            run(reference.spec, store, concurrency=2, executor="ray",
                ray_address=cluster.address, on_cell=on_cell, limit=HALF)
        assert isinstance(info.value, ClusterLost)
        halted = info.value.summary
        assert gone and at <= halted.committed < HALF
        assert "ect resume --store" in str(info.value)
        before = result_digests(store)
        assert before == {k: reference.digests[k] for k in before}  # a clean prefix
    finally:
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
    # The cluster is back: resume through it to the end.
    summary = run(reference.spec, store, resume=True, concurrency=2, executor="ray",
                  ray_address=cluster.address, limit=HALF)
    assert summary.committed == HALF
    assert result_digests(store) == _first(reference, HALF)


@pytest.mark.slow
def test_the_whole_study_through_ray_equals_the_local_run(cluster: Any, tmp_path: Path) -> None:
    """576 cells (``schedules/v2.toml`` relocked for this tree), Ray vs local, cell by cell."""
    from tests.study.support import relock

    spec = REPO / "schedules" / "v2.toml"
    text = spec.read_text("utf-8")
    own = tmp_path / "study"
    own.mkdir()
    (own / "v2.toml").write_text(text, "utf-8")
    relock(own / "v2.toml")
    local = run(own / "v2.toml", tmp_path / "local.db", concurrency=2)
    remote = run(own / "v2.toml", tmp_path / "ray.db", concurrency=2, executor="ray",
                 ray_address=cluster.address)
    assert local.committed == remote.committed == STUDY_CELLS
    assert result_digests(tmp_path / "ray.db") == result_digests(tmp_path / "local.db")
