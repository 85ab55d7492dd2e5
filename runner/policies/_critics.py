"""Model-backed critics: request building and verdict parsing (critic core's LLM critic, the
full-trace critic, the self-check). A provider failure or an unparseable reply is never an
exception here: it is ``None``, which every policy maps to ``continue``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from runner.canonical import loads_strict
from runner.ect import Contract, Ledger
from runner.policies._prompts import load_prompt
from runner.policies._registry import critic_spec
from runner.policies._views import CRITIC_VIEW_FORMAT, CriticKind, critic_view_json, embed_view
from runner.providers import GenerationConfig, Message, ProviderRequest, ProviderResult

__all__ = [
    "CRITIC_RESPONSE_SCHEMA",
    "SELF_CHECK_RESPONSE_SCHEMA",
    "CriticVerdict",
    "build_critic_request",
    "parse_critic_verdict",
]

CRITIC_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["accept", "reject", "stuck"]},
        "reason": {"type": "string"},
    },
    "required": ["verdict", "reason"],
}
SELF_CHECK_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["APPROVED", "REVISE"]},
        "reason": {"type": "string"},
    },
    "required": ["verdict", "reason"],
}

@dataclass(frozen=True)
class CriticVerdict:
    """A parsed verdict. Self-check ``APPROVED``/``REVISE`` map to ``accept``/``reject``."""

    verdict: Literal["accept", "reject", "stuck"]
    reason: str


def build_critic_request(
    kind: CriticKind,
    *,
    contract: Contract,
    trace: Sequence[Any],
    ledger: Ledger,
    proposal: Mapping[str, Any] | None,
    finish_requested: bool,
    generation: GenerationConfig,
    metadata: Mapping[str, str | int],
    decision: int | None = None,
) -> ProviderRequest:
    """A critic request (role ``"critic"``, or ``"self_check"`` for the self-check); ``kind``
    is a critic of the pipeline table (its prompt and first line are the table's).

    ``decision`` is the 1-based index of the planner decision under judgement: in the closed
    loop every critic request carries it (in the view and in ``metadata``), as a real request
    carries where in the run it is, so judging one proposal again at a later decision is a new
    request (with the simulated provider, a new draw). ``None`` (the static study's one-shot
    judgements) leaves it out.
    """
    view = critic_view_json(
        kind,
        contract=contract,
        trace=trace,
        ledger=ledger,
        proposal=proposal,
        finish_requested=finish_requested,
        decision=decision,
    )
    if decision is not None:
        metadata = {**metadata, "decision": decision}
    spec = critic_spec(kind)
    text = f"{spec.header}\n\n{embed_view(CRITIC_VIEW_FORMAT, view)}"
    return ProviderRequest(
        role="self_check" if kind == "self_check" else "critic",
        system=load_prompt(spec.prompt),
        messages=(Message.user_text(text),),
        tools=(),
        response_schema=SELF_CHECK_RESPONSE_SCHEMA if kind == "self_check" else CRITIC_RESPONSE_SCHEMA,
        generation=generation,
        metadata=dict(metadata),
    )


_ALIASES = {
    "accept": "accept",
    "approved": "accept",
    "reject": "reject",
    "revise": "reject",
    "stuck": "stuck",
}


def _strip_fence(text: str) -> str:
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else ""
        if t.rstrip().endswith("```"):
            t = t.rstrip()[:-3]
    return t.strip()


def parse_critic_verdict(result: ProviderResult | None) -> CriticVerdict | None:
    """The verdict in ``result``; ``None`` on provider failure or any malformed reply."""
    if result is None or result.response is None:
        return None
    response = result.response
    obj: Any = response.structured
    if not isinstance(obj, Mapping):
        if not isinstance(response.text, str):
            return None
        try:
            obj = loads_strict(_strip_fence(response.text))
        except Exception:
            return None
    if not isinstance(obj, Mapping):
        return None
    verdict = obj.get("verdict")
    reason_text = obj.get("reason", "")
    if not isinstance(verdict, str) or not isinstance(reason_text, str):
        return None
    mapped = _ALIASES.get(verdict.strip().lower())
    if mapped is None:
        return None
    return CriticVerdict(verdict=mapped, reason=reason_text.strip()[:500])  # type: ignore[arg-type]
