"""Planner I/O: the request a planner decision is made from, and the action parsed out of it.

A planner request is stateless: one user message carrying the whole :class:`PlannerView`, the
frozen planner prompt as the system text, and one function declaration per synthetic tool plus
``finish`` (its argument is the certificate proposal) and ``escalate``. The planner answers with
exactly one function call. :func:`parse_planner_action` never raises: anything malformed is an
:class:`InvalidAction` that the trajectory engine counts as a wasted decision.

Each action owns its JSON form (``to_json``, tagged by ``kind``: what a cell record keeps of a
decision) and reads it back strictly (:func:`action_from_json`). :class:`CellIdentity` is which
cell a request belongs to; it writes the request's ``metadata``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from runner.canonical import (
    JsonObject,
    JsonRecord,
    RecordFormatError,
    key,
    read_object,
    read_str,
)
from runner.ect import CERTIFICATE_FORMAT
from runner.policies._prompts import load_prompt
from runner.policies._views import PlannerView
from runner.providers import GenerationConfig, Message, ProviderRequest, ProviderResponse, ToolDecl
from runner.worlds.tools import TOOL_SCHEMAS

__all__ = [
    "ESCALATE_TOOL",
    "FINISH_TOOL",
    "CellIdentity",
    "EscalateAction",
    "FinishAction",
    "InvalidAction",
    "PlannerAction",
    "ToolCallAction",
    "action_from_json",
    "build_planner_request",
    "parse_planner_action",
    "planner_tool_decls",
]

FINISH_TOOL = "finish"
ESCALATE_TOOL = "escalate"


@dataclass(frozen=True, slots=True)
class CellIdentity:
    """Which cell a provider request belongs to: its cell id and derived seed (never labels).

    It travels through the loop, the pipelines and the critics instead of a metadata dict, and
    writes the request's ``metadata`` mapping (:meth:`metadata`), so request bytes stay what
    they were: ``{"cell_id", "seed"}`` plus, per request, the decision and the critic kind.
    """

    cell_id: str
    seed: int

    def metadata(self, *, decision: int | None = None,
                 critic: str | None = None) -> dict[str, str | int]:
        """The request ``metadata`` of one request of this cell."""
        out: dict[str, str | int] = {"cell_id": self.cell_id, "seed": self.seed}
        if critic is not None:
            out["critic"] = critic
        if decision is not None:
            out["decision"] = decision
        return out


@dataclass(frozen=True)
class ToolCallAction(JsonRecord):
    """Call synthetic tool ``tool_id`` with ``args`` (not yet validated against its schema)."""

    kind: str = field(default="tool_call", init=False)  # the record's tag
    tool_id: str
    args: JsonObject

    KIND: ClassVar[str] = "tool_call"
    _path = "action"


@dataclass(frozen=True)
class FinishAction(JsonRecord):
    """Stop, proposing ``certificate_obj`` (raw JSON; the pipeline decides what it is worth)."""

    kind: str = field(default="finish", init=False)  # the record's tag
    certificate_obj: JsonObject = field(metadata=key("certificate"))

    KIND: ClassVar[str] = "finish"
    _path = "action"


@dataclass(frozen=True)
class EscalateAction(JsonRecord):
    """Hand the run to a human with ``question``."""

    kind: str = field(default="escalate", init=False)  # the record's tag
    question: str

    KIND: ClassVar[str] = "escalate"
    _path = "action"


@dataclass(frozen=True)
class InvalidAction(JsonRecord):
    """The response was not one well-formed action; ``detail`` says why (one line)."""

    kind: str = field(default="invalid", init=False)  # the record's tag
    detail: str

    KIND: ClassVar[str] = "invalid"
    _path = "action"


PlannerAction = ToolCallAction | FinishAction | EscalateAction | InvalidAction

_ACTION_KINDS: dict[str, type[PlannerAction]] = {
    t.KIND: t for t in (ToolCallAction, FinishAction, EscalateAction, InvalidAction)}


def action_from_json(obj: object, path: str = "action") -> PlannerAction:
    """The action a decision record holds, read strictly by its ``kind``.

    Raises:
        RecordFormatError: not an object, an unknown ``kind``, a missing or unknown field, or a
            field of the wrong type (the message names the path).
    """
    if not isinstance(obj, dict):
        read_object(obj, path, ())  # raises, naming what was found
    assert isinstance(obj, dict)
    if "kind" not in obj:
        raise RecordFormatError(path, "missing field 'kind'")
    kind = read_str(obj["kind"], f"{path}.kind")
    action_type = _ACTION_KINDS.get(kind)
    if action_type is None:
        raise RecordFormatError(f"{path}.kind", f"unknown action kind {kind[:40]!r}")
    return action_type.from_json(obj, path)


_VALUE_SCHEMA: dict[str, Any] = {
    "description": "a number, a string, null, or a flat list of those",
}
_WINDOW_OR_DATE: dict[str, Any] = {
    "description": "an ISO date YYYY-MM-DD, or a window object {start, end} of ISO dates",
}
_CERTIFICATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task_id": {"type": "string"},
        "descriptor_digest": {"type": "string", "description": "copied from the view"},
        "ledger_digest": {"type": "string", "description": "copied from the view"},
        "claims": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "slot": {"type": "string"},
                    "value": _VALUE_SCHEMA,
                    "evidence": {"type": "array", "items": {"type": "string"}},
                    "transform": {
                        "type": "object",
                        "properties": {
                            "op": {"type": "string"},
                            "params": {
                                "type": "object",
                                "description": "exactly the op's parameters, as the contract lists them",
                                "properties": {
                                    "k": {"type": "integer"},
                                    "order": {"type": "string", "enum": ["asc", "desc"]},
                                    "a": _WINDOW_OR_DATE,
                                    "b": _WINDOW_OR_DATE,
                                },
                            },
                        },
                        "required": ["op", "params"],
                    },
                },
                "required": ["slot", "value", "evidence", "transform"],
            },
        },
    },
    "required": ["task_id", "descriptor_digest", "ledger_digest", "claims"],
}


def planner_tool_decls() -> tuple[ToolDecl, ...]:
    """One declaration per synthetic tool (sorted by id), then ``finish`` and ``escalate``."""
    decls = [
        ToolDecl(name=tid, description=str(spec["description"]), parameters=dict(spec["args"]))
        for tid, spec in sorted(TOOL_SCHEMAS.items())
    ]
    decls.append(
        ToolDecl(
            name=FINISH_TOOL,
            description="Stop and propose a certificate binding every required slot to receipts.",
            parameters={
                "type": "object",
                "properties": {"certificate": _CERTIFICATE_SCHEMA},
                "required": ["certificate"],
            },
        )
    )
    decls.append(
        ToolDecl(
            name=ESCALATE_TOOL,
            description="Hand the run to a human, with one question, when evidence conflicts.",
            parameters={
                "type": "object",
                "properties": {"question": {"type": "string"}},
                "required": ["question"],
            },
        )
    )
    return tuple(decls)


def build_planner_request(
    view: PlannerView, generation: GenerationConfig, cell: CellIdentity
) -> ProviderRequest:
    """The request for decision ``view.decision`` of ``cell`` (role ``"planner"``)."""
    return ProviderRequest(
        role="planner",
        system=load_prompt("planner"),
        messages=(Message.user_text(view.render()),),
        tools=planner_tool_decls(),
        response_schema=None,
        generation=generation,
        metadata=cell.metadata(decision=view.decision),
    )


def parse_planner_action(response: ProviderResponse | None) -> PlannerAction:
    """The one action in ``response``; never raises (malformed => :class:`InvalidAction`)."""
    try:
        return _parse(response)
    except Exception as e:  # a hostile response must never crash the trajectory engine
        return InvalidAction(f"unparseable planner response ({type(e).__name__})")


def _parse(response: ProviderResponse | None) -> PlannerAction:
    if response is None:
        return InvalidAction("no response")
    calls = tuple(response.function_calls or ())
    if not calls:
        return InvalidAction("no function call in the response")
    if len(calls) > 1:
        return InvalidAction(f"{len(calls)} function calls in one response; exactly one is allowed")
    call = calls[0]
    name, args = call.name, call.args
    if not isinstance(args, Mapping):
        return InvalidAction(f"arguments of {name!r} are not an object")
    args = dict(args)
    if not all(isinstance(k, str) for k in args):
        return InvalidAction(f"arguments of {name!r} have a non-string key")
    if name == FINISH_TOOL:
        cert = args.get("certificate")
        if set(args) != {"certificate"} or not isinstance(cert, Mapping):
            return InvalidAction("finish takes exactly one object argument 'certificate'")
        cert = dict(cert)
        # Only the envelope tag is filled in; task, digests and transforms stay the planner's.
        cert.setdefault("format", CERTIFICATE_FORMAT)
        return FinishAction(cert)
    if name == ESCALATE_TOOL:
        question = args.get("question")
        if set(args) != {"question"} or not isinstance(question, str) or not question.strip():
            return InvalidAction("escalate takes exactly one non-empty string 'question'")
        return EscalateAction(question)
    if isinstance(name, str) and name in TOOL_SCHEMAS:
        return ToolCallAction(name, args)
    return InvalidAction(f"unknown function {str(name)[:60]!r}")
