"""``ect replay``: re-score every cell from the store alone (DESIGN §6 "Blobs").

For each committed cell the trajectory is run again with the same code, but the provider is a
replay of the stored raw responses (each request the engine rebuilds must hash to the recorded
request digest, so the planner saw exactly what it saw the first time) and the tools are a replay
of the recorded tool responses. The cell is re-scored and its result digest compared with the
recorded one. No network, no credential and no sandbox child are needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from runner.canonical import loads_strict
from runner.errors import StudyError
from runner.study._execute import cell_result_digest
from runner.study._spec import file_sha256, load_spec

__all__ = ["ReplayDiverged", "ReplayRefused", "ReplayReport", "replay_store"]


class ReplayDiverged(StudyError):
    """The replayed trajectory asked for something the recorded one did not."""


class ReplayRefused(StudyError):
    """The store does not verify in full: nothing recorded in it can be trusted to replay."""


@dataclass
class ReplayReport:
    cells: int = 0
    reproduced: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"cells": self.cells, "reproduced": self.reproduced,
                "mismatches": self.mismatches}


def _attempt(obj: dict[str, Any]) -> Any:
    from runner.providers import AttemptRecord, Usage

    fields = dict(obj)
    fields["usage"] = Usage(**obj["usage"]) if obj.get("usage") is not None else None
    return AttemptRecord(**fields)


def _response_from_json(raw: bytes) -> Any:
    """A ProviderResponse from the canonical JSON the run stored (``ProviderResponse.to_json``)."""
    from runner.providers import FunctionCall, Message, Part, ProviderResponse, Usage

    obj = loads_strict(raw)
    calls = tuple(FunctionCall(c["name"], c["args"], c.get("id")) for c in obj["function_calls"])
    parts = ([Part.of_text(obj["text"])] if obj["text"] is not None else [])
    parts.extend(Part(function_call=c) for c in calls)
    return ProviderResponse(
        text=obj["text"], structured=obj["structured"], function_calls=calls,
        finish_reason=obj["finish_reason"], usage=Usage(**obj["usage"]),
        model_version=obj["model_version"], response_id=obj["response_id"],
        provider=obj["provider"], simulated=obj["simulated"],
        message=Message("model", tuple(parts)),
    )


class _ReplayProvider:
    def __init__(self, calls: list[dict[str, Any]], store: Any, header: dict[str, Any]) -> None:
        self._calls = list(calls)
        self._store = store
        self.name = header.get("provider", "simulated")
        self.model = "replay"
        self.simulated = self.name == "simulated"

    async def generate(self, request: Any, *, observer: Any = None) -> Any:
        from runner.providers import ProviderFailure, ProviderResult, RawExchange

        if not self._calls:
            raise ReplayDiverged("the replay asked the provider more often than the run did")
        call = self._calls.pop(0)
        sent = file_sha256(request.canonical())  # as the run's _Journaled recorded it
        attempts = tuple(_attempt(a) for a in call["attempts"])
        if call["request"] != sent:
            raise ReplayDiverged("the rebuilt request differs from the recorded one "
                                 f"({sent} != {call['request']})")
        raw = tuple(RawExchange(self._store.get_blob(x["request"]),
                                self._store.get_blob(x["response"]) if x["response"] else None)
                    for x in call["raw"])
        if call["ok"]:
            parsed = self._store.get_blob(call["parsed"])
            return ProviderResult(_response_from_json(parsed), None, attempts, raw)
        f = call["failure"]
        failure = ProviderFailure(f["kind"], f["detail"], f.get("status"), f.get("retry_after_s"),
                                  f.get("error_class"))
        return ProviderResult(None, failure, attempts, raw)


async def _replay_cell(body: dict[str, Any], store: Any, header: dict[str, Any],
                       checkpoints: dict[str, Any], spec: Any) -> str:
    from runner.study._execute import _record_result, run_cell_trajectory

    row = body["schedule_row"]
    provider = _ReplayProvider(body["audit"]["calls"], store, header)
    tools = [d for d in body["result"]["decisions"] if d["verdict"] in ("executed", "tool_failed")]

    async def execute_tool(world_id: str, tool_id: str, args: dict[str, Any]) -> dict[str, Any]:
        if not tools:
            raise ReplayDiverged("the replay made a tool call the run did not make")
        d = tools.pop(0)
        if d["action"].get("tool_id") != tool_id or d["action"].get("args") != args:
            raise ReplayDiverged(f"tool call {tool_id} differs from the recorded one")
        if d["verdict"] == "tool_failed":
            from runner.sandbox import WorkerFailed

            raise WorkerFailed(d["tool_error"])
        response: dict[str, Any] = d["tool_response"]
        return response

    trajectory = await run_cell_trajectory(spec, row, checkpoints[row["checkpoint_id"]],
                                           provider, execute_tool)
    result = _record_result(row, trajectory, simulated=bool(header.get("simulated")))
    return cell_result_digest(result)


def replay_store(store_path: Path, spec_path: Path | None = None, *,
                 on_cell: Callable[[int, int], None] | None = None) -> ReplayReport:
    """Replay every committed cell of ``store_path`` and compare result digests.

    ``on_cell(done, total)`` is called after each cell (for progress output).
    """
    from runner.store import Store, verify_store
    from runner.worlds import closed_loop_checkpoints

    verified = verify_store(store_path, full=True)
    if not verified.ok:
        raise ReplayRefused(f"{store_path} does not verify: {verified.damage} at seq "
                            f"{verified.first_bad_seq} ({verified.detail}); nothing was replayed")
    report = ReplayReport()
    checkpoints = {c.checkpoint_id: c for c in closed_loop_checkpoints()}
    with Store.open(store_path, readonly=True) as store:
        header = dict(store.header)
        spec = load_spec(spec_path or header.get("spec") or "schedules/v2.toml")
        total = store.count - 1  # every record after the header is a cell
        for rec in store.records(1):
            if on_cell is not None and report.cells:
                on_cell(report.cells, total)
            body = rec.body
            report.cells += 1
            if cell_result_digest(body["result"]) != body["result_digest"]:
                report.mismatches.append({"row": body["row"], "cell_id": body["cell_id"],
                                          "detail": "the recorded result does not match its "
                                                    "result_digest"})
                continue
            try:
                got = anyio.run(_replay_cell, body, store, header, checkpoints, spec)
            except ReplayDiverged as e:
                report.mismatches.append({"row": body["row"], "cell_id": body["cell_id"],
                                          "detail": str(e)})
                continue
            if got == body["result_digest"]:
                report.reproduced += 1
            else:
                report.mismatches.append({"row": body["row"], "cell_id": body["cell_id"],
                                          "detail": f"result digest {got} != recorded "
                                                    f"{body['result_digest']}"})
        if on_cell is not None:
            on_cell(report.cells, total)
    return report
