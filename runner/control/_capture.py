"""Capture: turn a run record (``ect.run-record/1``) into an eval case that replays the run.

:func:`capture_case` reads a :meth:`RunResult.to_json` record strictly (errors name the field
path) and writes an ``ect.stop-eval/1`` case (``runner/control/_evalcase.py``): the same
controls, the model's actions turn by turn with their usage, the tool results in order, the
finish verdicts, and the calls a deadline cut off (they never answer in the replay).
"""

from __future__ import annotations

from typing import Any

from runner.control._evalcase import (
    EVAL_FORMAT,
    MAX_EVAL_SECONDS,
    EvalCase,
    _Reader,
)
from runner.control._types import (
    StopReason,
    display,
)

__all__ = ["capture_case"]


def _cut_call(r: _Reader, record: dict[str, Any], condition: Any,
              last: dict[str, Any] | None) -> str | None:
    """The tool of the last step's call when a deadline cancelled it mid-call (a tool timeout,
    or the run's time budget running out in it), else None."""
    call = (last or {}).get("call")
    if not isinstance(condition, dict) or not isinstance(call, dict):
        return None
    tool = call.get("tool")
    if condition.get("type") == "ToolTimeout":
        return tool if isinstance(tool, str) else None
    detail = r.typed(record["stop"].get("detail", ""), "$.stop.detail", str, "a string")
    if condition.get("type") == "MaxTime" and isinstance(tool, str) and detail.endswith(f" in {tool}"):
        return tool
    return None


def _cut_decide(record: dict[str, Any], condition: Any) -> bool:
    """True when the run's time budget ran out while it waited for the model."""
    detail = record["stop"].get("detail")
    return (isinstance(condition, dict) and condition.get("type") == "MaxTime"
            and isinstance(detail, str) and detail.endswith(" waiting for decide"))


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None}


def capture_case(record: Any, *, case_id: str | None = None,
                 expect: StopReason | str | None = None, source: str = "<record>") -> dict[str, Any]:
    """Turn a run record (``RunResult.to_json()``, format ``ect.run-record/1``) into an eval
    case (``ect.stop-eval/1``) that replays the run: the same controls, the model's actions
    turn by turn (with their usage), the tool results in order, and the finish verdicts.

    ``expect`` is the stop the run *should* have ended with (default: the one it ended with, so
    the case pins today's behaviour). Stopping rules are replayed as "this key is known in the
    folded state" predicates (the eval harness folds object results into the state).

    Raises:
        EvalCaseError: the record is not a run record, or lacks what a replay needs.
    """
    r = _Reader(source)
    if not isinstance(record, dict) or record.get("format") != "ect.run-record/1":
        raise r.fail("$.format", "must be 'ect.run-record/1' (a RunResult.to_json() record)")
    r.has(record, "$", ("run_id", "stop", "steps", "trace", "controls", "usage", "task"))
    stop = r.has(record["stop"], "$.stop", ("reason",))  # (a record carries more than a replay reads)
    recorded = r.reason(stop["reason"], "$.stop.reason")
    controls = r.has(record["controls"], "$.controls", ("budget", "no_progress", "tool_failure"))
    trace = r.typed(record["trace"], "$.trace", list, "a list")
    usage = r.typed(record["usage"], "$.usage", list, "a list")
    steps = r.count(record["steps"], "$.steps")
    if not steps:
        raise r.fail("$.steps", "the run made no decision: there is nothing to replay")
    if len(usage) != steps:
        raise r.fail("$.usage", f"must hold one [tokens, cost_usd] pair per step ({steps})")
    reason = StopReason(expect) if expect is not None else recorded

    by_step: dict[int, dict[str, Any]] = {}
    tools: dict[str, list[dict[str, Any]]] = {}
    ran: list[str] = []
    verdicts: list[bool] = []
    for i, rec in enumerate(trace):
        p = f"$.trace[{i}]"
        rec = r.has(rec, p, ("step", "kind"))
        kind, step = rec["kind"], r.count(rec["step"], p + ".step", 1)
        if kind in ("tool", "deduplicated"):
            r.has(rec, p, ("tool", "args"))
            tool = r.typed(rec["tool"], p + ".tool", str, "a string")
            args = {} if rec["args"] is None else rec["args"]  # (a call with no arguments)
            call = {"tool": tool, "args": r.typed(args, p + ".args", dict, "an object")}
            key = rec.get("idempotency_key")
            if key is not None:
                call["idempotency_key"] = r.typed(key, p + ".idempotency_key", str, "a string")
            by_step.setdefault(step, {"call": call})
            if kind == "tool":
                res = r.typed(rec.get("result"), p + ".result", dict, "an object")
                served = {k: res[k] for k in ("ok", "data", "error", "fatal", "cost_usd")
                          if k in res}
                took = rec.get("seconds")
                if took is not None and r.number(took, p + ".seconds"):
                    served["delay_s"] = took  # the replay's tool takes as long
                tools.setdefault(tool, []).append(served)
                ran.append(tool)
        elif kind == "finish_rejected":
            by_step[step] = {"finish": rec.get("output")}
            verdicts.append(False)
        elif kind == "invalid":
            by_step[step] = {"invalid": r.typed(rec.get("note", ""), p + ".note", str, "a string")}
        else:
            raise r.fail(p + ".kind", "must be one of tool, deduplicated, finish_rejected, invalid")
    last = record.get("last_action")
    if isinstance(last, dict):  # the last step's action in full (a trace omits a call's key)
        by_step[steps] = dict(last)
    condition = stop.get("condition")
    if (isinstance(condition, dict) and condition.get("type") == "FinishGate"
            and recorded is StopReason.GOAL_MET):
        verdicts.append(True)
    cut = _cut_call(r, record, condition, by_step.get(steps))
    if cut is not None:  # the call the deadline cancelled: it never answers in the replay
        tools.setdefault(cut, []).append({"ok": True, "delay_s": MAX_EVAL_SECONDS})
    thinking = r.typed(record.get("decide_seconds", []), "$.decide_seconds", list, "a list")
    for i, took in enumerate(thinking):
        r.number(took, f"$.decide_seconds[{i}]")
    turns: list[dict[str, Any]] = []
    for step in range(1, steps + 1):
        turn = dict(by_step.get(step) or {"invalid": "(no action recorded for this step)"})
        pair = usage[step - 1]
        if not isinstance(pair, list) or len(pair) != 2:
            raise r.fail(f"$.usage[{step - 1}]", "must be a [tokens, cost_usd] pair")
        tokens = r.count(pair[0], f"$.usage[{step - 1}][0]")
        cost = r.number(pair[1], f"$.usage[{step - 1}][1]")
        if tokens:
            turn["tokens"] = tokens
        if cost:
            turn["cost_usd"] = cost
        if step <= len(thinking) and thinking[step - 1]:
            turn["delay_s"] = thinking[step - 1]  # the model call took as long
        turns.append(turn)
    if _cut_decide(record, condition):  # the model call the deadline cancelled never answers
        turns.append({"invalid": "(the model call the deadline cancelled)",
                      "delay_s": MAX_EVAL_SECONDS})

    budget = dict(r.typed(controls["budget"], "$.controls.budget", dict, "an object"))
    limits = _clean(dict(r.typed(budget.pop("tool_limits", {}), "$.controls.budget.tool_limits",
                                 dict, "an object")))
    capped = ""
    seconds = budget.get("max_seconds")
    if isinstance(seconds, (int, float)) and seconds > MAX_EVAL_SECONDS:
        # an eval case runs for MAX_EVAL_SECONDS at most; a scripted replay waits for no model
        budget["max_seconds"] = MAX_EVAL_SECONDS
        capped = (f" (its wall-clock budget of {seconds:g} s is capped at "
                  f"{MAX_EVAL_SECONDS:g} s for the replay)")
    case: dict[str, Any] = {
        "format": EVAL_FORMAT,
        "id": case_id or f"captured_{record['run_id']}",
        "description": (f"captured from run {record['run_id']}, which stopped "
                        f"{recorded}: {stop.get('detail', '')}{capped}"),
        "task": record["task"] if isinstance(record["task"], str) else display(record["task"], 300),
        "expect_stop": str(reason),
        "budget": {**_clean(budget), "tool_limits": limits},
        "no_progress": controls["no_progress"],
        "tool_failure": controls["tool_failure"],
        "tools": {name: {"results": res} for name, res in tools.items()},
        "agent": {"turns": turns},
    }
    if not case["budget"].get("tool_timeouts"):  # a run without a deadline records none
        case["budget"].pop("tool_timeouts", None)
    if expect is None:
        case["expect_steps"] = steps
        case["expect_tools"] = ran
    guard = controls.get("guard")
    if guard:
        g = r.has(guard, "$.controls.guard", ("allow", "approvals", "side_effects"))
        side = r.typed(g["side_effects"], "$.controls.guard.side_effects", dict, "an object")
        case["guard"] = {"allow": g["allow"], "approvals": g["approvals"], "side_effects": {
            t: _clean(r.typed(v, f"$.controls.guard.side_effects.{t}", dict, "an object"))
            for t, v in side.items()}}
    rules = r.typed(controls.get("rules") or [], "$.controls.rules", list, "a list")
    rules = [r.has(x, f"$.controls.rules[{i}]", ("name", "predicates", "stop_early"))
             for i, x in enumerate(rules)]
    if any(x["predicates"] for x in rules):
        case["rules"] = [{"name": x["name"], "require": x["predicates"],
                          "stop_early": x["stop_early"]} for x in rules if x["predicates"]]
    if controls.get("validate") or "rules" not in case:
        case["finish_check"] = {"verdicts": verdicts or [False]}
    EvalCase.from_json(case, source)  # what we write must load
    return case
