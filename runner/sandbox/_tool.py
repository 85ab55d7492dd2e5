"""ToolSandbox: one synthetic tool call per fresh sandboxed worker."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from typing import Any, Protocol

from runner.canonical import canonical_bytes, loads_strict
from runner.errors import FormatError, SandboxError
from runner.sandbox._backend import ChildResult, Limits
from runner.sandbox._errors import SandboxUnavailable, WorkerFailed

__all__ = ["DEFAULT_TOOLS_PATH", "ToolSandbox", "WorkerBackend", "check_worker_result"]

DEFAULT_TOOLS_PATH = Path(__file__).resolve().parents[1] / "worlds" / "tools.py"
_WORLD_ID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")
EXIT_LANDLOCK_REFUSED = 78  # mirrors runner/sandbox/_worker.py
LANDLOCK_MARKER = b"ect-worker: landlock-refused:"


class WorkerBackend(Protocol):
    """What ToolSandbox needs from a backend beyond ``Backend.run``."""

    name: str

    def sandbox_path(self, host: Path, dest: str) -> str: ...

    def run_worker(
        self,
        config: dict[str, Any],
        *,
        stdin: bytes,
        limits: Limits,
        ro_binds: Any = (),
    ) -> ChildResult: ...


def check_worker_result(result: ChildResult, what: str) -> None:
    """Raise the right SandboxError for a worker run that did not succeed."""
    if result.exit_status == EXIT_LANDLOCK_REFUSED and LANDLOCK_MARKER in result.stderr:
        line = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1]
        raise SandboxUnavailable(f"{what}: {line}")
    if result.kill_reason is not None or result.exit_status != 0:
        how = (
            f"killed ({result.kill_reason})"
            if result.kill_reason
            else f"exited with status {result.exit_status}"
        )
        tail = result.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = f": {tail[-1][:300]}" if tail else ""
        raise WorkerFailed(f"{what}: worker {how}{detail}")


class ToolSandbox:
    """Run synthetic tools against a read-only world snapshot, one fresh sandboxed child per call.

    Args:
        backend: a backend from :func:`select_backend`.
        snapshot_dir: where ``runner.worlds.write_snapshot`` put ``<world_id>.json``.
        limits: per-call limits (default :class:`Limits()`).
        tools_path: the stdlib-only tools module (default ``runner/worlds/tools.py``).
    """

    def __init__(
        self,
        backend: WorkerBackend,
        snapshot_dir: Path,
        limits: Limits | None = None,
        *,
        tools_path: Path | None = None,
    ) -> None:
        self.backend = backend
        # Absolute: the sandbox starts in "/", so a relative bind source would not be found.
        self.snapshot_dir = Path(snapshot_dir).resolve()
        self.limits = limits or Limits()
        self.tools_path = (Path(tools_path).resolve() if tools_path is not None
                           else DEFAULT_TOOLS_PATH)
        self._pyc: Path | None = None

    def _bytecode(self, tools_inside: str) -> list[tuple[Path, str]]:
        """A read-only bind of the tools module's bytecode next to its path inside the sandbox.

        Why: the sandbox cannot write ``__pycache__``, so without this every call recompiles the
        tools file from source (~10 ms). The parent compiles it once, hash-checked
        (``CHECKED_HASH``): if the source changes, the import inside recompiles from the source
        it sees, so stale bytecode can never run.
        """
        if not tools_inside.startswith("/ect/"):
            return []  # a backend without a private mount namespace reads the real path
        if self._pyc is None:
            import py_compile
            import tempfile
            import weakref

            tmp = Path(tempfile.mkdtemp(prefix="ect-tools-pyc-"))
            weakref.finalize(self, shutil.rmtree, tmp, True)
            name = Path(importlib.util.cache_from_source(tools_inside)).name
            try:
                py_compile.compile(
                    str(self.tools_path),
                    cfile=str(tmp / name),
                    doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
                )
            except py_compile.PyCompileError:
                return []  # the import inside reports the syntax error itself
            self._pyc = tmp / name
        cache = Path(importlib.util.cache_from_source(tools_inside))
        return [(self._pyc, str(cache))]

    def call(self, world_id: str, tool_id: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run ``tool_id(args)`` on world ``world_id`` in a fresh child; return its JSON response.

        Raises:
            SandboxError: no snapshot for the world, or no tools file.
            WorkerFailed: the worker died, timed out, hit a limit, or returned junk.
            SandboxUnavailable: the worker refused to run without the required Landlock.
        """
        if not isinstance(world_id, str) or not _WORLD_ID.match(world_id):
            raise SandboxError(f"invalid world id {world_id!r}")
        snapshot = self.snapshot_dir / f"{world_id}.json"
        if not snapshot.is_file():
            raise SandboxError(f"no snapshot for world {world_id} in {self.snapshot_dir}")
        if not self.tools_path.is_file():
            raise SandboxError(f"tools file not found: {self.tools_path}")
        tools_inside = self.backend.sandbox_path(self.tools_path, "/ect/tools.py")
        binds = [
            (self.tools_path, "/ect/tools.py"),
            (snapshot, f"/ect/world/{world_id}.json"),
            *self._bytecode(tools_inside),
        ]
        config = {
            "mode": "tool",
            "world_id": world_id,
            "tools": tools_inside,
            "snapshot": self.backend.sandbox_path(snapshot, f"/ect/world/{world_id}.json"),
        }
        stdin = canonical_bytes({"world_id": world_id, "tool_id": tool_id, "args": args})
        result = self.backend.run_worker(config, stdin=stdin, limits=self.limits, ro_binds=binds)
        what = f"tool {tool_id!r} on {world_id}"
        check_worker_result(result, what)
        try:
            response = loads_strict(result.stdout)
        except FormatError as e:
            raise WorkerFailed(f"{what}: worker returned malformed JSON ({e})") from e
        if not isinstance(response, dict):
            raise WorkerFailed(f"{what}: worker returned {type(response).__name__}, not an object")
        return response
