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

from dataclasses import dataclass
from typing import ClassVar

from runner.canonical import (
    JsonObject,
    JsonValue,
    RecordFormatError,
    digest,
    read_bool,
    read_digest,
    read_int,
    read_json_object,
    read_list,
    read_number,
    read_object,
    read_opt_digest,
    read_opt_object,
    read_opt_str,
    read_str,
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

_ROW_FIELDS = ("row", "cell_id", "task_id", "world_id", "family", "checkpoint_id", "checkpoint",
               "fault", "seed_index", "seed", "policy")


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """One row of the canonical schedule: which cell to run, with which derived seed."""

    DIGEST_DOMAIN: ClassVar[str] = "ect/schedule-row/v1"

    row: int
    cell_id: str
    task_id: str
    world_id: str
    family: str
    checkpoint_id: str
    checkpoint: str
    fault: str | None
    seed_index: int
    seed: int
    policy: str

    def to_json(self) -> dict[str, JsonValue]:
        return {name: getattr(self, name) for name in _ROW_FIELDS}

    @classmethod
    def from_json(cls, obj: object, path: str = "schedule_row") -> ScheduleRow:
        r = read_object(obj, path, _ROW_FIELDS)
        return cls(
            row=read_int(r["row"], f"{path}.row", minimum=1),
            cell_id=read_str(r["cell_id"], f"{path}.cell_id", nonempty=True),
            task_id=read_str(r["task_id"], f"{path}.task_id", nonempty=True),
            world_id=read_str(r["world_id"], f"{path}.world_id", nonempty=True),
            family=read_str(r["family"], f"{path}.family", nonempty=True),
            checkpoint_id=read_str(r["checkpoint_id"], f"{path}.checkpoint_id", nonempty=True),
            checkpoint=read_str(r["checkpoint"], f"{path}.checkpoint", nonempty=True),
            fault=read_opt_str(r["fault"], f"{path}.fault"),
            seed_index=read_int(r["seed_index"], f"{path}.seed_index", minimum=0),
            seed=read_int(r["seed"], f"{path}.seed", minimum=0),
            policy=read_str(r["policy"], f"{path}.policy", nonempty=True),
        )

    def digest(self) -> str:
        return digest("ect/schedule-row/v1", self.to_json())


@dataclass(frozen=True, slots=True)
class CellResult:
    """What one cell did: its outcome, stop, decisions and evidence; ``latency_s`` (the only
    wall-clock field besides the outcome's) is left out of the result digest.

    The stop reason is held once, in the outcome (:attr:`stop_reason` reads it); the record
    writes it twice, as ``stop.reason`` and ``outcome.stop_reason`` (the record format), and
    :meth:`from_json` refuses a record where the two differ."""

    outcome: Outcome
    stop_detail: str
    decisions: tuple[DecisionRecord, ...]
    final_certificate: JsonObject | None
    ledger_digest: str
    new_receipts: tuple[Receipt, ...]
    notes: JsonObject
    input_tokens: int
    output_tokens: int
    simulated: bool
    latency_s: int | float

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "outcome", "stop", "decisions", "final_certificate", "ledger_digest", "new_receipts",
        "notes", "tokens", "simulated", "timing")

    @property
    def stop_reason(self) -> StopReason:
        """Why the cell's run stopped (the outcome's ``stop_reason``)."""
        return self.outcome.stop_reason

    def deterministic_json(self) -> dict[str, JsonValue]:
        """The result without wall-clock fields (what :meth:`digest` covers)."""
        return {
            "outcome": self.outcome.without_timing(),
            "stop": {"reason": self.stop_reason.value, "detail": self.stop_detail},
            "decisions": [d.to_json() for d in self.decisions],
            "final_certificate": self.final_certificate,
            "ledger_digest": self.ledger_digest,
            "new_receipts": [r.to_json() for r in self.new_receipts],
            "notes": self.notes,
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "simulated": self.simulated,
        }

    def to_json(self) -> dict[str, JsonValue]:
        out = self.deterministic_json()
        out["outcome"] = self.outcome.to_json()
        out["timing"] = {"latency_s": self.latency_s}
        return out

    def digest(self) -> str:
        """The cell's result digest (``ect/record/v1`` over :meth:`deterministic_json`)."""
        return digest("ect/record/v1", self.deterministic_json())

    @classmethod
    def from_json(cls, obj: object, path: str = "result") -> CellResult:
        r = read_object(obj, path, cls._FIELDS)
        stop = read_object(r["stop"], f"{path}.stop", ("reason", "detail"))
        tokens = read_object(r["tokens"], f"{path}.tokens", ("input", "output"))
        timing = read_object(r["timing"], f"{path}.timing", ("latency_s",))
        receipts = read_list(r["new_receipts"], f"{path}.new_receipts")
        notes = read_json_object(r["notes"], f"{path}.notes")
        outcome = Outcome.from_json(r["outcome"], f"{path}.outcome")
        if read_stop_reason(stop["reason"], f"{path}.stop.reason") is not outcome.stop_reason:
            raise RecordFormatError(f"{path}.stop.reason",
                                    f"differs from {path}.outcome.stop_reason")
        return cls(
            outcome=outcome,
            stop_detail=read_str(stop["detail"], f"{path}.stop.detail"),
            decisions=tuple(DecisionRecord.from_json(d, f"{path}.decisions[{i}]")
                            for i, d in enumerate(read_list(r["decisions"], f"{path}.decisions"))),
            final_certificate=read_opt_object(r["final_certificate"], f"{path}.final_certificate"),
            ledger_digest=read_digest(r["ledger_digest"], f"{path}.ledger_digest"),
            new_receipts=tuple(_receipt(x, f"{path}.new_receipts[{i}]")
                               for i, x in enumerate(receipts)),
            notes=notes,
            input_tokens=read_int(tokens["input"], f"{path}.tokens.input", minimum=0),
            output_tokens=read_int(tokens["output"], f"{path}.tokens.output", minimum=0),
            simulated=read_bool(r["simulated"], f"{path}.simulated"),
            latency_s=_latency(timing["latency_s"], f"{path}.timing.latency_s",
                               outcome.latency_s),
        )


_object = read_json_object  # the name RunHeader.from_header reads open objects by


def _receipt(value: object, path: str) -> Receipt:
    """A receipt as the ledger writes it (the ECT wire reader's errors name the path too)."""
    try:
        return Receipt.from_json(value, path)
    except WireFormatError as e:
        raise RecordFormatError(e.path, e.problem) from None


def _latency(value: object, path: str, outcome_latency: int | float) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordFormatError(path, "expected a number")
    if value != outcome_latency:
        raise RecordFormatError(path, "differs from the outcome's latency_s")
    return value


@dataclass(frozen=True, slots=True)
class RawExchangeRef:
    """One attempt's raw request and response bytes, by blob digest."""

    request: str
    response: str | None

    def to_json(self) -> dict[str, JsonValue]:
        return {"request": self.request, "response": self.response}

    @classmethod
    def from_json(cls, obj: object, path: str) -> RawExchangeRef:
        r = read_object(obj, path, ("request", "response"))
        return cls(read_digest(r["request"], f"{path}.request"),
                   read_opt_digest(r["response"], f"{path}.response"))


@dataclass(frozen=True, slots=True)
class AuditFailure:
    """Why an audited call failed: the provider's failure (as ``ProviderFailure.to_json`` wrote
    it), its class and the role of the call (``class`` and ``role`` are absent, ``None``, in a
    store written before the audit recorded them; :meth:`to_json` then leaves them out too)."""

    kind: str
    detail: str
    status: int | None
    retry_after_s: int | float | None
    error_class: str | None
    failure_class: str | None = None
    role: str | None = None

    _FIELDS: ClassVar[tuple[str, ...]] = ("kind", "detail", "status", "retry_after_s",
                                          "error_class")

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

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "kind": self.kind, "detail": self.detail, "status": self.status,
            "retry_after_s": self.retry_after_s, "error_class": self.error_class}
        if self.failure_class is not None:
            out["class"] = self.failure_class
        if self.role is not None:
            out["role"] = self.role
        return out

    @classmethod
    def from_json(cls, obj: object, path: str = "failure") -> AuditFailure:
        later = tuple(k for k in ("class", "role") if isinstance(obj, dict) and k in obj)
        f = read_object(obj, path, cls._FIELDS + later)
        status, retry_after = f["status"], f["retry_after_s"]
        return cls(
            kind=read_str(f["kind"], f"{path}.kind", nonempty=True),
            detail=read_str(f["detail"], f"{path}.detail"),
            status=None if status is None else read_int(status, f"{path}.status"),
            retry_after_s=(None if retry_after is None
                           else read_number(retry_after, f"{path}.retry_after_s")),
            error_class=read_opt_str(f["error_class"], f"{path}.error_class"),
            failure_class=(read_str(f["class"], f"{path}.class", nonempty=True)
                           if "class" in f else None),
            role=read_str(f["role"], f"{path}.role", nonempty=True) if "role" in f else None,
        )


@dataclass(frozen=True, slots=True)
class AuditCall:
    """One audited model call: the digest of its canonical request, every attempt, the raw
    exchanges and, when it succeeded, the adapter's parsed response (a blob digest). Each
    attempt is the provider's :class:`~runner.providers.AttemptRecord`, written and read by its
    own ``to_json``/``from_json``."""

    request: str
    parsed: str | None
    ok: bool
    failure: AuditFailure | None
    attempts: tuple[AttemptRecord, ...]
    raw: tuple[RawExchangeRef, ...]

    _FIELDS: ClassVar[tuple[str, ...]] = ("request", "parsed", "ok", "failure", "attempts", "raw")

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "request": self.request,
            "parsed": self.parsed,
            "ok": self.ok,
            "failure": self.failure.to_json() if self.failure is not None else None,
            "attempts": [a.to_json() for a in self.attempts],
            "raw": [x.to_json() for x in self.raw],
        }

    @classmethod
    def from_json(cls, obj: object, path: str) -> AuditCall:
        c = read_object(obj, path, cls._FIELDS)
        ok = read_bool(c["ok"], f"{path}.ok")
        call = cls(
            request=read_digest(c["request"], f"{path}.request"),
            parsed=read_opt_digest(c["parsed"], f"{path}.parsed"),
            ok=ok,
            failure=(None if c["failure"] is None
                     else AuditFailure.from_json(c["failure"], f"{path}.failure")),
            attempts=tuple(AttemptRecord.from_json(a, f"{path}.attempts[{i}]")
                           for i, a in enumerate(read_list(c["attempts"], f"{path}.attempts"))),
            raw=tuple(RawExchangeRef.from_json(x, f"{path}.raw[{i}]")
                      for i, x in enumerate(read_list(c["raw"], f"{path}.raw"))),
        )
        if ok != (call.parsed is not None) or ok == (call.failure is not None):
            raise RecordFormatError(path, "ok must come with parsed and without failure")
        return call


@dataclass(frozen=True, slots=True)
class AuditGroup:
    """The audit of one cell: the provider and model of its first attempt, and every call."""

    provider: str | None
    model: str | None
    calls: tuple[AuditCall, ...]

    def to_json(self) -> dict[str, JsonValue]:
        return {"provider": self.provider, "model": self.model,
                "calls": [c.to_json() for c in self.calls]}

    def digest(self) -> str:
        return digest("ect/record/v1", self.to_json())

    def attempt_providers(self) -> set[tuple[str, str, bool]]:
        """The (provider, model, simulated) of every attempt."""
        return {(a.provider, a.model, a.simulated) for call in self.calls for a in call.attempts}

    @classmethod
    def from_json(cls, obj: object, path: str = "audit") -> AuditGroup:
        a = read_object(obj, path, ("provider", "model", "calls"))
        return cls(
            provider=read_opt_str(a["provider"], f"{path}.provider"),
            model=read_opt_str(a["model"], f"{path}.model"),
            calls=tuple(AuditCall.from_json(c, f"{path}.calls[{i}]")
                        for i, c in enumerate(read_list(a["calls"], f"{path}.calls"))),
        )


@dataclass(frozen=True, slots=True)
class CellRecord:
    """The body of one committed cell in the run store.

    :meth:`from_json` also checks the record against itself: the row and cell id agree with the
    schedule row and the outcome, and every digest matches what it covers.
    """

    VERSION: ClassVar[str] = "ect/record/v1"

    schedule_row: ScheduleRow
    result: CellResult
    audit: AuditGroup
    artifacts: dict[str, str]
    code_version: str

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "row", "cell_id", "schedule_row", "schedule_row_digest", "result", "result_digest",
        "audit", "audit_digest", "artifacts", "code_version")

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

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "row": self.row,
            "cell_id": self.cell_id,
            "schedule_row": self.schedule_row.to_json(),
            "schedule_row_digest": self.schedule_row.digest(),
            "result": self.result.to_json(),
            "result_digest": self.result_digest,
            "audit": self.audit.to_json(),
            "audit_digest": self.audit_digest,
            "artifacts": dict(self.artifacts),
            "code_version": self.code_version,
        }

    def mismatch(self, want: ScheduleRow) -> str | None:
        """Why this record is not the cell of schedule row ``want`` (``None`` when it is).

        The one record-vs-schedule matcher: preflight, export and the analysis all ask here.
        """
        if self.schedule_row == want:
            return None
        if self.row != want.row:
            return f"it holds row {self.row} ({self.cell_id}), not row {want.row} ({want.cell_id})"
        return f"row {want.row} ran a different schedule row ({self.cell_id})"

    @classmethod
    def from_json(cls, obj: object, path: str = "record") -> CellRecord:
        b = read_object(obj, path, cls._FIELDS)
        srow = ScheduleRow.from_json(b["schedule_row"], f"{path}.schedule_row")
        result = CellResult.from_json(b["result"], f"{path}.result")
        audit = AuditGroup.from_json(b["audit"], f"{path}.audit")
        artifacts = read_json_object(b["artifacts"], f"{path}.artifacts")
        record = cls(
            schedule_row=srow,
            result=result,
            audit=audit,
            artifacts={k: read_digest(v, f"{path}.artifacts.{k}") for k, v in artifacts.items()},
            code_version=read_str(b["code_version"], f"{path}.code_version"),
        )
        _same(b["row"], srow.row, f"{path}.row", "the schedule row's")
        _same(b["cell_id"], srow.cell_id, f"{path}.cell_id", "the schedule row's")
        _same(result.outcome.row, srow.row, f"{path}.result.outcome.row", "the record's")
        _same(result.outcome.cell_id, srow.cell_id, f"{path}.result.outcome.cell_id",
              "the record's")
        _same(b["schedule_row_digest"], srow.digest(), f"{path}.schedule_row_digest",
              "the digest of schedule_row")
        _same(b["result_digest"], record.result_digest, f"{path}.result_digest",
              "the digest of result")
        _same(b["audit_digest"], record.audit_digest, f"{path}.audit_digest",
              "the digest of audit")
        return record


def _same(got: object, want: object, path: str, what: str) -> None:
    if got != want or type(got) is not type(want):
        raise RecordFormatError(path, f"{got!r} is not {what} ({want!r})")



@dataclass(frozen=True, slots=True)
class RunHeader:
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

    study: str
    lock_digest: str
    lock_blob: str
    preflight_digest: str
    preflight_blob: str
    schedule_rows: int
    spec: str
    provider: str
    simulated: bool
    # the isolation layers in force (Landlock ABI, seccomp, ...), as the platform's sandbox
    # backend describes them (their fields differ between backends)
    sandbox_layers: JsonObject | None
    executor: str | None  # where tool calls ran: "local" or "ray"
    executor_blob: str | None  # that executor's description (for a cluster, every node's preflight)
    # every rule that can end a trajectory, as the lock records them (StudySpec.
    # stop_rules_in_force); None for a store written before the header carried them
    stop_rules: JsonObject | None = None
    # the run's throttle (requests/tokens per minute, None = no limit); None for a store
    # written before the header carried it
    throttle: JsonObject | None = None
    # what `ect resume --store S` continues with unless told otherwise (RunSettingsRecord:
    # model, base URL, limit, concurrency); None for a store written before the header had it
    run_settings: JsonObject | None = None

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "study", "lock_digest", "lock_blob", "preflight_digest", "preflight_blob",
        "schedule_rows", "spec", "provider", "simulated")
    # fields a store written by an older `ect run` may lack
    _LATER: ClassVar[tuple[str, ...]] = (
        "sandbox_layers", "executor", "executor_blob", "stop_rules", "throttle", "run_settings")

    def to_json(self) -> JsonObject:
        later = {
            "sandbox_layers": self.sandbox_layers,
            "executor": self.executor,
            "executor_blob": self.executor_blob,
            "stop_rules": self.stop_rules,
            "throttle": self.throttle,
            "run_settings": self.run_settings,
        }
        return {
            "study": self.study,
            "lock_digest": self.lock_digest,
            "lock_blob": self.lock_blob,
            "preflight_digest": self.preflight_digest,
            "preflight_blob": self.preflight_blob,
            "schedule_rows": self.schedule_rows,
            "spec": self.spec,
            "provider": self.provider,
            "simulated": self.simulated,
            **{k: v for k, v in later.items() if v is not None},
        }

    @classmethod
    def from_header(cls, header: object, path: str = "header") -> RunHeader:
        from runner.store import HEADER_RESERVED

        if not isinstance(header, dict):
            raise RecordFormatError(path, "expected an object")
        own = {k: v for k, v in header.items() if k not in HEADER_RESERVED}
        # present or absent, never null
        later = {k: own.pop(k) for k in cls._LATER if k in own}
        h = read_object(own, path, cls._FIELDS)
        layers, stop_rules, throttle = (later.get(k) for k in ("sandbox_layers", "stop_rules",
                                                               "throttle"))
        executor, executor_blob = later.get("executor"), later.get("executor_blob")
        if "sandbox_layers" in later:
            layers = _object(layers, f"{path}.sandbox_layers")
        if "stop_rules" in later:
            stop_rules = _object(stop_rules, f"{path}.stop_rules")
        if "throttle" in later:
            throttle = _object(throttle, f"{path}.throttle")
        run_settings = later.get("run_settings")
        if "run_settings" in later:
            run_settings = _object(run_settings, f"{path}.run_settings")
        if "executor" in later:
            executor = read_str(executor, f"{path}.executor", nonempty=True)
        if "executor_blob" in later:
            executor_blob = read_digest(executor_blob, f"{path}.executor_blob")
        return cls(
            study=read_str(h["study"], f"{path}.study"),
            lock_digest=read_digest(h["lock_digest"], f"{path}.lock_digest"),
            lock_blob=read_digest(h["lock_blob"], f"{path}.lock_blob"),
            preflight_digest=read_digest(h["preflight_digest"], f"{path}.preflight_digest"),
            preflight_blob=read_digest(h["preflight_blob"], f"{path}.preflight_blob"),
            schedule_rows=read_int(h["schedule_rows"], f"{path}.schedule_rows", minimum=0),
            spec=read_str(h["spec"], f"{path}.spec", nonempty=True),
            provider=read_str(h["provider"], f"{path}.provider", nonempty=True),
            simulated=read_bool(h["simulated"], f"{path}.simulated"),
            sandbox_layers=layers,
            executor=executor,
            executor_blob=executor_blob,
            stop_rules=stop_rules,
            throttle=throttle,
            run_settings=run_settings,
        )

