"""Path-bound preflight (docs/study.md): every check must pass before any provider use.

Checks, in order (cheap first; the sandbox probes are judged only when everything before them
passed):

1. ``lock``: the lock pins exactly the spec, schedule, task manifest, prompts, generation
   config, sandbox pins and source tree found at the given paths; the schedule is what the
   spec builds.
2. ``store``: the store is absent, or a verified contiguous prefix of this lock's schedule.
3. ``credential``: given explicitly for a live provider (a file or a named variable); none for
   the simulated provider.
4. ``generation``: the frozen generation config in the lock is the one the run will use.
5. ``sandbox``: the platform backend exists and can enforce its policy (user namespaces
   allowed, every promised guarantee has a layer on this kernel, pins verified); the layers in
   force are recorded in the report's ``sandbox`` field (and from there in the run header).
6. ``probe.*``: every probe in ``preflight/``, the two mandatory denial probes (network and
   persistent write) among them.

The sandbox's self-check and probes use neither the store nor a provider nor the credential, so
they *start* alongside the lock check (:class:`_SandboxChecks`, in a thread: the probes are CPU
work in other processes, the lock check CPU work in this one) and are judged in the order above:
the ``sandbox`` check after ``generation``, the probes only when every check before them passed;
a check that fails stops them (no probe result is reported then). Every sandbox starts with an
environment built from nothing, so a credential variable not yet removed from this process's
environment never reaches one.

The JSON report is hashed into the store's header (``preflight_digest``).
"""

from __future__ import annotations

import os
import queue
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from runner.canonical import (
    OMIT,
    Count,
    Digest,
    JsonObject,
    JsonRecord,
    NonEmptyStr,
    RecordFormatError,
    digest,
    key,
    read_bool,
    read_str,
)
from runner.canonical import spec as field_spec
from runner.errors import EctError, ExitCategory, FormatError, StudyError
from runner.study._lock import StudyLock, check_lock, generation_config
from runner.study._records import CellRecord, RunHeader, ScheduleRow
from runner.study._spec import StudySpec

if TYPE_CHECKING:  # imported where used (keeps `ect --help` light)
    from runner.providers import Credential
    from runner.sandbox import ProbeResult

__all__ = [
    "MANDATORY_PROBE_PREFIXES",
    "PREFLIGHT_FORMAT",
    "PreflightCheck",
    "PreflightFailed",
    "PreflightReport",
    "ProviderChoice",
    "run_preflight",
]

PREFLIGHT_FORMAT = "ect.preflight/1"
MANDATORY_PROBE_PREFIXES = ("network.", "write.")


class PreflightFailed(StudyError):
    """A preflight check failed; the message names the first failing check and where."""

    exit_category = ExitCategory.REFUSED

    def __init__(self, report: PreflightReport) -> None:
        self.report = report
        first = next(c for c in report.checks if not c.ok)
        super().__init__(f"preflight failed: {first.name}: {first.detail}")


_SKIP = field_spec(skip=True)  # working state, never serialised


def _probes(value: object, path: str) -> str:
    probes = read_str(value, path)
    if probes not in ("all", "mandatory"):
        raise RecordFormatError(path, "expected 'all' or 'mandatory'")
    return probes


@dataclass(frozen=True)
class PreflightCheck(JsonRecord):
    name: NonEmptyStr
    ok: bool
    detail: str


@dataclass(frozen=True)
class ProviderChoice(JsonRecord):
    """Which provider a run uses; the credential is named (a path or a variable name, never
    its value), never held here."""

    name: NonEmptyStr = "simulated"
    model: str | None = None
    base_url: str | None = None
    credential_file: str | None = None
    credential_env: str | None = None

    @property
    def simulated(self) -> bool:
        """Whether the provider table marks this provider simulated (an unknown name is not)."""
        from runner.providers import is_simulated

        return is_simulated(self.name)

@dataclass
class PreflightReport(JsonRecord):
    """What preflight found. :meth:`to_json` is the report document (stored as the run's
    ``preflight_blob``; its digest is the header's ``preflight_digest``); :meth:`from_json` reads
    that document back strictly. ``spec``, ``rows``, ``lock`` and ``credential`` are the run's
    working state and never serialised."""

    _path = "preflight"
    _format = PREFLIGHT_FORMAT
    _derived = ("passed",)

    study: str
    spec_path: str = field(metadata=key("spec"))
    store_path: str = field(metadata=key("store"))
    provider: ProviderChoice
    lock_digest: Digest | None = None
    committed_rows: Count = 0
    probes: Annotated[str, _probes] = "all"
    checks: list[PreflightCheck] = field(default_factory=list)
    spec: StudySpec | None = field(default=None, metadata=_SKIP)
    rows: list[ScheduleRow] = field(default_factory=list, metadata=_SKIP)
    # the checked lock (set once the lock check passed)
    lock: StudyLock | None = field(default=None, metadata=_SKIP)
    # The sandbox layers in force (backend.describe()["layers"]): what isolation produced the
    # run, as the platform's backend describes it (its fields differ between backends). None
    # only for a report read back from a store older than the field (to_json then omits it).
    sandbox: JsonObject | None = field(default_factory=dict, metadata=OMIT)
    # The loaded credential (a redacting runner.providers.Credential), for the run; never
    # serialised: to_json names only where it came from.
    credential: Credential | None = field(default=None, repr=False, metadata=_SKIP)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def digest(self) -> str:
        return digest("ect/record/v1", self.to_json())

    def _check(self, obj: JsonObject, path: str) -> None:
        """A report read back: its ``passed`` must be what its checks say."""
        if read_bool(obj["passed"], f"{path}.passed") != self.passed:
            raise RecordFormatError(f"{path}.passed", "differs from what the checks say")


def _layers_line(layers: JsonObject) -> str:
    if "landlock_abi" not in layers:
        return ""
    return (f" (Landlock ABI {layers['landlock_abi']}, seccomp {layers['seccomp'].get('mode')} "
            f"allow-list, cgroups {layers['cgroups'] or 'none'}, host uid {layers['host_uid']})")


def write_probe(directory: Path) -> tuple[str, OSError] | None:
    """Create and remove a probe file in ``directory``: None when both work, else the step that
    failed (``"create"`` or ``"remove"``) and its error. How a run finds, before it starts, that
    it could not write its store, its checkpoint and its lock there (a read-only filesystem, a
    missing or foreign directory)."""
    probe = directory / f".ect-preflight-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as e:
        return "create", e
    os.close(fd)
    try:
        probe.unlink()
    except OSError as e:
        return "remove", e
    return None


def _unwritable(directory: Path) -> str | None:
    """Why a run could not write in ``directory`` (see :func:`write_probe`); None when it can."""
    failed = write_probe(directory)
    if failed is None:
        return None
    step, e = failed
    where = "in" if step == "create" else "from"
    return f"cannot {step} a file {where} {directory}: {e.strerror}"


def _store_prefix(store_path: Path, lock_d: str, rows: list[ScheduleRow]) -> tuple[bool, str, int]:
    problem = _unwritable(store_path.parent)
    if problem is not None:
        return False, f"{store_path}: the store's directory is not writable ({problem})", 0
    if not store_path.exists():
        return True, f"{store_path} is absent: a new store will be created", 0
    # imported only for a store to read (its SQLite layer costs a tenth of a second to import,
    # which `ect preflight` of a new store does not pay)
    from runner.store import Store, verify_store

    report = verify_store(store_path, full=True)
    if not report.ok:
        return False, (f"{store_path} does not verify: {report.label}: {report.detail}"), 0
    with Store.open(store_path, readonly=True) as store:
        try:
            made_under = RunHeader.from_header(store.header).lock_digest
        except FormatError as e:
            return False, f"{store_path} is not a run store: {e}", 0
        if made_under != lock_d:
            return False, f"{store_path} was made under lock {made_under}, not {lock_d}", 0
        n = 0
        for rec in store.records(1):
            if n >= len(rows):
                return False, f"{store_path} holds more records than the schedule has rows", n
            want = rows[n]
            try:
                problem = CellRecord.from_json(rec.body, f"record {rec.seq}").mismatch(want)
            except FormatError as e:
                problem = str(e)
            if problem is not None:
                return False, (f"{store_path} record {rec.seq} is not schedule row {want.row} "
                               f"({want.cell_id}): {problem}"), n
            n += 1
    return True, f"{store_path} is a verified prefix of {n}/{len(rows)} rows", n


def _credential(choice: ProviderChoice) -> tuple[bool, str, Credential | None]:
    """(ok, detail, the loaded Credential or None). The credential is loaded here once and
    handed to the run through the report: loading from a variable removes it from the
    environment (so no child inherits it), so it cannot be loaded a second time."""
    from runner.providers import CredentialUse, ProviderConfigError, check_provider_settings

    given = bool(choice.credential_file or choice.credential_env)
    try:
        entry = check_provider_settings(choice.name, model=choice.model,
                                        base_url=choice.base_url, credential_given=given)
    except ProviderConfigError as e:
        return False, str(e), None
    if entry.credential is CredentialUse.REFUSED:
        return True, f"{entry.label}: no credential needed", None
    from runner.providers import load_credential

    if not given:  # the check above refused a missing credential the provider needs
        return True, f"{entry.label} without a credential", None
    try:
        credential = load_credential(file=choice.credential_file, env=choice.credential_env)
    except EctError as e:
        return False, str(e), None
    source = (f"file {choice.credential_file}" if choice.credential_file
              else f"variable {choice.credential_env}")
    return True, f"credential given explicitly ({source})", credential


class _SandboxChecks:
    """The sandbox backend (its self-check) and then the probes named ``names``, run in a thread
    from construction on; :meth:`backend` and :meth:`probes` hand their outcomes to the caller in
    order, :meth:`stop` ends the run early (probes not yet started never start; it returns once
    the running ones have ended)."""

    def __init__(self, sandbox_backend: str | None, names: list[str] | None) -> None:
        self._name = sandbox_backend
        self._names = names
        self._out: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ect-preflight-sandbox",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _run(self) -> None:
        try:
            from runner.sandbox import iter_probes, select_backend

            try:
                backend = select_backend(self._name)
                described = backend.describe()
            except EctError as e:
                self._out.put(("sandbox-error", e))
                return
            self._out.put(("sandbox", (backend, described)))
            if self._names is None or self._stopped.is_set():
                return
            results = iter_probes(backend, only=self._names)
            try:  # (a generator: closing it cancels the probes not yet started)
                for r in results:
                    if self._stopped.is_set():
                        return
                    self._out.put(("probe", r))
            except EctError as e:
                self._out.put(("probes-error", e))
                return
            finally:
                results.close()  # type: ignore[attr-defined]
            self._out.put(("done", None))
        except BaseException as e:  # a bug, not a check's verdict: raised in the caller
            self._out.put(("raise", e))

    def _next(self) -> tuple[str, Any]:
        kind, value = self._out.get()
        if kind == "raise":
            raise value
        return kind, value

    def backend(self) -> tuple[Any, dict[str, Any]]:
        """The ready backend and its ``describe()``; raises the EctError that refused it."""
        kind, value = self._next()
        if kind == "sandbox-error":
            raise value
        backend, described = value
        return backend, described

    def probes(self) -> Iterator[ProbeResult]:
        """Each probe's result, in the probe file's order; raises the EctError that stopped them."""
        while True:
            kind, value = self._next()
            if kind == "done":
                return
            if kind == "probes-error":
                raise value
            yield value

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


def run_preflight(
    spec_path: str | Path,
    store_path: str | Path,
    provider: ProviderChoice | None = None,
    *,
    sandbox_backend: str | None = None,
    on_check: Callable[[PreflightCheck], None] | None = None,
    probes: str = "all",
) -> PreflightReport:
    """Run every check and return the report (never raises for a failed check).

    ``probes="mandatory"`` runs only the network and persistent-write denial probes (the two
    the protocol requires) instead of every probe; the choice is recorded in the report, and
    therefore in the store header. It exists for test suites; ``ect`` always runs them all.
    """
    if probes not in ("all", "mandatory"):
        raise ValueError("probes must be 'all' or 'mandatory'")
    choice = provider or ProviderChoice()
    report = PreflightReport(study="?", spec_path=str(spec_path), store_path=str(store_path),
                             provider=choice, probes=probes)

    def add(name: str, ok: bool, detail: str) -> bool:
        check = PreflightCheck(name, ok, detail)
        report.checks.append(check)
        if on_check is not None:
            on_check(check)
        return ok

    names: list[str] | None = None
    listing: EctError | None = None
    try:
        from runner.sandbox import load_probes

        names = [p.name for p in load_probes()
                 if probes == "all" or p.name.startswith(MANDATORY_PROBE_PREFIXES)]
    except EctError as e:
        listing = e
    sandbox = _SandboxChecks(sandbox_backend, names)  # starts now, judged below
    try:
        return _judge(report, add, sandbox, names, listing, spec_path, store_path, choice)
    finally:
        sandbox.stop()


def _judge(report: PreflightReport, add: Callable[[str, bool, str], bool],
           sandbox: _SandboxChecks, names: list[str] | None, listing: EctError | None,
           spec_path: str | Path, store_path: str | Path, choice: ProviderChoice) -> PreflightReport:
    """The checks of :func:`run_preflight` in order, the sandbox's from ``sandbox``."""
    try:
        spec, paths, lock, rows = check_lock(spec_path)
    except EctError as e:
        add("lock", False, str(e))
        return report
    report.spec, report.rows, report.lock = spec, rows, lock
    report.study = spec.name
    report.lock_digest = lock.digest
    ok = add("lock", True, f"{paths.lock} pins {paths.spec.name}, {paths.schedule.name} "
                           f"({len(rows)} rows) and the source tree")
    try:
        good, detail, n = _store_prefix(Path(store_path), report.lock_digest, rows)
    except EctError as e:
        good, detail, n = False, f"{store_path}: {e}", 0
    report.committed_rows = n
    ok = add("store", good, detail) and ok
    cred_ok, cred_detail, report.credential = _credential(choice)
    ok = add("credential", cred_ok, cred_detail) and ok
    frozen = lock.generation == generation_config(spec)
    model_ok = choice.model is None or choice.simulated or choice.model == spec.model.name
    ok = add("generation", frozen and model_ok,
             "generation config matches the lock" if frozen and model_ok else
             (f"model {choice.model!r} differs from the frozen {spec.model.name!r}"
              if frozen else "the lock's generation config differs from the spec")) and ok
    try:
        backend, described = sandbox.backend()
        name = backend.name
        report.sandbox = described.get("layers") or {"backend": name}
        ok = add("sandbox", True, f"backend {name} ready{_layers_line(report.sandbox)}") and ok
    except EctError as e:
        add("sandbox", False, str(e))
        return report
    if not ok:
        add("probes", False, "not judged: an earlier check failed")
        return report
    # The probes run several at a time (most of preflight's time is sandboxes starting and
    # limits being reached), each reported, in the probe file's order, as soon as it is done.
    if listing is not None or names is None:
        add("probes", False, str(listing))
        return report
    for prefix in MANDATORY_PROBE_PREFIXES:
        if not any(name.startswith(prefix) for name in names):
            add(f"probe.{prefix}*", False, f"mandatory denial probe family {prefix}* is missing")
    try:
        for r in sandbox.probes():
            add(f"probe.{r.name}", r.passed, f"expected {r.expected}, observed {r.observed}"
                + (f" ({r.detail})" if r.detail and not r.passed else ""))
    except EctError as e:
        add("probes", False, str(e))
        return report
    return report
