"""What the pages show, assembled from the store as plain JSON (the server and the bundle
serve exactly these objects; ``ect store show --cell --pretty`` prints the trajectory one)."""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

from runner.store import ProofInvalid, merkle
from runner.view._errors import ViewError
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
)


def outcome_label(o: dict[str, Any]) -> str:
    """One word for a cell's scored outcome (the fields of ``runner.loop.OUTCOME_FIELDS``)."""
    if o.get("supported_completion"):
        return "supported"
    if o.get("premature_unsupported"):
        return "premature"
    if o.get("clean_false_continuation"):
        return "false_continuation"
    if o.get("recoverable_stuck"):
        return "stuck"
    return "unsupported" if o.get("final_decision") == "complete" else "not_completed"


def cell_rows(src: StoreSource) -> list[list[Any]]:
    rows = []
    for seq, body in sorted(src.bodies().items()):
        o = body.get("result", {}).get("outcome", {})
        srow = body.get("schedule_row", {})
        rows.append([
            seq, body.get("row"), body.get("cell_id"), o.get("task_id"), o.get("family"),
            o.get("world_id"), o.get("checkpoint"), o.get("policy"),
            srow.get("seed_index", o.get("seed")), o.get("fault"), outcome_label(o),
            o.get("stop_reason"), o.get("turns"), o.get("tool_calls"), o.get("cost_usd"),
        ])
    return rows


def _layers(header: dict[str, Any], preflight: dict[str, Any] | None) -> Any:
    """The sandbox layers in force, where the run recorded them (header or preflight)."""
    for source in (header, preflight or {}):
        for key in ("sandbox_layers", "layers"):
            if key in source:
                return source[key]
        sandbox = source.get("sandbox")
        if isinstance(sandbox, dict) and "layers" in sandbox:
            return sandbox["layers"]
    return None


def run_summary(src: StoreSource, *, integrity: dict[str, Any] | None) -> dict[str, Any]:
    header = src.header
    preflight = src.blob_json(header.get("preflight_blob"))
    bodies = src.bodies()
    stops: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    cost = 0.0
    tokens = 0
    for body in bodies.values():
        o = body.get("result", {}).get("outcome", {})
        stops[str(o.get("stop_reason"))] += 1
        outcomes[outcome_label(o)] += 1
        cost += float(o.get("cost_usd") or 0.0)
        tokens += int(o.get("input_tokens") or 0) + int(o.get("output_tokens") or 0)
    simulated = bool(header.get("simulated"))
    provider = str(header.get("provider", "unknown"))
    checks = (preflight or {}).get("checks", [])
    return {
        "store": str(src.path),
        "study": header.get("study"),
        "provider": provider,
        "simulated": simulated,
        "provider_line": (
            f"Provider: {provider} — SIMULATED: every figure and trajectory here comes from the "
            "deterministic simulation, not from a real model"
            if simulated else f"Provider: {provider} (real model responses)"),
        "store_id": header.get("store_id"),
        "public_key": header.get("public_key"),
        "created_utc": header.get("created_utc"),
        "lock_digest": header.get("lock_digest"),
        "preflight_digest": header.get("preflight_digest"),
        "preflight": None if preflight is None else {
            "passed": preflight.get("passed"),
            "probes": preflight.get("probes"),
            "checks": [{"name": c.get("name"), "ok": c.get("ok"), "detail": c.get("detail")}
                       for c in checks],
        },
        "sandbox_layers": _layers(header, preflight),
        "progress": {"committed": len(bodies), "total": header.get("schedule_rows")},
        "cost_usd": round(cost, 9),
        "tokens": tokens,
        "provider_attempts": src.attempt_count(),
        "stop_reasons": dict(sorted(stops.items())),
        "outcomes": dict(sorted(outcomes.items())),
        "latest_checkpoint": (src.latest_checkpoint() or {}).get("checkpoint"),
        "integrity": integrity,
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


def _call_view(src: StoreSource, call: dict[str, Any] | None) -> dict[str, Any] | None:
    if call is None:
        return None
    raw = call.get("raw") or []
    last = raw[-1] if raw else {}
    req_bytes = b""
    if last.get("request"):
        try:
            req_bytes = src.blob(last["request"])
        except ViewError:  # a missing or damaged blob shows as absent; the cell still shows
            req_bytes = b""
    parsed = src.blob_json(call.get("parsed"))
    return {
        "request_digest": call.get("request"),
        "ok": call.get("ok"),
        "failure": call.get("failure"),
        "attempts": len(call.get("attempts") or []),
        "raw_request": req_bytes.decode("utf-8", "replace"),
        "response_text": (parsed or {}).get("text") if isinstance(parsed, dict) else None,
        "response": parsed,
    }


def cell_view(src: StoreSource, seq: int) -> dict[str, Any]:
    """One trajectory, decision by decision, with its chain position and inclusion proof."""
    body = src.body(seq)
    result = body.get("result", {})
    audit = body.get("audit", {})
    calls: list[dict[str, Any]] = list(audit.get("calls") or [])
    decisions: list[dict[str, Any]] = list(result.get("decisions") or [])
    trace = src.blob_json((body.get("artifacts") or {}).get("trace")) or []
    executed = sum(1 for d in decisions if d.get("verdict") == "executed")
    new_trace = trace[len(trace) - executed:] if executed else []
    receipts: dict[str, list[dict[str, Any]]] = {}
    for r in result.get("new_receipts") or []:
        receipts.setdefault(str(r.get("call_id")), []).append(r)
    steps = []
    ci = ei = 0
    for d in decisions:
        planner = calls[ci] if ci < len(calls) else None
        ci += 1
        pipeline = d.get("pipeline")
        n_critic = int(pipeline.get("model_calls") or 0) if pipeline else 0
        critic = calls[ci:ci + n_critic]
        ci += n_critic
        tool = None
        action = d.get("action") or {}
        if d.get("verdict") == "executed" and ei < len(new_trace):
            t = new_trace[ei]
            ei += 1
            tool = {"call_id": t.get("call_id"), "tool_id": t.get("tool_id"),
                    "args": t.get("args"), "response": t.get("response"),
                    "receipts": receipts.get(str(t.get("call_id")), [])}
        elif d.get("verdict") == "tool_failed":
            tool = {"call_id": None, "tool_id": action.get("tool_id"), "args": action.get("args"),
                    "response": None, "error": d.get("tool_error"), "receipts": []}
        pipe = None
        if pipeline:
            reasons = list(pipeline.get("reasons") or [])
            pipe = {
                "decision": pipeline.get("decision"),
                "reasons": reasons,
                "missing_slots": sorted({str(r["slot"]) for r in reasons if r.get("slot")}),
                "directive": pipeline.get("directive"),
                "critic_calls": [_call_view(src, c) for c in critic],
            }
        steps.append({
            "index": d.get("index"),
            "verdict": d.get("verdict"),
            "provider_ok": d.get("provider_ok"),
            "action": action,
            "request": _call_view(src, planner),
            "tool": tool,
            "pipeline": pipe,
        })
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
    o = result.get("outcome", {})
    return {
        "seq": seq,
        "cell_id": body.get("cell_id"),
        "row": body.get("row"),
        "outcome": o,
        "outcome_label": outcome_label(o),
        "schedule_row": body.get("schedule_row"),
        "stop": result.get("stop"),
        "final_certificate": result.get("final_certificate"),
        "simulated": bool(result.get("simulated")),
        "provider": audit.get("provider"),
        "model": audit.get("model"),
        "tokens": result.get("tokens"),
        "result_digest": body.get("result_digest"),
        "steps": steps,
        "prior_trace": trace[:len(trace) - executed] if executed else trace,
        "unmatched_calls": len(calls) - ci if ci < len(calls) else 0,
        "chain": {
            "seq": seq,
            "store_id": src.header.get("store_id"),
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
        },
    }
