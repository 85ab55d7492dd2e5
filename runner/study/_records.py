"""The study's records as typed, frozen values: schedule rows, cell results, audit groups and
cell records (docs/store.md, docs/study.md).

Every writer (``run``) and every reader (``resume``, ``replay``, ``export``, the analysis) goes
through these types, so a record's shape is defined once. ``from_json`` is strict: every field
present, nothing extra, each of its JSON type, errors (:class:`runner.canonical.RecordFormatError`)
naming the path, e.g. ``record.result.outcome.turns: expected an integer, got boolean``.
``to_json`` gives back exactly the object that was read, so digests computed over it are the
recorded ones.

The field names and the digest domains (``ect/schedule-row/v1``, ``ect/record/v1``) are part of
the record format: renaming a field is a format change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, ClassVar

from runner.canonical import (
    OMIT,
    Count,
    Digest,
    JsonObject,
    JsonRecord,
    JsonValue,
    NonEmptyStr,
    RecordFormatError,
    at_least,
    digest,
    key,
)
from runner.control import StopReason
from runner.ect import Receipt, WireFormatError
from runner.loop import DecisionRecord, Outcome, read_stop_reason
from runner.providers import FAILURE_KINDS, AttemptRecord, ProviderFailure, failure_class

__all__ = [
    "AuditCall",
    "AuditFailure",
    "AuditGroup",
    "CellRecord",
    "CellResult",
    "RawExchangeRef",
    "RunHeader",
    "ScheduleRow",
]

def _receipt(value: object, path: str) -> Receipt:
    """A receipt as the ledger writes it (the ECT wire reader's errors name the path too)."""
    try:
        return Receipt.from_json(value, path)
    except WireFormatError as e:
        raise RecordFormatError(e.path, e.problem) from None


def _number(value: object, path: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordFormatError(path, "expected a number")
    return value


@dataclass(frozen=True, slots=True)
class ScheduleRow(JsonRecord):
    """One row of the canonical schedule: which cell to run, with which derived seed."""

    DIGEST_DOMAIN: ClassVar[str] = "ect/schedule-row/v1"
    _path = "schedule_row"

    row: Annotated[int, at_least(1)]
    cell_id: NonEmptyStr
    task_id: NonEmptyStr
    world_id: NonEmptyStr
    family: NonEmptyStr
    checkpoint_id: NonEmptyStr
    checkpoint: NonEmptyStr
    fault: str | None
    seed_index: Count
    seed: Count
    policy: NonEmptyStr

    def digest(self) -> str:
        return digest("ect/schedule-row/v1", self.to_json())


@dataclass(frozen=True, slots=True)
class CellResult(JsonRecord):
    """What one cell did: its outcome, stop, decisions and evidence; ``latency_s`` (the only
    wall-clock field besides the outcome's) is left out of the result digest.

    The stop reason is held once, in the outcome (:attr:`stop_reason` reads it); the record
    writes it twice, as ``stop.reason`` and ``outcome.stop_reason`` (the record format), and
    :meth:`from_json` refuses a record where the two differ."""

    _path = "result"
    _derived = ("stop.reason",)

    outcome: Outcome
    stop_detail: str = field(metadata=key("stop.detail"))
    decisions: tuple[DecisionRecord, ...]
    final_certificate: JsonObject | None
    ledger_digest: Digest
    new_receipts: tuple[Annotated[Receipt, _receipt], ...]
    notes: JsonObject
    input_tokens: Count = field(metadata=key("tokens.input"))
    output_tokens: Count = field(metadata=key("tokens.output"))
    simulated: bool
    latency_s: Annotated[int | float, _number] = field(metadata=key("timing.latency_s"))

    @property
    def stop_reason(self) -> StopReason:
        """Why the cell's run stopped (the outcome's ``stop_reason``)."""
        return self.outcome.stop_reason

    def deterministic_json(self) -> dict[str, JsonValue]:
        """The result without wall-clock fields (what :meth:`digest` covers)."""
        out = self.to_json()
        out["outcome"] = self.outcome.without_timing()
        del out["timing"]
        return out

    def _check(self, obj: JsonObject, path: str) -> None:
        if self.latency_s != self.outcome.latency_s:
            raise RecordFormatError(f"{path}.timing.latency_s",
                                    "differs from the outcome's latency_s")
        if read_stop_reason(obj["stop"]["reason"], f"{path}.stop.reason") is not self.stop_reason:
            raise RecordFormatError(f"{path}.stop.reason",
                                    f"differs from {path}.outcome.stop_reason")

    def digest(self) -> str:
        """The cell's result digest (``ect/record/v1`` over :meth:`deterministic_json`)."""
        return digest("ect/record/v1", self.deterministic_json())


@dataclass(frozen=True, slots=True)
class RawExchangeRef(JsonRecord):
    """One attempt's raw request and response bytes, by blob digest."""

    request: Digest
    response: Digest | None


@dataclass(frozen=True, slots=True)
class AuditFailure(JsonRecord):
    """Why an audited call failed: the provider's failure (as ``ProviderFailure.to_json`` wrote
    it), its class and the role of the call (``class`` and ``role`` are absent, ``None``, in a
    store written before the audit recorded them; :meth:`to_json` then leaves them out too)."""

    _path = "failure"

    kind: NonEmptyStr
    detail: str
    status: int | None
    retry_after_s: int | float | None
    error_class: str | None
    failure_class: NonEmptyStr | None = field(default=None, metadata={**OMIT, **key("class")})
    role: NonEmptyStr | None = field(default=None, metadata=OMIT)

    @classmethod
    def of(cls, failure: ProviderFailure, role: str) -> AuditFailure:
        """The audit's record of ``failure`` in a call made by ``role``."""
        return cls(failure.kind, failure.detail, failure.status, failure.retry_after_s,
                   failure.error_class, failure_class(failure.kind), role)

    def provider_failure(self) -> ProviderFailure:
        """The provider's failure again (``ValueError``: a kind this runner does not know)."""
        return ProviderFailure(self.kind, self.detail, self.status, self.retry_after_s,
                               self.error_class)

    @property
    def known_kind(self) -> str:
        """The kind, or ``"sdk_error"`` for one this runner does not know."""
        return self.kind if self.kind in FAILURE_KINDS else "sdk_error"

@dataclass(frozen=True, slots=True)
class AuditCall(JsonRecord):
    """One audited model call: the digest of its canonical request, every attempt, the raw
    exchanges and, when it succeeded, the adapter's parsed response (a blob digest). Each
    attempt is the provider's :class:`~runner.providers.AttemptRecord`, written and read by its
    own ``to_json``/``from_json``."""

    request: Digest
    parsed: Digest | None
    ok: bool
    failure: AuditFailure | None
    attempts: tuple[AttemptRecord, ...]
    raw: tuple[RawExchangeRef, ...]

    def _check(self, obj: JsonObject, path: str) -> None:
        if self.ok != (self.parsed is not None) or self.ok == (self.failure is not None):
            raise RecordFormatError(path, "ok must come with parsed and without failure")


@dataclass(frozen=True, slots=True)
class AuditGroup(JsonRecord):
    """The audit of one cell: the provider and model of its first attempt, and every call."""

    _path = "audit"

    provider: str | None
    model: str | None
    calls: tuple[AuditCall, ...]

    def digest(self) -> str:
        return digest("ect/record/v1", self.to_json())

    def attempt_providers(self) -> set[tuple[str, str, bool]]:
        """The (provider, model, simulated) of every attempt."""
        return {(a.provider, a.model, a.simulated) for call in self.calls for a in call.attempts}

@dataclass(frozen=True, slots=True)
class CellRecord(JsonRecord):
    """The body of one committed cell in the run store.

    :meth:`from_json` also checks the record against itself: the row and cell id agree with the
    schedule row and the outcome, and every digest matches what it covers.
    """

    VERSION: ClassVar[str] = "ect/record/v1"

    _path = "record"
    _derived = ("row", "cell_id", "schedule_row_digest", "result_digest", "audit_digest")

    schedule_row: ScheduleRow
    result: CellResult
    audit: AuditGroup
    artifacts: dict[str, Digest]
    code_version: str

    @property
    def row(self) -> int:
        return self.schedule_row.row

    @property
    def cell_id(self) -> str:
        return self.schedule_row.cell_id

    @property
    def result_digest(self) -> str:
        return self.result.digest()

    @property
    def audit_digest(self) -> str:
        return self.audit.digest()

    @property
    def schedule_row_digest(self) -> str:
        return self.schedule_row.digest()

    def mismatch(self, want: ScheduleRow) -> str | None:
        """Why this record is not the cell of schedule row ``want`` (``None`` when it is).

        The one record-vs-schedule matcher: preflight, export and the analysis all ask here.
        """
        if self.schedule_row == want:
            return None
        if self.row != want.row:
            return f"it holds row {self.row} ({self.cell_id}), not row {want.row} ({want.cell_id})"
        return f"row {want.row} ran a different schedule row ({self.cell_id})"

    def _check(self, obj: JsonObject, path: str) -> None:
        srow, result = self.schedule_row, self.result
        _same(obj["row"], srow.row, f"{path}.row", "the schedule row's")
        _same(obj["cell_id"], srow.cell_id, f"{path}.cell_id", "the schedule row's")
        _same(result.outcome.row, srow.row, f"{path}.result.outcome.row", "the record's")
        _same(result.outcome.cell_id, srow.cell_id, f"{path}.result.outcome.cell_id",
              "the record's")
        for name, what in (("schedule_row_digest", "schedule_row"), ("result_digest", "result"),
                           ("audit_digest", "audit")):
            _same(obj[name], getattr(self, name), f"{path}.{name}", f"the digest of {what}")


def _same(got: object, want: object, path: str, what: str) -> None:
    if got != want or type(got) is not type(want):
        raise RecordFormatError(path, f"{got!r} is not {what} ({want!r})")



@dataclass(frozen=True, slots=True)
class RunHeader(JsonRecord):
    """The study's part of a run store's header (record 0): what the store was run under.

    ``run`` writes it once (:meth:`to_json` is what ``Store.create`` receives); resume, export,
    preflight, replay, the spec lookup, the analysis and the viewer read it back through
    :meth:`from_header` (the one reader of a run header; the analysis and the viewer reach it
    through :class:`runner.study.StoreHeader`), which takes a store's whole header, leaves the
    store's own fields (``runner.store.HEADER_RESERVED``) aside and reads the rest strictly.

    A store written by an older ``ect run`` lacks the fields added since (``sandbox_layers``,
    ``executor`` and ``executor_blob``; ``stop_rules``; ``throttle``; ``run_settings``): they
    read as ``None`` and :meth:`to_json` leaves them out again, so such a header reads back as
    it was written.
    """

    _path = "header"

    study: str
    lock_digest: Digest
    lock_blob: Digest
    preflight_digest: Digest
    preflight_blob: Digest
    schedule_rows: Count
    spec: NonEmptyStr
    provider: NonEmptyStr
    simulated: bool
    # the isolation layers in force (Landlock ABI, seccomp, ...), as the platform's sandbox
    # backend describes them (their fields differ between backends)
    sandbox_layers: JsonObject | None = field(metadata=OMIT)
    # where tool calls ran: "local" or "ray"; that executor's description (for a cluster,
    # every node's preflight)
    executor: NonEmptyStr | None = field(metadata=OMIT)
    executor_blob: Digest | None = field(metadata=OMIT)
    # every rule that can end a trajectory, as the lock records them (StudySpec.
    # stop_rules_in_force); None for a store written before the header carried them
    stop_rules: JsonObject | None = field(default=None, metadata=OMIT)
    # the run's throttle (requests/tokens per minute, None = no limit); None for a store
    # written before the header carried it
    throttle: JsonObject | None = field(default=None, metadata=OMIT)
    # what `ect resume --store S` continues with unless told otherwise (RunSettingsRecord:
    # model, base URL, limit, concurrency); None for a store written before the header had it
    run_settings: JsonObject | None = field(default=None, metadata=OMIT)

    @classmethod
    def from_header(cls, header: object, path: str = "header") -> RunHeader:
        from runner.store import HEADER_RESERVED

        if not isinstance(header, dict):
            raise RecordFormatError(path, "expected an object")
        return cls.from_json({k: v for k, v in header.items() if k not in HEADER_RESERVED}, path)
