"""The store a run writes to, and its header: created with the run's lock, preflight, executor,
throttle and settings, or reopened to resume; what resume reads back from it
(:class:`RecordedRun`) and the refusals when a store and a run do not match (docs/study.md,
docs/store.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from runner.canonical import JsonObject, JsonValue, canonical_bytes, raw_digest
from runner.errors import ExitCategory, FormatError, StudyError
from runner.study._executor import ToolExecutor
from runner.study._preflight import PreflightReport
from runner.study._records import RunHeader
from runner.study._settings import RunSettings, ThrottleSettings, throttle_settings
from runner.study._spec import StudySpec

if TYPE_CHECKING:
    from runner.store import Store

__all__ = ["ProviderMismatch", "RecordedRun", "ResumeMismatch", "StoreNotEmpty",
           "check_resume_provider", "resume_command"]


log = structlog.get_logger("ect.study")


class StoreNotEmpty(StudyError):
    """``run`` was pointed at a store that already has cells: use ``resume``."""

    exit_category = ExitCategory.REFUSED


class ProviderMismatch(StudyError):
    """``resume`` was asked to continue a store under another provider than it was run with
    (the cells would mix two providers' outputs in one study)."""

    exit_category = ExitCategory.REFUSED


def _open_or_create_store(settings: RunSettings, report: PreflightReport, *, resume: bool,
                          executor: ToolExecutor | None = None,
                          throttle: ThrottleSettings | None = None) -> Store:
    from runner.store import Store, generate_key, load_signing_key

    key_path = settings.store_path.with_name(settings.store_path.name + ".key")
    if settings.store_path.exists():
        store = Store.open(settings.store_path, signing_key=load_signing_key(key_path))
        cells = store.count - 1  # counted under the run lock, not at preflight
        if not resume and cells > 0:
            store.close()
            raise StoreNotEmpty(f"{settings.store_path} already holds {cells} cells; "
                                f"continue it with `{resume_command(settings)}`")
        if throttle is not None and resume:
            # The header is written once; a resumed session's throttle goes to the log.
            log.info("run.throttle", **throttle.to_json())
        if executor is not None and executor.name != "local":
            # The header is written once; a resumed session's node preflight is kept as a blob.
            log.info("executor.nodes", blob=store.put_blob(canonical_bytes(executor.describe())))
        return store
    if resume:
        raise StudyError(f"{settings.store_path} does not exist: nothing to resume")
    key = load_signing_key(key_path) if key_path.exists() else generate_key(key_path)
    # The lock and the preflight report themselves travel in the store as blobs (named in the
    # header by the sha256 of their bytes), so the store alone says what it was run under.
    assert report.lock is not None and report.lock_digest is not None  # a passing preflight's
    lock_bytes = canonical_bytes(report.lock.to_json())
    preflight_bytes = canonical_bytes(report.to_json())
    executor_bytes = canonical_bytes(executor.describe() if executor is not None
                                     else {"name": "local"})
    header = RunHeader(
        study=report.study,
        lock_digest=report.lock_digest,
        lock_blob=raw_digest(lock_bytes),
        preflight_digest=report.digest,
        preflight_blob=raw_digest(preflight_bytes),
        schedule_rows=len(report.rows),
        spec=str(settings.spec_path),
        provider=report.provider.name,
        simulated=report.provider.simulated,
        # every rule that can end a trajectory (the protocol's limits only, in the frozen study)
        stop_rules=report.spec.stop_rules_in_force() if report.spec is not None else None,
        # the isolation layers in force (Landlock ABI, seccomp mode, cgroups, host uid)
        sandbox_layers=report.sandbox,
        # Where tool calls ran and, for a cluster, every node's preflight (identity, kernel,
        # sandbox layers in force, probe results) and every excluded node with its reason.
        executor=executor.name if executor is not None else "local",
        executor_blob=raw_digest(executor_bytes),
        # the pacing of provider attempts (changes no result, so not in the lock)
        throttle=(throttle or ThrottleSettings()).to_json(),
        # what `ect resume --store S` continues with (with the provider and the throttle)
        run_settings=RecordedRun.of(settings, report.spec).settings_json(),
    )
    return Store.create(settings.store_path, header=header.to_json(), signing_key=key,
                        blobs=(lock_bytes, preflight_bytes, executor_bytes))


def check_resume_provider(settings: RunSettings) -> None:
    """A resumed store continues under the provider its header records, or not at all.

    :func:`execute` checks it on ``resume``; a caller that runs the preflight itself may check
    it first (it is cheaper than the preflight and names the real problem).

    Raises:
        ProviderMismatch: the header records another provider than ``settings.provider``.
    """
    if not settings.store_path.exists():
        return  # refused with its own error once the run lock is held
    from runner.store import Store

    with Store.open(settings.store_path, readonly=True) as store:
        try:
            recorded = RunHeader.from_header(store.header).provider
        except FormatError:
            return  # not a run's header: the preflight refuses the store in its own words
    if recorded != settings.provider.name:
        raise ProviderMismatch(f"{settings.store_path} was run with --provider {recorded}; "
                               f"resume it with the same provider")


class ResumeMismatch(ProviderMismatch):
    """``resume`` was given a setting that differs from the one the run header records (the
    field is named; leave the option out and the recorded value is used)."""

    exit_category = ExitCategory.REFUSED


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """What a run was started with, as its header records it: the provider, the model, the
    base URL, the ``--limit``, the concurrency and the throttle (``None``: no limit). ``ect
    resume --store S`` continues with these; only the credential is given again."""

    provider: str
    model: str | None
    base_url: str | None
    limit: int | None
    concurrency: int | None
    requests_per_minute: int | None
    tokens_per_minute: int | None
    complete: bool = True  # False: a header written before it recorded the run's settings

    @classmethod
    def of(cls, settings: RunSettings, spec: StudySpec | None) -> RecordedRun:
        """The settings a run is started with (the model its provider will use)."""
        from runner.providers import PROVIDERS

        choice = settings.provider
        model = choice.model
        if model is None and not choice.simulated and spec is not None:
            model = spec.model.name
        elif model is None and choice.name in PROVIDERS:
            model = PROVIDERS[choice.name].default_model
        throttle = (throttle_settings(settings, spec) if spec is not None
                    else ThrottleSettings(settings.requests_per_minute or None,
                                          settings.tokens_per_minute or None))
        return cls(choice.name, model, choice.base_url, settings.limit, settings.concurrency,
                   throttle.requests_per_minute, throttle.tokens_per_minute)

    def settings_json(self) -> dict[str, JsonValue]:
        """The header's ``run_settings`` (the provider and throttle have fields of their own)."""
        return {"model": self.model, "base_url": self.base_url, "limit": self.limit,
                "concurrency": self.concurrency}

    @classmethod
    def from_header(cls, header: RunHeader) -> RecordedRun:
        def opt_int(obj: JsonObject | None, key: str) -> int | None:
            v = (obj or {}).get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        def opt_str(obj: JsonObject | None, key: str) -> str | None:
            v = (obj or {}).get(key)
            return v if isinstance(v, str) else None

        rs, th = header.run_settings, header.throttle
        return cls(header.provider, opt_str(rs, "model"), opt_str(rs, "base_url"),
                   opt_int(rs, "limit"), opt_int(rs, "concurrency"),
                   opt_int(th, "requests_per_minute"), opt_int(th, "tokens_per_minute"),
                   complete=rs is not None and th is not None)

    @classmethod
    def read(cls, store_path: Path) -> RecordedRun | None:
        """The settings ``store_path``'s header records; None when it is not a run's header."""
        from runner.store import Store

        with Store.open(store_path, readonly=True) as store:
            try:
                return cls.from_header(RunHeader.from_header(store.header))
            except FormatError:
                return None

    def resolve(self, store_path: Path, given: dict[str, object]) -> dict[str, object]:
        """The settings a resume runs with: each option in ``given`` (only those the user typed)
        must equal the record (0 means no limit for the throttle), else it is refused, naming
        the option; every option left out takes the recorded value. ``--limit`` is the one
        exception: it is this session's target, so another value is allowed.

        Raises:
            ResumeMismatch: a given option differs from the record.
        """
        recorded: dict[str, object] = {
            "provider": self.provider, "model": self.model, "base_url": self.base_url,
            "limit": self.limit, "concurrency": self.concurrency,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute}
        if not self.complete:  # an older header: only the provider can be checked
            recorded = {"provider": self.provider}
        out = dict(recorded)
        for name, value in given.items():
            if name not in recorded or name == "limit":
                out[name] = value
                continue
            have = recorded[name]
            same = (value or None) == have if name in ("requests_per_minute",
                                                       "tokens_per_minute") else value == have
            if not same:
                flag = "--" + name.replace("_", "-")
                shown = "none" if have is None else have
                if name == "provider":
                    raise ResumeMismatch(f"{store_path} was run with --provider {shown}; resume "
                                         "it with the same provider (or leave --provider out: "
                                         "the run header records it)")
                raise ResumeMismatch(f"{store_path} was run with {flag} {shown}, not {value}; "
                                     f"leave {flag} out to continue with the recorded value")
        for name in ("requests_per_minute", "tokens_per_minute"):
            if name in recorded and name not in given:
                out[name] = recorded[name] or 0  # recorded None: no limit (not the spec's)
        return out


def resume_command(settings: RunSettings) -> str:
    """The command that continues ``settings``' run as printed: the store and the credential
    (the run header records everything else)."""
    import shlex

    parts = ["ect", "resume", "--store", shlex.quote(str(settings.store_path))]
    choice = settings.provider
    if choice.credential_file is not None:
        parts += ["--credential-file", shlex.quote(choice.credential_file)]
    elif choice.credential_env is not None:
        parts += ["--credential-env", shlex.quote(choice.credential_env)]
    return " ".join(parts)
