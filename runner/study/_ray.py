"""The Ray executor: a run's sandboxed tool calls on the nodes of a Ray cluster.

What moves and what stays (the run's trust boundary does not change):

* The parent (the ``ect run`` process) keeps the provider and its credential, makes every model
  call, walks the canonical schedule, holds the lock and is the only writer of the store.
* A node gets one :class:`NodeWorker` actor. Its constructor receives only public facts the lock
  already pins (source-tree digest, sandbox pins, task-manifest and world digests, the sandbox
  backend name and limits, the probe selection); each call receives ``(world_id, tool_id, args)``
  and returns the tool's JSON response. Nothing else is placed in Ray's object store and the
  parent sets no runtime environment, so no secret can reach a node.
* Before a node takes work it proves, on the node, that its source tree, sandbox pins (worker
  bytes and seccomp filter) and task manifest equal the lock's, that its sandbox backend starts,
  that every world it rebuilt from its id has the manifest's digest, and that the denial probes
  pass (:meth:`NodeWorker.preflight`). A node that fails is excluded with its reasons; it never
  runs a call, sandboxed or not.
* Each call runs in a fresh sandbox child on the node exactly as the local executor runs it
  (:class:`runner.sandbox.ToolSandbox`, same backend, limits and pins). A call lost with its node
  (node killed, actor died, no answer within the call deadline) is re-run on another node and
  reported through ``on_retry``; tools are deterministic and side-effect free in the synthetic
  worlds, so the re-run returns the same response. When no node is left the call raises
  :class:`~runner.study._executor.ExecutorLost` and the run halts at a cell boundary.

``ray`` is imported only when a :class:`RayExecutor` is started.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import platform
import shutil
import socket
import tempfile
import time
import weakref
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from runner.canonical import (
    FLAT,
    JsonObject,
    JsonRecord,
    digest,
    loads_strict,
)
from runner.errors import EctError, ExitCategory, SandboxError, StudyError
from runner.study._executor import ExecutorLost, RetryHook
from runner.study._lock import StudyLock
from runner.study._preflight import PreflightCheck
from runner.study._spec import SandboxLimits, sandbox_limits

if TYPE_CHECKING:  # imported where used (a node imports the sandbox only when it starts)
    from runner.sandbox import ProbeResult, ToolSandbox

__all__ = [
    "RAY_ENV_DEFAULTS",
    "ClusterUnreachable",
    "ExcludedNode",
    "LostNode",
    "NoUsableNode",
    "NodeExpectations",
    "NodeHost",
    "NodeIdentity",
    "NodeLimits",
    "NodeReport",
    "NodeWorker",
    "RayExecutor",
    "ToolAnswer",
]

log = structlog.get_logger("ect.study.ray")

# Ray's own switches for a quiet, offline cluster: no usage-stats report, no dashboard download.
RAY_ENV_DEFAULTS = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_USAGE_STATS_PROMPT_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
}


class ClusterUnreachable(StudyError):
    """The Ray cluster cannot be reached (or ``ray`` is not installed): nothing was run."""

    exit_category = ExitCategory.REFUSED


class NoUsableNode(StudyError):
    """Every node of the cluster failed its preflight (each reason is in the message)."""

    exit_category = ExitCategory.REFUSED


# The per-call sandbox limits a node enforces: the spec's own ``[sandbox]`` section, turned into
# the sandbox's ``Limits`` on the node by the same function the local executor uses
# (``sandbox_limits``), so every limit of the spec (wall, CPU, output, memory) reaches every node.
NodeLimits = SandboxLimits


@dataclass(frozen=True)
class NodeExpectations(JsonRecord):
    """What every node must prove before it takes work. Public facts only (no credential); its
    JSON is what the parent hands a node's worker (nothing else crosses to a node)."""

    source_tree: str
    sandbox_pins: dict[str, str]
    task_manifest: str
    worlds: dict[str, str]  # world id -> manifest digest of its snapshot
    backend: str | None
    limits: NodeLimits
    probes: str = "all"  # "all" | "mandatory" (the parent's own preflight choice)

    _path = "expectations"

    @classmethod
    def for_run(cls, lock: StudyLock, world_ids: tuple[str, ...], backend: str | None,
                limits: SandboxLimits, probes: str) -> NodeExpectations:
        """The expectations for a run under ``lock`` (already checked against this parent's
        files by preflight): the lock's digests, this parent's digest of each world, and the
        spec's ``[sandbox]`` limits (``spec.sandbox``)."""
        from runner.worlds import build_world

        return cls(source_tree=lock.source_tree, sandbox_pins=dict(lock.sandbox_pins),
                   task_manifest=lock.task_manifest,
                   worlds={w: build_world(w).digest() for w in world_ids},
                   backend=backend, limits=limits, probes=probes)


@dataclass(frozen=True, slots=True)
class NodeHost(JsonRecord):
    """Who a node's worker is: where it runs and what it runs."""

    hostname: str
    kernel: str
    platform: str
    machine: str
    python: str
    project_version: str
    pid: int


@dataclass(frozen=True, slots=True)
class NodeIdentity(JsonRecord):
    """A Ray node as the run records it: its id, its address, and (when its worker started)
    the worker's host (its keys written among the node's)."""

    node_id: str
    host: NodeHost | None = field(default=None, metadata=FLAT)
    address: str | None = None

    @property
    def short(self) -> str:
        return self.node_id[:12]


@dataclass(frozen=True, slots=True)
class NodeReport(JsonRecord):
    """One node's preflight (every check, the sandbox backend's description and the denial
    probes' results); ``ok`` only when every check passed and the backend started."""

    node: NodeIdentity
    checks: tuple[PreflightCheck, ...]
    # the node's sandbox backend as it describes itself (its fields differ between backends)
    layers: JsonObject | None
    probes: tuple[ProbeResult, ...]
    # the per-call limits this node's sandbox enforces (``Limits`` as built on the node from the
    # spec's section it was sent); where each is enforced is in ``layers`` (``bounds``)
    limits: JsonObject | None = field(default=None, kw_only=True)
    ok: bool


@dataclass(frozen=True, slots=True)
class ExcludedNode:
    """A node that failed its preflight (its report), with every failed check in ``reason``."""

    report: NodeReport
    reason: str

    @property
    def node(self) -> NodeIdentity:
        return self.report.node


@dataclass(frozen=True, slots=True)
class LostNode:
    """A node lost during the run (its 12-character id) and the error that lost it."""

    node: str
    error: str


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """A node's answer to one tool call: the tool's response, or the error it raised (its
    module, class name and message), for the parent to raise as the local executor would."""

    response: JsonObject | None  # the tool's JSON response
    module: str = ""
    error: str = ""
    message: str = ""


class NodeWorker:
    """Runs on one Ray node (as an actor): preflight, then one fresh sandbox child per call.

    A plain class: :class:`RayExecutor` wraps it with ``ray.remote`` when it starts, so the node
    imports it from its own installation of the project (whose bytes the preflight checks).
    """

    def __init__(self, expectations: object) -> None:
        self._expect = NodeExpectations.from_json(expectations)
        self._sandbox: ToolSandbox | None = None
        self._snapdir = Path(tempfile.mkdtemp(prefix="ect-node-worlds-"))
        weakref.finalize(self, shutil.rmtree, self._snapdir, True)

    def identity(self) -> NodeIdentity:
        import runner

        node_id = ""
        try:
            import ray

            node_id = ray.get_runtime_context().get_node_id()
        except Exception:  # outside Ray (a unit test): no node id
            node_id = ""
        return NodeIdentity(node_id, host=NodeHost(
            hostname=socket.gethostname(),
            kernel=platform.release(),
            platform=platform.platform(),
            machine=platform.machine(),
            python=platform.python_version(),
            project_version=runner.__version__,
            pid=os.getpid(),
        ))

    def preflight(self) -> NodeReport:
        """Prove this node can run the study's calls as the parent would; return the report.

        Checks (every one is reported; the sandbox and probes run only if the bytes match):
        ``source_tree``, ``sandbox_pins``, ``sandbox`` (backend starts, layers in force),
        ``worlds`` (each snapshot rebuilt from its id has the manifest's digest) and
        ``probe.*`` (the denial probes, as the parent's preflight selected them).
        """
        from runner.sandbox import ToolSandbox, load_probes, run_probes, select_backend
        from runner.sandbox._pins import verify_pins
        from runner.study._lock import source_tree_digest
        from runner.worlds import task_manifest_digest, write_snapshot

        want = self._expect
        limits = sandbox_limits(want.limits)
        checks: list[PreflightCheck] = []
        layers: JsonObject | None = None
        probes: list[ProbeResult] = []
        tree = source_tree_digest()
        checks.append(PreflightCheck(
            "source_tree", tree == want.source_tree,
            "same project source as the lock" if tree == want.source_tree else
            f"source tree {tree} differs from the lock's {want.source_tree} "
            "(install the same project version on every node)"))
        try:
            pins = verify_pins()
            differ = sorted(k for k in set(pins) | set(want.sandbox_pins)
                            if pins.get(k) != want.sandbox_pins.get(k))
            checks.append(PreflightCheck("sandbox_pins", not differ,
                                         "worker bytes and seccomp filters match the lock's pins"
                                         if not differ else "differ from the lock's pins: "
                                         + ", ".join(differ)))
        except EctError as e:
            checks.append(PreflightCheck("sandbox_pins", False, str(e)))
        backend = None
        if all(c.ok for c in checks):
            try:
                backend = select_backend(want.backend)
                describe = getattr(backend, "describe", None)
                layers = describe() if callable(describe) else {"backend": backend.name}
                checks.append(PreflightCheck("sandbox", True, f"backend {backend.name} ready"))
            except EctError as e:
                checks.append(PreflightCheck("sandbox", False, str(e)))
        try:
            manifest = task_manifest_digest()
            bad = []
            for world_id, expected in sorted(want.worlds.items()):
                path = write_snapshot(world_id, self._snapdir)
                got = digest("ect/manifest/v1", loads_strict(path.read_bytes()))
                if got != expected:
                    bad.append(f"{world_id} ({got} != {expected})")
            ok = manifest == want.task_manifest and not bad
            checks.append(PreflightCheck(
                "worlds", ok,
                f"{len(want.worlds)} world snapshots rebuilt from their ids match the manifest"
                if ok else
                (f"task manifest {manifest} differs from the lock's {want.task_manifest}"
                 if manifest != want.task_manifest
                 else "snapshot digests differ: " + ", ".join(bad))))
        except EctError as e:
            checks.append(PreflightCheck("worlds", False, str(e)))
        if backend is not None and all(c.ok for c in checks):
            try:
                only = None
                if want.probes == "mandatory":
                    only = [p.name for p in load_probes()
                            if p.name.startswith(("network.", "write."))]
                results = run_probes(backend, only=only)
                probes = list(results)
                failed = [r.name for r in results if not r.passed]
                checks.append(PreflightCheck("probes", bool(results) and not failed,
                                             f"{len(results)} denial probes passed" if not failed
                                             else "failed: " + ", ".join(failed)))
            except EctError as e:
                checks.append(PreflightCheck("probes", False, str(e)))
        ok = all(c.ok for c in checks) and backend is not None
        if ok:
            assert backend is not None
            self._sandbox = ToolSandbox(backend, self._snapdir, limits)
        return NodeReport(self.identity(), tuple(checks), layers, tuple(probes), ok,
                          limits=dict(dataclasses.asdict(limits)))

    def call(self, world_id: str, tool_id: str, args: JsonObject) -> ToolAnswer:
        """One tool call in a fresh sandbox child. Errors come back as values (type + message)
        so the parent raises exactly what the local executor would have raised."""
        if self._sandbox is None:
            return ToolAnswer(None, "runner.sandbox", "SandboxUnavailable",
                              "this node has not passed its preflight")
        try:
            return ToolAnswer(self._sandbox.call(world_id, tool_id, args))
        except EctError as e:
            return ToolAnswer(None, type(e).__module__, type(e).__name__, str(e))

    def ping(self) -> float:
        return time.time()


def _ray() -> ModuleType:
    """The ``ray`` module, imported on first use (its attributes read loosely: its stubs are
    partial)."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ClusterUnreachable("the ray executor needs Ray: "
                                 "pip install '.[ray]' in the ect-runner checkout") from None


def _check_reachable(target: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a ``HOST:PORT`` nobody listens on. Why by hand: ``ray.init`` keeps retrying
    an absent GCS for minutes before it gives up, and a refused run should say so at once."""
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or "://" in target:
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ClusterUnreachable(f"cannot reach the Ray cluster at {target}: "
                                 f"{e.strerror or type(e).__name__} (start one with "
                                 "`ray start --head`, or pass --ray-address HOST:PORT)") from None


def _raise_remote(out: ToolAnswer) -> JsonObject:
    if out.response is not None:
        return out.response
    cls: type[EctError] = SandboxError
    if out.module == "runner" or out.module.startswith("runner."):
        found = getattr(importlib.import_module(out.module), out.error, None)
        if isinstance(found, type) and issubclass(found, EctError):
            cls = found
    raise cls(out.message)


@dataclass
class _Slot:
    actor: Any  # a Ray actor handle (Ray's types are partial)
    node: NodeIdentity
    capacity: int
    inflight: int = 0
    alive: bool = True
    calls: int = 0


@dataclass
class RayExecutor:
    """Tool calls on a Ray cluster. Start it with :meth:`start`; close it when the run ends."""

    address: str
    slots: list[_Slot]
    excluded: list[ExcludedNode]
    reports: list[NodeReport]
    call_deadline_s: float
    owns_connection: bool
    lost: list[LostNode] = field(default_factory=list)
    name: str = "ray"

    @classmethod
    def start(cls, address: str | None, expectations: NodeExpectations, *,
              actors_per_node: int = 1, preflight_timeout_s: float = 600.0,
              node_ids: Collection[str] | None = None) -> RayExecutor:
        """Connect to the cluster at ``address`` and put a preflighted worker on every node
        (or on the live nodes among ``node_ids``).

        Raises:
            ClusterUnreachable: ``ray`` is missing or the cluster cannot be reached.
            NoUsableNode: no node passed its preflight.
        """
        for key, value in RAY_ENV_DEFAULTS.items():
            os.environ.setdefault(key, value)
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        target = address or os.environ.get("RAY_ADDRESS") or "auto"
        owns = not ray.is_initialized()
        if owns:
            _check_reachable(target)
            import logging

            try:
                ray.init(address=target, namespace="ect", log_to_driver=False,
                         logging_level=logging.WARNING, runtime_env=None)
            except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ClusterUnreachable(f"cannot reach the Ray cluster at {target}: {first} "
                                         "(start one with `ray start --head`, or pass "
                                         "--ray-address HOST:PORT)") from None
        try:
            nodes = [n for n in ray.nodes()
                     if n.get("Alive") and float(n.get("Resources", {}).get("CPU", 0)) >= 1
                     and (node_ids is None or n["NodeID"] in node_ids)]
            if not nodes:
                raise NoUsableNode(f"the Ray cluster at {target} has no live node with a CPU")
            worker_cls = ray.remote(NodeWorker)
            created = []
            for n in sorted(nodes, key=lambda n: str(n["NodeID"])):
                capacity = max(1, int(float(n["Resources"]["CPU"])))
                for _ in range(actors_per_node):
                    actor = worker_cls.options(
                        num_cpus=0, max_concurrency=capacity + 1, max_restarts=0,
                        scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"],
                                                                           soft=False),
                    ).remote(expectations.to_json())
                    created.append((actor, n, capacity))
            refs = [actor.preflight.remote() for actor, _, _ in created]
            slots: list[_Slot] = []
            excluded: list[ExcludedNode] = []
            reports: list[NodeReport] = []
            for (actor, n, capacity), ref in zip(created, refs, strict=True):
                where = f"node {str(n['NodeID'])[:12]} ({n.get('NodeManagerAddress', '?')})"
                address = n.get("NodeManagerAddress")
                try:
                    report = ray.get(ref, timeout=preflight_timeout_s)
                    if not isinstance(report, NodeReport):
                        raise TypeError(f"its preflight answered a {type(report).__name__}")
                except Exception as e:  # any failure excludes the node
                    first = (str(e).strip().splitlines() or [type(e).__name__])[-1][:300]
                    report = NodeReport(NodeIdentity(str(n["NodeID"])),
                                        (PreflightCheck("worker", False,
                                                        f"the ECT worker did not start: {first}"),),
                                        None, (), False)
                report = replace(report, node=replace(report.node, address=address))
                reports.append(report)
                if report.ok:
                    slots.append(_Slot(actor, report.node, capacity))
                    continue
                reasons = "; ".join(f"{c.name}: {c.detail}" for c in report.checks if not c.ok)
                message = f"{where} excluded: {reasons}"
                excluded.append(ExcludedNode(report, message))
                log.warning("ray.node_excluded", node=str(n["NodeID"]), reason=message)
                ray.kill(actor)
            if not slots:
                raise NoUsableNode("no Ray node passed its preflight; "
                                   + " | ".join(e.reason for e in excluded))
        except BaseException:
            if owns:
                ray.shutdown()
            raise
        deadline = expectations.limits.wall_s * 4 + 60.0
        return cls(address=target, slots=slots, excluded=excluded, reports=reports,
                   call_deadline_s=deadline, owns_connection=owns)

    @property
    def alive(self) -> bool:
        """Whether any node is left to take calls."""
        return any(s.alive for s in self.slots)

    def _pick(self) -> _Slot:
        live = [s for s in self.slots if s.alive]
        if not live:
            reasons = "; ".join(f"{x.node}: {x.error}" for x in self.lost[-3:])
            raise ExecutorLost(f"ray cluster unavailable: no live node left ({reasons})")
        return min(live, key=lambda s: (s.inflight / s.capacity, s.calls))

    async def call(self, world_id: str, tool_id: str, args: JsonObject, *,
                   on_retry: RetryHook | None = None) -> JsonObject:
        ray = _ray()

        attempt = 0
        while True:
            attempt += 1
            slot = self._pick()
            slot.inflight += 1
            slot.calls += 1
            try:
                with anyio.fail_after(self.call_deadline_s):
                    out = await slot.actor.call.remote(world_id, tool_id, args)
            except (ray.exceptions.RayActorError, ray.exceptions.RayError, TimeoutError) as e:
                if isinstance(e, ray.exceptions.RayTaskError):
                    raise  # a bug in the worker itself, not a lost node
                self._lose(slot, e)
                if on_retry is not None:
                    on_retry({"tool_id": tool_id, "world_id": world_id, "attempt": attempt,
                              "node_id": slot.node.node_id,
                              "error": self.lost[-1].error})
                continue
            finally:
                slot.inflight -= 1
            return _raise_remote(out)

    def _lose(self, slot: _Slot, error: BaseException) -> None:
        if slot.alive:
            slot.alive = False
            first = (str(error).strip().splitlines() or [""])[0][:200]
            what = type(error).__name__ + (f": {first}" if first else "")
            self.lost.append(LostNode(slot.node.short, what))
            log.warning("ray.node_lost", node=slot.node.node_id, error=what)
        elif not self.lost:
            self.lost.append(LostNode(slot.node.short, type(error).__name__))

    def describe(self) -> JsonObject:
        """The run header's ``executor``: every node's preflight (identity, kernel, sandbox
        layers in force, probe results) and the excluded nodes with their reasons."""
        return {"name": self.name, "nodes": [r.to_json() for r in self.reports],
                "used": sorted(s.node.node_id for s in self.slots),
                "excluded": [{"node": e.report.to_json()["node"], "reason": e.reason}
                             for e in self.excluded]}

    def close(self) -> None:
        ray = _ray()

        if not ray.is_initialized():
            return
        for slot in self.slots:
            try:
                ray.kill(slot.actor)
            except Exception:  # the node may already be gone
                pass
        if self.owns_connection:
            ray.shutdown()


