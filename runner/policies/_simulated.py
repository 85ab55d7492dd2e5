"""The simulated planner and critics: the brain of the embedded default provider.

:func:`simulated_responder` returns a ``Responder`` for :class:`runner.providers.SimulatedProvider`.
It sees nothing but the request (it parses the ``<ect-view>`` block of the last user message) and
the provider's ``rng`` (derived from the cell seed and the canonical request), so a reply is a
pure function of (seed, request, behaviour parameters). It never reads split, fault or gold.

Planner (role ``planner``), a competent but fallible agent. It sees the checkpoint as a real
model would: the trace so far (with the notes it recorded in it), the ledger, and the *draft*
certificate it wrote before the checkpoint (``draft`` in the view; for a faulty checkpoint the
draft carries the fault's temptation: no claims, a forged reference, a wrong-scope or failed
receipt, an altered value, a wrong transform parameter). At each decision it works out the
*missing calls*: for the slots :func:`runner.worlds.propose_certificate` cannot yet support
(no claim, or fewer cited receipts than the contract's cardinality minimum), the
calls of :func:`runner.worlds.plan_calls`, minus identical calls already made whose receipts all
succeeded and validated. Every uniform a reply may use is drawn up front, in a fixed order,
whatever the parameters (:class:`_Draws`): a behaviour happens when its own draw is below its
rate, so raising a rate adds that behaviour on the same draws and changes no other. Then:

1. with ``p_invalid_output``: a prose reply with no function call (an InvalidAction);
2. if receipts conflict (two valid receipts with one scope key and different values): escalate
   with ``p_escalate_on_conflict``;
3. whether it follows the directive in the view (``p_follow_directive``; only if there is one).
   A directive tells it what the verifier or critic found (ECT's: reason codes and slot names
   only); following means it will not finish prematurely and does not fall back on its draft.
   It never stops the planner slipping: every slip below applies to every proposal, before and
   after a directive;
4. if calls are missing and the budget allows a call: finish anyway with ``p_premature_finish``
   (unless following), submitting its draft (``p_reuse_draft``, when there is a draft) or else a
   *fluent* certificate that fills every slot from whatever receipts look closest; otherwise
   make the first missing call, replaced by a repeat of the last call with ``p_repeat_call``,
   else by a call that does not answer the slot (``p_wrong_call``: the next attribute of the
   tool schemas' enum, the other level of a listing, a listing instead of ``get_parent``), else
   by a scope-shifted copy (date +1 day, or a sibling entity) with ``p_wrong_scope_call``;
5. nothing missing (or no call budget left): unless following, submit the draft with
   ``p_reuse_draft`` (when there is one); else compose a certificate: the receipts and
   transform of :func:`runner.worlds.propose_certificate` (slots it cannot support are filled
   fluently), each derived value (any op but ``identity``) by the planner's own arithmetic,
   wrong with ``p_arithmetic_error`` per slot; then one claimed value corrupted with
   ``p_corrupt_value`` and a receipt id that is not in the ledger cited with
   ``p_cite_missing_receipt``. A fluent premature certificate is composed the same way.

What the planner knows about which calls answer a slot is stated by one parameter:
``p_wrong_call``. It reads the contract's scope and the tool schemas (both in the prompt) and
otherwise knows the answering calls exactly, so a wrong call is a slip (SLIP rule).

A submitted draft keeps the draft's claims as they are and takes the current ledger digest from
the view (as the planner prompt tells a model to). The planner never looks at the draft's
correctness, only at whether there is one: it is tempted the same way on a clean checkpoint
(where the draft is sound) as on a faulty one.

Critic (roles ``critic`` / ``self_check``): it reads the proposal against what the view shows
and notices problems: a required slot without a claim, a cited id not in the ledger, a cited
receipt that failed or is invalid, a cited receipt outside the slot's entity/attribute/level/date
scope, fewer cited receipts than the slot's cardinality minimum, an ``identity`` claim whose
value differs from its one receipt's value, a derived value that differs from recomputing its
transform over the cited values (noticed only with ``p_notice_value_mismatch``: it does not
always redo the arithmetic), or no finish request at all. A critic whose entry in the pipeline
table says ``simulated_stuck_on_repeat`` (the full-trace critic) and that sees a repeated last
call says ``stuck`` with ``p_stuck_on_repeat``. With problems it still accepts (a fluent but unsupported proposal) with
``p_accept_unsupported``; without problems it rejects anyway with ``p_reject_supported``. The
self-check reads only its own answer: it approves unless its checklist finds a required slot
without a claim or a claim without evidence, and even then approves with
``p_self_approve_flawed``.

Defaults (the values ``schedules/v2.toml`` states, with the reasoning beside each) were chosen
from two plain rules, not fitted to any table: a *slip* -- an action that contradicts what the
agent or critic can itself see (a wrong-scope, wrong or repeated call, a miscomputed or corrupted
value, a cited id that is not there, a prose reply, accepting a problem it noticed, rejecting a proposal in which
it found none) -- happens once in twenty (0.05); a *disposition* that nothing in the view
settles (finish now or gather more, submit the draft or compose anew, follow the directive,
escalate a conflict, redo the arithmetic, call a repeat stuck) is a coin flip (0.5). The
self-check's approval of a flawed answer is a slip too.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import date, timedelta
from typing import TYPE_CHECKING, Annotated, Any

from runner.canonical import JsonRecord, RecordFormatError, canonical_bytes
from runner.ect import (
    CERTIFICATE_FORMAT,
    Contract,
    Ledger,
    Receipt,
    SlotSpec,
    Transform,
    descriptor_digest,
    is_iso_date,
    ledger_digest,
    replay,
)
from runner.errors import FormatError
from runner.policies._actions import ESCALATE_TOOL, FINISH_TOOL
from runner.policies._common import call_key
from runner.policies._registry import CRITICS
from runner.policies._views import CRITIC_VIEW_FORMAT, PLANNER_VIEW_FORMAT, extract_view
from runner.providers import FunctionCall, ProviderRequest
from runner.worlds import plan_calls, propose_certificate

if TYPE_CHECKING:
    from runner.providers import Responder, SimulatedReply

__all__ = ["CriticBehaviour", "PlannerBehaviour", "simulated_responder"]


def _probability(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatError(f"simulated behaviour {name}: expected a number in [0, 1]")
    if not 0.0 <= float(value) <= 1.0:
        raise FormatError(f"simulated behaviour {name}: {value} is outside [0, 1]")
    return float(value)


def _read_probability(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordFormatError(path, "expected a number in [0, 1]")
    if not 0.0 <= float(value) <= 1.0:
        raise RecordFormatError(path, f"{value} is outside [0, 1]")
    return float(value)


Probability = Annotated[float, _read_probability]


class _Params(JsonRecord):
    """A record of probabilities (every field is ``p_*``); read strictly, an absent one taking
    its default."""

    __slots__ = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _probability(f.name, getattr(self, f.name)))

    @classmethod
    def _object_of(cls, obj: object, path: str, allowed: tuple[str, ...],
                   required: tuple[str, ...]) -> Mapping[str, Any]:
        if isinstance(obj, Mapping):  # a parameter left out takes its default
            obj = {**{f.name: f.default for f in fields(cls)}, **obj}
        return super()._object_of(obj, path, allowed, required)


_SLIP = 0.05  # an action contradicting what the actor itself can see: one in twenty
_COIN = 0.5  # a disposition nothing in the view settles: no basis to prefer either way


@dataclass(frozen=True)
class PlannerBehaviour(_Params):
    """Probabilities of the simulated planner's behaviours (defaults: see module docstring)."""

    _path = "PlannerBehaviour"

    p_premature_finish: Probability = _COIN
    p_reuse_draft: Probability = _COIN
    p_wrong_scope_call: Probability = _SLIP
    p_corrupt_value: Probability = _SLIP
    p_cite_missing_receipt: Probability = _SLIP
    p_repeat_call: Probability = _SLIP
    p_wrong_call: Probability = _SLIP
    p_arithmetic_error: Probability = _SLIP
    p_follow_directive: Probability = _COIN
    p_escalate_on_conflict: Probability = _COIN
    p_invalid_output: Probability = _SLIP


@dataclass(frozen=True)
class CriticBehaviour(_Params):
    """Probabilities of the simulated critics' behaviours (defaults: see module docstring)."""

    _path = "CriticBehaviour"

    p_accept_unsupported: Probability = _SLIP
    p_reject_supported: Probability = _SLIP
    p_stuck_on_repeat: Probability = _COIN
    p_notice_value_mismatch: Probability = _COIN
    p_self_approve_flawed: Probability = _SLIP


def simulated_responder(planner: PlannerBehaviour, critic: CriticBehaviour) -> Responder:
    """A responder for ``SimulatedProvider``: planner requests get one function call, critic and
    self-check requests a JSON verdict. A request without a readable view gets a text reply
    saying so (the caller then sees an InvalidAction / unparseable verdict, never a crash)."""

    def respond(request: ProviderRequest, rng: random.Random) -> SimulatedReply:
        try:
            fmt, view = extract_view(_last_user_text(request))
        except FormatError:
            return _text_reply("I cannot read the task view in this request.")
        if request.role == "planner" and fmt == PLANNER_VIEW_FORMAT:
            return _plan(view, rng, planner)
        if request.role in ("critic", "self_check") and fmt == CRITIC_VIEW_FORMAT:
            return _judge(view, rng, critic)
        return _text_reply(f"unexpected request role {request.role!r} for view {fmt!r}")

    return respond


# --- reply construction ----------------------------------------------------------------------


def _last_user_text(request: ProviderRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            texts = [p.text for p in message.parts if p.text is not None]
            if texts:
                return "\n".join(texts)
    return ""


def _reply(**fields: Any) -> SimulatedReply:
    # the simulated provider's module loads the HTTP stack (httpx): only a run needs it, not
    # reading the behaviour tables (the study's spec, lock and preflight)
    from runner.providers import SimulatedReply

    return SimulatedReply(**fields)


def _text_reply(text: str) -> SimulatedReply:
    return _reply(text=text)


def _call_reply(name: str, args: dict[str, Any]) -> SimulatedReply:
    return _reply(function_calls=(FunctionCall(name, args, "sim-call-1"),))


def _verdict_reply(verdict: str, why: str) -> SimulatedReply:
    obj = {"verdict": verdict, "reason": why}
    return _reply(text=canonical_bytes(obj).decode("utf-8"), structured=obj)


# --- the planner -----------------------------------------------------------------------------


def _receipt_ok(r: Receipt) -> bool:
    return r.exec_status == "ok" and r.validation == "valid"


def _missing_calls(
    contract: Contract, ledger: Ledger, trace: list[dict[str, Any]]
) -> list[tuple[str, dict[str, Any]]]:
    """The planned calls for the slots the honest proposal cannot support yet.

    A slot is missing when :func:`runner.worlds.propose_certificate` leaves it out or cites fewer
    receipts than the slot's cardinality minimum; its calls are
    those :func:`runner.worlds.plan_calls` makes for it, minus calls already made whose receipts
    all succeeded and validated (a failed or stale answer is worth asking again).
    """
    try:
        cited = {c.slot: len(c.evidence) for c in propose_certificate(contract, ledger).claims}
    except Exception:
        cited = {}
    missing = {
        s: spec
        for s, spec in contract.slots.items()
        if s not in cited or (spec.cardinality is not None and cited[s] < spec.cardinality.min)
    }
    if not missing:
        return []
    by_call: dict[str, list[Receipt]] = {}
    for r in ledger.receipts:
        by_call.setdefault(r.call_id, []).append(r)
    satisfied = set()
    for call in trace:
        receipts = by_call.get(call.get("call_id", ""), [])
        if receipts and all(_receipt_ok(r) for r in receipts):
            satisfied.add(call_key(call.get("tool_id", ""), call.get("args", {})))
    needed = dataclasses.replace(contract, slots=missing)
    return [
        (tool_id, dict(args))
        for tool_id, args in plan_calls(needed)
        if call_key(tool_id, args) not in satisfied
    ]


def _conflicting(ledger: Ledger) -> bool:
    seen: dict[tuple[Any, ...], bytes] = {}
    for r in ledger.receipts:
        if not _receipt_ok(r):
            continue
        v = canonical_bytes(r.value)
        if seen.setdefault(r.scope.key, v) != v:
            return True
    return False


def _in_scope(spec: SlotSpec, r: Receipt) -> bool:
    sc, rs = spec.scope, r.scope
    if sc.entity is not None and rs.entity not in sc.entity:
        return False
    if sc.attribute is not None and rs.attribute not in sc.attribute:
        return False
    if sc.level is not None and rs.level not in sc.level:
        return False
    # Membership receipts (attribute "parent") are timeless.
    return sc.dates is None or rs.attribute == "parent" or (rs.date is not None and rs.date in sc.dates)


def _fluent_claim(slot: str, spec: SlotSpec, ledger: Ledger) -> dict[str, Any]:
    """A claim that *looks* complete: the receipts that look closest, the first permitted op."""
    receipts = list(ledger.receipts)
    attr = [r for r in receipts if spec.scope.attribute is None or r.scope.attribute in spec.scope.attribute]
    pool = [r for r in attr if _in_scope(spec, r)] or attr or receipts
    if spec.cardinality is not None and spec.cardinality.max > 0:
        pool = pool[: spec.cardinality.max]
    transform = spec.transforms[0]
    value: Any = None
    if pool:
        try:
            value = replay(transform, pool)
        except Exception:
            value = pool[0].value
    return {
        "slot": slot,
        "value": value,
        "evidence": [r.receipt_id for r in pool],
        "transform": transform.to_json(),
    }


def _certificate(
    contract: Contract, ledger: Ledger, draws: _Draws, p: PlannerBehaviour
) -> dict[str, Any]:
    """The certificate the planner composes, with its own arithmetic and slips.

    Which receipts to cite and which transform to use come from
    :func:`runner.worlds.propose_certificate` (slots it cannot support are filled fluently). The
    value of a derived claim (any op but ``identity``) is the planner's own arithmetic: wrong
    (:func:`_corrupt` of the right value) when the slot's arithmetic draw is below
    ``p_arithmetic_error``. Then one claim's value is corrupted (``p_corrupt_value``) and one
    claim cites an unrecorded receipt id (``p_cite_missing_receipt``). Every slip compares its
    own draw with its own rate, so a higher rate only adds slips to the same draws; a value that
    slips twice is corrupted once (two slips never cancel out).
    """
    claims: dict[str, dict[str, Any]] = {}
    try:
        proposed = propose_certificate(contract, ledger)
        for c in proposed.claims:
            claims.setdefault(c.slot, c.to_json())
    except Exception:  # propose_certificate may refuse an unsupported ledger: stay fluent
        claims = {}
    for slot, spec in contract.slots.items():
        if slot not in claims:
            claims[slot] = _fluent_claim(slot, spec, ledger)
    required = list(contract.descriptor.required_slots)
    out = [claims[s] for s in required]
    wrong = {
        i for i, c in enumerate(out)
        if c.get("transform", {}).get("op") != "identity"
        and draws.arithmetic[i % len(draws.arithmetic)] < p.p_arithmetic_error
    }
    if out and draws.corrupt < p.p_corrupt_value:
        wrong.add(_pick(draws.corrupt_pick, len(out)))
    for i in sorted(wrong):
        out[i] = {**out[i], "value": _corrupt(out[i]["value"])}
    if out and draws.cite_missing < p.p_cite_missing_receipt:
        i = _pick(draws.cite_pick, len(out))
        known = {r.receipt_id for r in ledger.receipts}
        forged = next(f"r-unrecorded-{n}" for n in range(len(known) + 1) if f"r-unrecorded-{n}" not in known)
        out[i] = {**out[i], "evidence": [*out[i]["evidence"][:-1], forged]}
    return {
        "format": CERTIFICATE_FORMAT,
        "task_id": contract.task_id,
        "descriptor_digest": descriptor_digest(contract.descriptor),
        "ledger_digest": ledger_digest(ledger),
        "claims": out,
    }


def _corrupt(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.1 + 1.0
    if isinstance(value, list):
        return list(reversed(value)) if len(set(map(repr, value))) > 1 else [*value, value[0]] if value else [0]
    if isinstance(value, str):
        return value + "-x"
    return 0


def _pick(u: float, n: int) -> int:
    """An index in ``range(n)`` from one uniform draw."""
    return min(int(u * n), n - 1)


def _shift_date(day: str) -> str:
    return (date.fromisoformat(day) + timedelta(days=1)).isoformat()


def _wrong_scope(args: dict[str, Any], ledger: Ledger, u: float) -> dict[str, Any]:
    out = dict(args)
    dated = [k for k in ("date", "start", "end") if is_iso_date(out.get(k))]
    if dated:
        for k in dated:
            out[k] = _shift_date(out[k])
        return out
    if isinstance(out.get("entity"), str):
        others = sorted({r.scope.entity for r in ledger.receipts if r.scope.entity} - {out["entity"]})
        if others:
            out["entity"] = others[_pick(u, len(others))]
    return out


_ATTRIBUTES = ("units", "revenue", "returns")  # the tool schemas' attribute enum
_LEVELS = ("region", "store")


def _wrong_call(tool_id: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A call that does not answer the slot it was meant for: the next attribute of the tool
    schemas' enum (same entity and dates), the other level of ``list_entities``, or a listing
    instead of ``get_parent``."""
    out = dict(args)
    if out.get("attribute") in _ATTRIBUTES:
        out["attribute"] = _ATTRIBUTES[(_ATTRIBUTES.index(out["attribute"]) + 1) % len(_ATTRIBUTES)]
        return tool_id, out
    if tool_id == "list_entities" and out.get("level") in _LEVELS:
        out["level"] = _LEVELS[(_LEVELS.index(out["level"]) + 1) % len(_LEVELS)]
        return tool_id, out
    if tool_id == "get_parent":
        return "list_entities", {"level": "region"}
    return tool_id, out


@dataclass(frozen=True)
class _Draws:
    """Every uniform one planner reply may use, drawn up front in a fixed order whatever the
    parameters (coupled draws: a behaviour happens when its own draw is below its rate, so
    raising one rate adds that behaviour to the same draws and changes no other draw)."""

    invalid: float
    escalate: float
    follow: float
    premature: float
    reuse: float
    repeat: float
    wrong_call: float
    wrong_scope: float
    scope_pick: float
    corrupt: float
    corrupt_pick: float
    cite_missing: float
    cite_pick: float
    arithmetic: tuple[float, ...]  # one per required slot, in the descriptor's order

    @classmethod
    def draw(cls, rng: random.Random, slots: int) -> _Draws:
        names = [f.name for f in fields(cls) if f.name != "arithmetic"]
        scalars = {name: rng.random() for name in names}  # in the fields' (fixed) order
        return cls(**scalars, arithmetic=tuple(rng.random() for _ in range(max(slots, 1))))


def _plan(view: Any, rng: random.Random, p: PlannerBehaviour) -> SimulatedReply:
    try:
        contract = Contract.from_json(view["contract"])
        ledger = Ledger.from_json(view["ledger"])
        trace = [c for c in view["trace"] if isinstance(c, dict)]
        calls_left = int(view["budget"]["calls_left"])
        directive = view.get("directive")
        draft = view.get("draft")
        draft = dict(draft) if isinstance(draft, Mapping) else None
    except Exception:
        return _text_reply("The task view is malformed; I cannot plan.")

    d = _Draws.draw(rng, len(contract.descriptor.required_slots))
    if d.invalid < p.p_invalid_output:
        return _text_reply("I believe the task is complete.")
    if _conflicting(ledger) and d.escalate < p.p_escalate_on_conflict:
        return _call_reply(
            ESCALATE_TOOL, {"question": "Two receipts for the same scope disagree; which is right?"}
        )
    # Following a directive changes what the planner does with what it knows (it does not
    # finish early, does not fall back on its draft); it never stops it from slipping.
    following = bool(directive) and d.follow < p.p_follow_directive
    missing = _missing_calls(contract, ledger, trace)
    if missing and calls_left > 0:
        if not following and d.premature < p.p_premature_finish:
            if draft is not None and d.reuse < p.p_reuse_draft:
                return _call_reply(FINISH_TOOL, {"certificate": _from_draft(draft, ledger)})
            return _call_reply(FINISH_TOOL, {"certificate": _strip_format(_certificate(contract, ledger, d, p))})
        tool_id, args = missing[0]
        if trace and d.repeat < p.p_repeat_call:
            tool_id, args = str(trace[-1]["tool_id"]), dict(trace[-1]["args"])
        elif d.wrong_call < p.p_wrong_call:
            tool_id, args = _wrong_call(tool_id, args)
        elif d.wrong_scope < p.p_wrong_scope_call:
            args = _wrong_scope(args, ledger, d.scope_pick)
        return _call_reply(tool_id, args)

    if not following and draft is not None and d.reuse < p.p_reuse_draft:
        return _call_reply(FINISH_TOOL, {"certificate": _from_draft(draft, ledger)})
    return _call_reply(FINISH_TOOL, {"certificate": _strip_format(_certificate(contract, ledger, d, p))})


def _from_draft(draft: dict[str, Any], ledger: Ledger) -> dict[str, Any]:
    """The draft as submitted: its claims untouched, the current ledger digest from the view."""
    return {**_strip_format(draft), "ledger_digest": ledger_digest(ledger)}


def _strip_format(cert: dict[str, Any]) -> dict[str, Any]:
    # The finish declaration's certificate has no format tag (the parser adds the envelope).
    return {k: v for k, v in cert.items() if k != "format"}


# --- the critics -----------------------------------------------------------------------------


def _problems(view: Mapping[str, Any], rng: random.Random, notice_arithmetic: float) -> list[str]:
    """What a careful reader of the view would object to (empty: nothing noticed)."""
    problems: list[str] = []
    proposal = view.get("proposal")
    if not view.get("finish_requested"):
        problems.append("the agent has not asked to finish")
    if not isinstance(proposal, Mapping):
        return [*problems, "there is no proposed answer"]
    required = list(view["task"]["descriptor"]["required_slots"])
    claims = [c for c in proposal.get("claims") or [] if isinstance(c, Mapping)]
    by_slot = {c.get("slot"): c for c in claims}
    problems += [f"slot {s} has no claim" for s in required if s not in by_slot]
    kind = view.get("kind")
    critic = CRITICS.get(kind) if isinstance(kind, str) else None
    if critic is not None and critic.sees == "answer":  # the self-check: its own answer only
        problems += [f"claim {c.get('slot')} cites no evidence" for c in claims if not c.get("evidence")]
        return problems
    try:
        contract = Contract.from_json(view["contract"])
        receipts = {r.receipt_id: r for r in Ledger.from_json(view["ledger"]).receipts}
    except Exception:
        return [*problems, "the task view is unreadable"]
    for slot, claim in by_slot.items():
        spec = contract.slots.get(slot) if isinstance(slot, str) else None
        if spec is None:
            continue
        cited = [e for e in claim.get("evidence") or [] if isinstance(e, str)]
        if not cited:
            problems.append(f"claim {slot} cites no evidence")
        elif spec.cardinality is not None and len(set(cited)) < spec.cardinality.min:
            problems.append(f"claim {slot} cites fewer receipts than the task needs")
        for rid in cited:
            r = receipts.get(rid)
            if r is None:
                problems.append(f"claim {slot} cites {rid}, which was never recorded")
            elif not _receipt_ok(r):
                problems.append(f"claim {slot} cites {rid}, whose call failed")
            elif not _in_scope(spec, r):
                problems.append(f"claim {slot} cites {rid}, which is about something else")
        transform = claim.get("transform")
        if not isinstance(transform, Mapping) or not cited or any(e not in receipts for e in cited):
            continue
        if transform.get("op") == "identity":
            if len(cited) == 1 and receipts[cited[0]].value != claim.get("value"):
                problems.append(f"claim {slot} does not match the value it cites")
        elif rng.random() < notice_arithmetic:  # it redoes the arithmetic only sometimes
            try:
                value = replay(Transform.from_json(dict(transform)), [receipts[e] for e in cited])
            except Exception:
                value = None
            if canonical_bytes(value) != canonical_bytes(claim.get("value")):
                problems.append(f"claim {slot}: recomputing from the cited values gives {value!r}")
    return problems


def _repeats(trace: Any) -> bool:
    if not isinstance(trace, list) or len(trace) < 2:
        return False
    keys = [call_key(str(c.get("tool_id")), c.get("args") or {}) for c in trace if isinstance(c, dict)]
    return len(keys) >= 2 and keys[-1] == keys[-2]


def _judge(view: Any, rng: random.Random, c: CriticBehaviour) -> SimulatedReply:
    kind = view.get("kind") if isinstance(view, Mapping) else None
    try:
        problems = _problems(view, rng, c.p_notice_value_mismatch)
    except Exception:
        problems = ["the task view is unreadable"]
    if kind == "self_check":
        if problems and rng.random() >= c.p_self_approve_flawed:
            return _verdict_reply("REVISE", problems[0])
        return _verdict_reply("APPROVED", "My answer covers the task and cites its evidence.")
    spec = CRITICS.get(kind) if isinstance(kind, str) else None
    if (spec is not None and spec.simulated_stuck_on_repeat and _repeats(view.get("trace"))
            and rng.random() < c.p_stuck_on_repeat):
        return _verdict_reply("stuck", "The agent repeats the same call without progress.")
    if problems:
        if rng.random() < c.p_accept_unsupported:
            return _verdict_reply("accept", "The answer is complete and well supported.")
        return _verdict_reply("reject", problems[0])
    if rng.random() < c.p_reject_supported:
        return _verdict_reply("reject", "The evidence may not be sufficient; verify the values again.")
    return _verdict_reply("accept", "Every required slot is answered from recorded evidence.")
