"""One trajectory as text, step by step, blobs resolved (``ect store show --cell --pretty``)."""

from __future__ import annotations

import json
from typing import Any

from runner.view._model import render_request

__all__ = ["format_cell"]


def _j(obj: object) -> str:  # any JSON value, shown as JSON
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)  # noqa: TID251 — display only


def _indent(text: str, pad: str = "      ") -> list[str]:
    return [pad + line for line in text.splitlines()]


def format_cell(view: dict[str, Any], *, raw: bool = False) -> list[str]:
    """Lines describing ``view`` (a :func:`runner.view.cell_view` object)."""
    o = view.get("outcome") or {}
    stop = view.get("stop") or {}
    out = [
        f"cell {view['cell_id']} (record {view['seq']}, row {view.get('row')})",
        f"  task {o.get('task_id')} · {o.get('family')} · world {o.get('world_id')} · "
        f"checkpoint {o.get('checkpoint')} · fault {o.get('fault')} · pipeline {o.get('policy')}",
        f"  outcome {view.get('outcome_label')} · stop {stop.get('reason')} ({stop.get('detail')})"
        f" · {o.get('turns')} turns · {o.get('tool_calls')} tool calls · cost ${o.get('cost_usd')}",
    ]
    if view.get("simulated"):
        out.append(f"  SIMULATED provider ({view.get('provider')}/{view.get('model')}): the "
                   "requests and answers below come from the deterministic simulation")
    prior = view.get("prior_trace") or []
    if prior:
        out.append(f"  checkpoint trace: {len(prior)} earlier tool call(s) "
                   + ", ".join(f"{t.get('call_id')} {t.get('tool_id')}" for t in prior))
    for s in view.get("steps", []):
        out.append("")
        out.append(f"decision {s['index']}: {s['verdict']}")
        req = s.get("request")
        if req:
            out.append(f"  request {req['request_digest']} ({'ok' if req['ok'] else 'FAILED'}, "
                       f"{req['attempts']} attempt(s))")
            for m in render_request(req.get("raw_request", "")):
                out.append(f"    [{m['role']}]")
                text = m["text"] if raw or len(m["text"]) <= 1200 else (
                    m["text"][:1200] + f"… ({len(m['text'])} characters; --raw for all)")
                out.extend(_indent(text))
            if raw:
                out.append("    raw canonical request body:")
                out.extend(_indent(req["raw_request"]))
        action = s.get("action") or {}
        out.append(f"  action: {action.get('kind')} " + _j(
            {k: v for k, v in action.items() if k != "kind"}))
        tool = s.get("tool")
        if tool:
            out.append(f"  tool call {tool.get('call_id')} {tool.get('tool_id')} "
                       f"args {_j(tool.get('args'))}")
            if tool.get("error"):
                out.append(f"    sandbox error: {tool['error']}")
            else:
                out.append(f"    sandbox result: {_j(tool.get('response'))}")
            for r in tool.get("receipts", []):
                out.append(f"    receipt {r.get('receipt_id')} {r.get('exec_status')}/"
                           f"{r.get('validation')} value {_j(r.get('value'))} scope "
                           f"{_j(r.get('scope'))}")
        pipe = s.get("pipeline")
        if pipe:
            out.append(f"  pipeline decision: {pipe['decision']}")
            if pipe["missing_slots"]:
                out.append("    missing or unsupported slots: " + ", ".join(pipe["missing_slots"]))
            for r in pipe["reasons"]:
                slot = f" [slot {r['slot']}]" if r.get("slot") else ""
                out.append(f"    reason {r['code']}{slot}: {r.get('detail')}")
            for i, c in enumerate(pipe.get("critic_calls", []), 1):
                text = (c or {}).get("response_text") or "(no text)"
                out.append(f"    critic verdict {i}: {text}")
    chain = view.get("chain") or {}
    out.append("")
    out.append(f"stop: {stop.get('reason')} — {stop.get('detail')}")
    if chain.get("error"):
        out.append(f"chain: record {chain.get('seq')}: DAMAGED store, no inclusion proof: "
                   f"{chain['error']}")
        return out
    out.append(f"chain: record {chain.get('seq')} leaf {chain.get('leaf')} chain {chain.get('chain')}")
    out.append(f"merkle: inclusion in tree of {chain.get('tree_size')} "
               f"({'signed checkpoint' if chain.get('signed') else 'not yet signed'}) root "
               f"{chain.get('root')}: {'verified' if chain.get('server_verified') else 'FAILED'}")
    return out
