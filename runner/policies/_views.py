"""What the planner and the critics see, rendered into requests (docs/protocol.md, part 2).

Every request carries its view twice: a short human-readable summary, and the whole view as one
canonical JSON block between ``<ect-view>`` tags, so a model (or the simulated responder, which
sees nothing but the request) can read it exactly. Views are built only from the task descriptor,
the trusted contract, the trace, the ledger, a certificate proposal and the last directive: never
from a task's split, a snapshot's condition/fault, or gold answers (a test greps for them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.canonical import OMIT, JsonObject, JsonRecord, canonical_bytes, key, loads_strict, spec
from runner.ect import Contract, Ledger, descriptor_digest, ledger_digest
from runner.errors import FormatError
from runner.policies._registry import critic_spec

__all__ = [
    "CRITIC_VIEW_FORMAT",
    "PLANNER_VIEW_FORMAT",
    "CriticKind",
    "PlannerView",
    "critic_view_json",
    "embed_view",
    "extract_view",
    "trace_json",
]

PLANNER_VIEW_FORMAT = "ect.planner-view/1"
CRITIC_VIEW_FORMAT = "ect.critic-view/1"
CriticKind = str
"""A critic's kind: a key of ``runner.policies.CRITICS`` (the pipeline table's critics and the
self-check)."""

_VIEW_RE = re.compile(r'<ect-view format="([a-z0-9./-]+)">\n(.*?)\n</ect-view>', re.DOTALL)


def embed_view(fmt: str, obj: Mapping[str, Any]) -> str:
    """The machine-readable block for ``obj`` (canonical JSON, one line)."""
    body = canonical_bytes(dict(obj)).decode("utf-8")
    return f'<ect-view format="{fmt}">\n{body}\n</ect-view>'


def extract_view(text: str) -> tuple[str, Any]:
    """``(format, object)`` of the LAST view block in ``text``.

    Raises:
        FormatError: no block, or its JSON is not strict JSON.
    """
    matches = list(_VIEW_RE.finditer(text))
    if not matches:
        raise FormatError("request carries no <ect-view> block")
    m = matches[-1]
    return m.group(1), loads_strict(m.group(2))


def _call_json(call: Any, receipt_ids: Sequence[str]) -> dict[str, Any]:
    return {
        "call_id": call.call_id,
        "tool_id": call.tool_id,
        "args": dict(call.args),
        "response": call.response,
        "receipt_ids": list(receipt_ids),
    }


def trace_json(trace: Sequence[Any], ledger: Ledger) -> list[dict[str, Any]]:
    """Each call of ``trace`` with the ids of the receipts the adapter recorded for it."""
    by_call: dict[str, list[str]] = {}
    for r in ledger.receipts:
        by_call.setdefault(r.call_id, []).append(r.receipt_id)
    return [_call_json(c, by_call.get(c.call_id, [])) for c in trace]


def _task_json(contract: Contract) -> dict[str, Any]:
    return {
        "descriptor": contract.descriptor.to_json(),
        "descriptor_digest": descriptor_digest(contract.descriptor),
    }


@dataclass(frozen=True)
class PlannerView(JsonRecord):
    """Everything the planner sees at one decision.

    ``trace`` items are ``runner.worlds.ToolCall`` (anything with ``call_id, tool_id, args,
    response``). ``directive`` is the text of the most recent ``continue`` (kept until the next
    finish), or ``None``. ``decision`` is the 1-based index of this decision (a real request
    carries where in the run it is; ``None``: not shown). ``draft`` is the certificate the agent
    had drafted before the checkpoint, as the checkpoint holds it (``None``: no draft); like the
    notes in the trace, it is part of what the agent wrote, never a label.
    """

    contract: Contract
    trace: tuple[Any, ...] = field(metadata=spec(skip=True))  # written with its receipt ids
    ledger: Ledger
    directive: str | None = None
    decisions_left: int = field(default=4, metadata=key("budget.decisions_left"))
    calls_left: int = field(default=3, metadata=key("budget.calls_left"))
    decision: int | None = field(default=None, metadata=OMIT)
    draft: Mapping[str, Any] | None = field(default=None, metadata=OMIT)

    _format = PLANNER_VIEW_FORMAT
    _derived = ("task", "ledger_digest")

    @property
    def task(self) -> dict[str, Any]:
        """The task as the planner sees it: its descriptor and the descriptor's digest."""
        return _task_json(self.contract)

    @property
    def ledger_digest(self) -> str:
        return ledger_digest(self.ledger)

    def to_json(self) -> JsonObject:
        # each call of the trace with its receipts' ids: a key of two fields (trace, ledger)
        return {**JsonRecord.to_json(self), "trace": trace_json(self.trace, self.ledger)}

    def render(self) -> str:
        """The user message: a summary for a human reader, then the canonical view block."""
        d = self.contract.descriptor
        lines = [
            f"Task {d.task_id} ({d.family}, world {d.world_id}).",
            f"Required slots: {', '.join(d.required_slots)}.",
            f"Trace so far: {len(self.trace)} tool call(s); ledger: {len(self.ledger.receipts)} receipt(s).",
            f"Budget left: {self.decisions_left} decision(s), {self.calls_left} tool call(s).",
        ]
        if self.decision is not None:
            lines.insert(0, f"Decision {self.decision}.")
        if self.draft is not None:
            lines.append("Your draft certificate from before this point is in the view (draft).")
        if self.directive:
            lines.append("Directive from your last attempt to finish:")
            lines.append(self.directive)
        lines.append("")
        lines.append(embed_view(PLANNER_VIEW_FORMAT, self.to_json()))
        return "\n".join(lines)


def critic_view_json(
    kind: CriticKind,
    *,
    contract: Contract,
    trace: Sequence[Any],
    ledger: Ledger,
    proposal: Mapping[str, Any] | None,
    finish_requested: bool,
    decision: int | None = None,
) -> dict[str, Any]:
    """The view one critic sees (``decision``: the 1-based index of the planner decision being
    judged, as a real request carries it; ``None``: not shown).

    What it shows is the critic's ``sees`` in the pipeline table:

    - ``whole_trace`` (``full_trace``): the whole trace with responses, every receipt, the
      contract, the proposal;
    - ``last_step`` (``critic_core``): the contract, the receipts, the proposal, and only the
      most recent step;
    - ``answer`` (``self_check``): the agent's own task descriptor and answer, nothing else.
    """
    sees = critic_spec(kind).sees
    view: dict[str, Any] = {
        "format": CRITIC_VIEW_FORMAT,
        "kind": kind,
        "task": _task_json(contract),
        "finish_requested": finish_requested,
        "proposal": None if proposal is None else dict(proposal),
    }
    if decision is not None:
        view["decision"] = decision
    if sees == "answer":
        return view
    calls = trace_json(trace, ledger)
    view["contract"] = contract.to_json()
    view["ledger"] = ledger.to_json()
    view["trace"] = calls if sees == "whole_trace" else calls[-1:]
    view["trace_length"] = len(calls)
    return view
