"""What the pages show, assembled from the store as plain JSON (the server and the bundle
serve exactly these objects; ``ect store show --cell --pretty`` prints the trajectory one).

Every record is read as the study's :class:`runner.study.CellRecord` (strictly, digests
checked), so the viewer and the study share one definition of a record; a record that is not
one shows in the cell table as ``unreadable`` and its page names why.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

from runner.canonical import JsonObject
from runner.errors import FormatError
from runner.loop import Outcome
from runner.store import ProofInvalid, StoreReport, damage_label, merkle
from runner.study import AuditCall, CellRecord, FailureCounts, PreflightReport, record_failures
from runner.view._errors import RecordDamaged, ViewError
from runner.view._source import StoreSource

__all__ = [
    "CELL_COLUMNS",
    "cell_rows",
    "cell_view",
    "outcome_label",
    "render_request",
    "run_summary",
]

# The cell table's columns, in order (every row is a list in this order).
CELL_COLUMNS: tuple[str, ...] = (
    "seq", "row", "cell_id", "task_id", "family", "world_id", "checkpoint", "policy",
    "seed_index", "fault", "outcome", "stop_reason", "turns", "tool_calls", "cost_usd",
    "provider_failures", "damage",
)
"""``damage`` is empty for a cell and names a record that could not be read the way every
command names it (``DAMAGED (tamper) at seq 6: ...``)."""


def outcome_label(o: Outcome) -> str:
    """One word for a cell's scored outcome."""
    if o.supported_completion:
        return "supported"
    if o.premature_unsupported:
        return "premature"
    if o.clean_false_continuation:
        return "false_continuation"
    if o.recoverable_stuck:
        return "stuck"
    return "unsupported" if o.final_decision == "complete" else "not_completed"


UNREADABLE = "unreadable"  # the outcome shown for a record that is not a cell record


def cell_rows(src: StoreSource) -> list[list[str | int | float | None]]:
    """The cell table: one row of scalars per committed record, in ``CELL_COLUMNS`` order."""
    rows: list[list[str | int | float | None]] = []
    for seq, record in sorted(src.cells().items()):
        if not isinstance(record, CellRecord):
            rows.append([seq, *([None] * 9), UNREADABLE, *([None] * 5), str(record)])
            continue
        o, srow = record.result.outcome, record.schedule_row
        rows.append([
            seq, record.row, record.cell_id, o.task_id, o.family, o.world_id, o.checkpoint,
            o.policy, srow.seed_index, o.fault, outcome_label(o), o.stop_reason.value, o.turns,
            o.tool_calls, o.cost_usd, _failure_flag(record), None,
        ])
    return rows


def _failure_flag(record: CellRecord) -> str:
    """The cell's failed provider calls in a few characters ("" when none): e.g. ``"2 (1 T)"``
    is two failures, one of them a transport failure."""
    found = record_failures(record)
    if not found:
        return ""
    transport = sum(f.failure_class == "transport" for f in found)
    return f"{len(found)} ({transport} T)" if transport else str(len(found))


def _with_unreadable(report: StoreReport | None,
                     cells: dict[int, CellRecord | ViewError]) -> JsonObject | None:
    """The verification as the page shows it: never "intact" beside a record the page could not
    read. A quick verification does not re-read the bodies the page reads; when one of them is
    unreadable, that is the first damage the page names."""
    integrity = None if report is None else {**report.to_json(), "label": report.label}
    bad = [(seq, r) for seq, r in sorted(cells.items()) if not isinstance(r, CellRecord)]
    if not bad or report is None or integrity is None or not report.ok:
        return integrity
    seq, err = bad[0]
    kind = "full" if report.full else "quick"
    damage = err.kind if isinstance(err, RecordDamaged) else UNREADABLE
    detail = err.detail if isinstance(err, RecordDamaged) else str(err)
    return {**integrity, "ok": False, "damage": damage, "first_bad_seq": seq,
            "label": damage_label(damage, seq),
            "detail": f"{len(bad)} record(s) unreadable, first {detail} (the {kind} verification, "
                      f"which does not read every body, found: {report.detail})"}


def _count(src: StoreSource) -> int | None:
    """The records SQLite holds (header included); None when it cannot count them."""
    try:
        return src.count()
    except ViewError:
        return None


def _preflight(src: StoreSource) -> PreflightReport | None:
    """The run's preflight report, read strictly from its blob; None when the store records
    none, or one that does not read (the page then shows no preflight)."""
    doc = src.blob_json(src.header.preflight_blob)
    if doc is None:
        return None
    try:
        return PreflightReport.from_json(doc)
    except FormatError:
        return None


def _accounting(src: StoreSource, committed: set[str]) -> JsonObject | None:
    """The store's attempt accounting (:func:`runner.study.store_accounting`); None for a store
    that is not a run's or whose journal does not read."""
    from runner.errors import EctError
    from runner.store import Store
    from runner.study import store_accounting

    try:
        with Store.open(src.path, readonly=True) as store:
            acc = store_accounting(store, committed)
    except (EctError, OSError):
        return None
    return None if acc is None else dict(acc.to_json())


def run_summary(src: StoreSource, *, integrity: StoreReport | None) -> JsonObject:
    """The run page: what the store was run under (its header and preflight report, read
    strictly), its progress and outcomes, and ``integrity`` (a verification of the store)."""
    header = src.header
    preflight = _preflight(src)
    cells = src.cells()
    stops: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    cost = 0.0
    tokens = 0
    failures = FailureCounts()
    for record in cells.values():
        if not isinstance(record, CellRecord):
            outcomes[UNREADABLE] += 1
            continue
        failures.add(record)
        o = record.result.outcome
        stops[o.stop_reason.value] += 1
        outcomes[outcome_label(o)] += 1
        cost += float(o.cost_usd)
        tokens += o.input_tokens + o.output_tokens
    simulated = bool(header.provider is not None and header.provider.simulated)
    provider = "unknown" if header.provider is None else header.provider.name
    return {
        "store": str(src.path),
        "study": header.study,
        "provider": provider,
        "simulated": simulated,
        "provider_line": (
            f"Provider: {provider} — SIMULATED: every figure and trajectory here comes from the "
            "deterministic simulation, not from a real model"
            if simulated else f"Provider: {provider} (real model responses)"),
        "store_id": header.store_id,
        "public_key": header.public_key,
        "created_utc": header.created_utc,
        "lock_digest": header.lock_digest,
        "preflight_digest": header.preflight_digest,
        "preflight": None if preflight is None else {
            "passed": preflight.passed,
            "probes": preflight.probes,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail}
                       for c in preflight.checks],
        },
        # the sandbox layers in force, as the run recorded them
        "sandbox_layers": header.sandbox_layers,
        "progress": {"committed": len(cells), "total": header.schedule_rows},
        # what SQLite holds (header included), beside what the verification could confirm
        "records_in_store": _count(src),
        "cost_usd": round(cost, 9),
        "tokens": tokens,
        "provider_attempts": src.attempt_count(),
        "stop_reasons": dict(sorted(stops.items())),
        "outcomes": dict(sorted(outcomes.items())),
        "provider_failures": failures.to_json(),
        # every journaled attempt (retried, failed, of uncommitted cells), halts, billed cost
        "accounting": _accounting(src, {r.cell_id for r in cells.values()
                                        if isinstance(r, CellRecord)}),
        "latest_checkpoint": (src.latest_checkpoint() or {}).get("checkpoint"),
        "integrity": _with_unreadable(integrity, cells),
    }


def render_request(raw: str) -> list[dict[str, str]]:
    """A provider request's messages (from its raw canonical body) as (role, text) pairs, for
    reading; the page does the same in its script, so the data carries the raw body only."""
    try:
        req = json.loads(raw) if raw else None
    except ValueError:
        return []
    out: list[dict[str, str]] = []
    if not isinstance(req, dict):
        return out
    if isinstance(req.get("system"), str):
        out.append({"role": "system", "text": req["system"]})
    for m in req.get("messages") or []:
        parts = m.get("parts") or []
        text = "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict)
                         and "text" in p)
        other = [p for p in parts if isinstance(p, dict) and "text" not in p]
        if other:
            text += ("\n" if text else "") + "\n".join(
                f"[{k}] {json.dumps(v, sort_keys=True)}"  # noqa: TID251 — display only
                for p in other for k, v in list(p.items())[:1])
        out.append({"role": str(m.get("role", "user")), "text": text})
    return out


def _call_view(src: StoreSource, call: AuditCall | None) -> dict[str, Any] | None:
    if call is None:
        return None
    req_bytes = b""
    if call.raw:
        try:
            req_bytes = src.blob(call.raw[-1].request)
        except ViewError:  # a missing or damaged blob shows as absent; the cell still shows
            req_bytes = b""
    parsed = src.blob_json(call.parsed)
    return {
        "request_digest": call.request,
        "ok": call.ok,
        "failure": call.failure,
        "attempts": len(call.attempts),
        "raw_request": req_bytes.decode("utf-8", "replace"),
        "response_text": parsed.get("text") if isinstance(parsed, dict) else None,
        "response": parsed,
    }


def cell_view(src: StoreSource, seq: int) -> dict[str, Any]:
    """One trajectory, decision by decision, with its chain position and inclusion proof.

    Raises:
        NotFound: no record ``seq``.
        ViewError: record ``seq`` is not a cell record (the message says why).
    """
    record = src.cell(seq)
    result, audit = record.result, record.audit
    calls = audit.calls
    decisions = result.decisions
    stored = src.blob_json(record.artifacts.get("trace"))
    trace = stored if isinstance(stored, list) else []
    executed = sum(1 for d in decisions if d.verdict == "executed")
    new_trace = trace[len(trace) - executed:] if executed else []
    receipts: dict[str, list[dict[str, Any]]] = {}
    for r in result.new_receipts:
        receipts.setdefault(r.call_id, []).append(r.to_json())
    steps = []
    ci = ei = 0
    for d in decisions:
        planner = calls[ci] if ci < len(calls) else None
        ci += 1
        pipeline = d.pipeline
        n_critic = pipeline.model_calls if pipeline is not None else 0
        critic = calls[ci:ci + n_critic]
        ci += n_critic
        tool = None
        action = d.action.to_json()
        if d.verdict == "executed" and ei < len(new_trace):
            entry = new_trace[ei]
            t = entry if isinstance(entry, dict) else {}
            ei += 1
            tool = {"call_id": t.get("call_id"), "tool_id": t.get("tool_id"),
                    "args": t.get("args"), "response": t.get("response"),
                    "receipts": receipts.get(str(t.get("call_id")), [])}
        elif d.verdict == "tool_failed":
            tool = {"call_id": None, "tool_id": action.get("tool_id"), "args": action.get("args"),
                    "response": None, "error": d.tool_error, "receipts": []}
        pipe = None
        if pipeline is not None:
            pipe = {
                "decision": pipeline.decision,
                "reasons": [r.to_json() for r in pipeline.reasons],
                "missing_slots": sorted({r.slot for r in pipeline.reasons if r.slot}),
                "directive": pipeline.directive,
                "critic_calls": [_call_view(src, c) for c in critic],
            }
        steps.append({
            "index": d.index,
            "verdict": d.verdict,
            "provider_ok": d.provider_ok,
            "action": action,
            "request": _call_view(src, planner),
            "tool": tool,
            "pipeline": pipe,
        })
    o = result.outcome
    view = {
        "seq": seq,
        "cell_id": record.cell_id,
        "row": record.row,
        "outcome": o.to_json(),
        "outcome_label": outcome_label(o),
        "schedule_row": record.schedule_row.to_json(),
        "stop": {"reason": result.stop_reason.value, "detail": result.stop_detail},
        "final_certificate": result.final_certificate,
        "simulated": result.simulated,
        "provider": audit.provider,
        "model": audit.model,
        "tokens": {"input": result.input_tokens, "output": result.output_tokens},
        "result_digest": record.result_digest,
        "steps": steps,
        "prior_trace": trace[:len(trace) - executed] if executed else trace,
        "unmatched_calls": len(calls) - ci if ci < len(calls) else 0,
    }
    try:
        view["chain"] = _chain(src, seq)
    except ViewError as e:  # another record's damaged page: this one reads, its proof cannot
        view["chain"] = {"seq": seq, "error": str(e)}
    return view


def _chain(src: StoreSource, seq: int) -> dict[str, Any]:
    raw = src.raw_record(seq)
    cp = src.latest_checkpoint()
    size = int(cp["checkpoint"]["size"]) if cp and seq < int(cp["checkpoint"]["size"]) else None
    leaves = src.leaves(size if size is not None else seq + 1)
    size = len(leaves)
    proof = merkle.inclusion_proof(leaves, seq)
    root = merkle.root(leaves)
    signed = cp is not None and int(cp["checkpoint"]["size"]) == size
    try:
        merkle.verify_inclusion(raw.leaf, seq, size, proof, root)
        server_ok = merkle.leaf_hash(raw.body) == raw.leaf
    except ProofInvalid:  # shown as a failed check
        server_ok = False
    return {
        "seq": seq,
        "store_id": src.header.store_id,
        "body_b64": base64.b64encode(raw.body).decode("ascii"),
        "leaf": raw.leaf.hex(),
        "chain": raw.chain.hex(),
        "prev_chain": raw.prev_chain.hex(),
        "tree_size": size,
        "proof": [p.hex() for p in proof],
        "root": root.hex(),
        "checkpoint_root": cp["checkpoint"]["root"] if signed and cp else None,
        "signed": signed,
        "server_verified": server_ok,
    }
