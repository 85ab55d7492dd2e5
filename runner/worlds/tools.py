"""The synthetic tools of docs/protocol.md: pure, deterministic functions over a world snapshot.

SELF-CONTAINED AND STDLIB-ONLY. This file is bound read-only into the tool sandbox and loaded by
file path by a worker running under ``python -I -S``; it must never import anything from
``runner`` (or any third-party package). Everything it needs is in this file.

Entry point: :func:`call_tool` ``(snapshot, tool_id, args) -> response``. It never raises for
bad input. Three response shapes (part of the tool wire format):

* ``{"ok": true, "result": {...}}``: the call succeeded;
* ``{"ok": true, "result": {"error": {"code", "message"}}}``: "transport ok, nested error", the
  call went through but the tool reports a domain error (unknown entity, a date outside the
  world, a region asked for a store metric, ...);
* ``{"ok": false, "error": {"code", "message", "path"}}``: the call itself was refused (unknown
  tool, arguments that do not match the tool's JSON schema).

``record_note`` is the one side-effect tool. Its effect is only *recorded*: the tool returns an
acknowledgement and the parent process keeps the note in memory (keyed by idempotency key).

The world snapshot (``format: ect.world/1``) is produced by ``runner.worlds.World.snapshot()``::

    {"format": "ect.world/1", "world_id": "w00", "start": "2026-03-01", "end": "2026-03-28",
     "attributes": ["units", "revenue", "returns"], "levels": ["region", "store"],
     "entities": {"region": [{"id": "R1", "parent": null}, ...],
                  "store": [{"id": "S01", "parent": "R2"}, ...]},
     "metrics": {"S01": {"units": [int|null, ... one per day], "revenue": [...], ...}},
     "corrections": {"S01": {"units": {"2026-03-05": <superseded value>}}}}

A cell listed under ``corrections`` was published once with the superseded value and later
corrected; the tools always serve the current value with ``"revision": 2`` (else 1). A point
carrying ``"superseded": true`` never comes from these tools: it marks a stale read recorded in a
trace before the correction, and the trusted adapter marks its receipt ``validation: invalid``.
"""

from __future__ import annotations

import datetime as _dt
import re as _re
from typing import Any

__all__ = ["SIDE_EFFECT_TOOLS", "TOOLS_FORMAT", "TOOL_SCHEMAS", "call_tool", "validate"]

TOOLS_FORMAT = "ect.tools/1"
SIDE_EFFECT_TOOLS = frozenset({"record_note"})

_DATE_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_MAX_SERIES_DAYS = 366

_ENTITY = {"type": "string", "pattern": _ID_PATTERN, "description": "An entity id (R1, S03, ...)."}
_ATTRIBUTE = {
    "type": "string",
    "enum": ["units", "revenue", "returns"],
    "description": "Daily integer metric: units sold, revenue in cents, units returned.",
}
_DATE = {"type": "string", "pattern": _DATE_PATTERN, "description": "An ISO date YYYY-MM-DD."}
_LEVEL = {"type": "string", "enum": ["region", "store"], "description": "Hierarchy level."}
_NULLABLE_INT = {"type": ["integer", "null"]}
_NESTED_ERROR = {
    "type": "object",
    "properties": {
        "code": {"type": "string"},
        "message": {"type": "string"},
    },
    "required": ["code", "message"],
    "additionalProperties": False,
}
_POINT = {
    "type": "object",
    "properties": {
        "date": _DATE,
        "value": _NULLABLE_INT,
        "revision": {"type": "integer", "minimum": 1},
        "superseded": {"type": "boolean"},
    },
    "required": ["date", "value", "revision"],
    "additionalProperties": False,
}


def _response(result: dict[str, Any]) -> dict[str, Any]:
    """The response schema: a success/nested-error envelope around ``result``."""
    return {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean", "enum": [True]},
            "result": {
                "type": "object",
                "anyOf": [
                    result,
                    {
                        "type": "object",
                        "properties": {"error": _NESTED_ERROR},
                        "required": ["error"],
                        "additionalProperties": False,
                    },
                ],
            },
        },
        "required": ["ok", "result"],
        "additionalProperties": False,
    }


# The tool catalogue. "args" are what a planner may send; "response" is what a successful or
# nested-error call returns. Schemas use a small JSON-Schema subset (type, properties, required,
# additionalProperties: false, enum, pattern, minLength/maxLength, minimum/maximum, items,
# maxItems, anyOf) that :func:`validate` implements with the standard library only.
TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "list_entities": {
        "description": (
            "List the entities at a hierarchy level, optionally only the children of one "
            "parent. Each entity comes with its parent id (null for regions)."
        ),
        "args": {
            "type": "object",
            "properties": {"level": _LEVEL, "parent": _ENTITY},
            "required": ["level"],
            "additionalProperties": False,
        },
        "response": _response(
            {
                "type": "object",
                "properties": {
                    "level": _LEVEL,
                    "parent": {"type": ["string", "null"]},
                    "entities": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "parent": {"type": ["string", "null"]},
                            },
                            "required": ["id", "parent"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["level", "parent", "entities"],
                "additionalProperties": False,
            }
        ),
    },
    "get_parent": {
        "description": "Return the parent of an entity (a store's region; null for a region).",
        "args": {
            "type": "object",
            "properties": {"entity": _ENTITY},
            "required": ["entity"],
            "additionalProperties": False,
        },
        "response": _response(
            {
                "type": "object",
                "properties": {
                    "entity": {"type": "string"},
                    "level": _LEVEL,
                    "parent": {"type": ["string", "null"]},
                },
                "required": ["entity", "level", "parent"],
                "additionalProperties": False,
            }
        ),
    },
    "get_metric": {
        "description": (
            "Return one store's daily metric on one date. value is null when the world has no "
            "figure for that day (a deliberately missing value)."
        ),
        "args": {
            "type": "object",
            "properties": {"entity": _ENTITY, "attribute": _ATTRIBUTE, "date": _DATE},
            "required": ["entity", "attribute", "date"],
            "additionalProperties": False,
        },
        "response": _response(
            {
                "type": "object",
                "properties": {
                    "entity": {"type": "string"},
                    "attribute": _ATTRIBUTE,
                    "level": _LEVEL,
                    "date": _DATE,
                    "value": _NULLABLE_INT,
                    "revision": {"type": "integer", "minimum": 1},
                    "superseded": {"type": "boolean"},
                },
                "required": ["entity", "attribute", "level", "date", "value", "revision"],
                "additionalProperties": False,
            }
        ),
    },
    "get_series": {
        "description": (
            "Return one store's daily metric for every date from start to end inclusive "
            "(null where missing)."
        ),
        "args": {
            "type": "object",
            "properties": {
                "entity": _ENTITY,
                "attribute": _ATTRIBUTE,
                "start": _DATE,
                "end": _DATE,
            },
            "required": ["entity", "attribute", "start", "end"],
            "additionalProperties": False,
        },
        "response": _response(
            {
                "type": "object",
                "properties": {
                    "entity": {"type": "string"},
                    "attribute": _ATTRIBUTE,
                    "level": _LEVEL,
                    "start": _DATE,
                    "end": _DATE,
                    "points": {"type": "array", "items": _POINT},
                },
                "required": ["entity", "attribute", "level", "start", "end", "points"],
                "additionalProperties": False,
            }
        ),
    },
    "record_note": {
        "description": (
            "Record a note (side effect, recorded only by the parent). Calls with the same "
            "idempotency_key are the same note."
        ),
        "args": {
            "type": "object",
            "properties": {
                "key": {"type": "string", "minLength": 1, "maxLength": 64},
                "value": {
                    "type": ["string", "integer", "number", "boolean", "null", "array"],
                    "maxLength": 512,
                    "maxItems": 32,
                    "items": {
                        "type": ["string", "integer", "number", "boolean", "null"],
                        "maxLength": 512,
                    },
                },
                "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 64},
            },
            "required": ["key", "value", "idempotency_key"],
            "additionalProperties": False,
        },
        "response": _response(
            {
                "type": "object",
                "properties": {
                    "recorded": {"type": "boolean"},
                    "key": {"type": "string"},
                    "idempotency_key": {"type": "string"},
                },
                "required": ["recorded", "key", "idempotency_key"],
                "additionalProperties": False,
            }
        ),
    },
}


# --- a small JSON-schema validator (the subset the schemas above use) -------------------------


def _type_ok(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    return False


def validate(value: Any, schema: dict[str, Any], path: str = "") -> str | None:
    """Return ``None`` when ``value`` matches ``schema``, else ``"<json pointer>: <problem>"``."""
    where = path or "/"
    if "anyOf" in schema:
        problems = [validate(value, s, path) for s in schema["anyOf"]]
        if all(p is not None for p in problems):
            return problems[0]
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_type_ok(value, n) for n in names):
            return f"{where}: expected {' or '.join(names)}"
    if "enum" in schema and not any(value == e and type(value) is type(e) for e in schema["enum"]):
        return f"{where}: must be one of {schema['enum']}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where}: shorter than {schema['minLength']}"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where}: longer than {schema['maxLength']}"
        if "pattern" in schema and _re.search(schema["pattern"], value) is None:
            return f"{where}: does not match {schema['pattern']}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}: below {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}: above {schema['maximum']}"
    if isinstance(value, list) and len(value) > schema.get("maxItems", len(value)):
        return f"{where}: more than {schema['maxItems']} items"
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problem = validate(item, schema["items"], f"{path}/{i}")
            if problem is not None:
                return problem
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                return f"{where}: missing property {key!r}"
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where}: non-string key"
            if key in props:
                problem = validate(item, props[key], f"{path}/{key}")
                if problem is not None:
                    return problem
            elif schema.get("additionalProperties", True) is False:
                return f"{where}: unexpected property {key[:40]!r}"
    return None


# --- tool implementations --------------------------------------------------------------------


def _nested(code: str, message: str) -> dict[str, Any]:
    return {"ok": True, "result": {"error": {"code": code, "message": message}}}


def _refused(code: str, message: str, path: str = "") -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message, "path": path}}


def _date(text: str) -> _dt.date | None:
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        return None


def _level_of(snapshot: dict[str, Any], entity: str) -> tuple[str, str | None] | None:
    for level in snapshot["levels"]:
        for row in snapshot["entities"][level]:
            if row["id"] == entity:
                return level, row["parent"]
    return None


def _day_index(snapshot: dict[str, Any], day: _dt.date) -> int | None:
    start = _dt.date.fromisoformat(snapshot["start"])
    end = _dt.date.fromisoformat(snapshot["end"])
    if not start <= day <= end:
        return None
    return (day - start).days


def _point(
    snapshot: dict[str, Any], entity: str, attribute: str, day: str, i: int
) -> dict[str, Any]:
    value = snapshot["metrics"][entity][attribute][i]
    corrected = day in snapshot["corrections"].get(entity, {}).get(attribute, {})
    return {"date": day, "value": value, "revision": 2 if corrected else 1}


def _list_entities(snapshot: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    level = args["level"]
    parent = args.get("parent")
    if parent is not None:
        found = _level_of(snapshot, parent)
        if found is None:
            return _nested(
                "unknown_entity", f"no entity {parent!r} in world {snapshot['world_id']}"
            )
        if level == "region" or found[0] != "region":
            return _nested("no_children", f"entities at level {level!r} have no parent {parent!r}")
    rows = [
        {"id": row["id"], "parent": row["parent"]}
        for row in snapshot["entities"][level]
        if parent is None or row["parent"] == parent
    ]
    return {"ok": True, "result": {"level": level, "parent": parent, "entities": rows}}


def _get_parent(snapshot: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    entity = args["entity"]
    found = _level_of(snapshot, entity)
    if found is None:
        return _nested("unknown_entity", f"no entity {entity!r} in world {snapshot['world_id']}")
    return {"ok": True, "result": {"entity": entity, "level": found[0], "parent": found[1]}}


def _metric_entity(snapshot: dict[str, Any], entity: str) -> dict[str, Any] | None:
    found = _level_of(snapshot, entity)
    if found is None:
        return _nested("unknown_entity", f"no entity {entity!r} in world {snapshot['world_id']}")
    if found[0] != "store":
        return _nested(
            "no_metric_at_level", f"metrics exist for stores only; {entity!r} is a region"
        )
    return None


def _out_of_range(snapshot: dict[str, Any], day: str) -> dict[str, Any]:
    return _nested(
        "date_out_of_range",
        f"{day} is outside the world's dates {snapshot['start']}..{snapshot['end']}",
    )


def _get_metric(snapshot: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    entity, attribute, day = args["entity"], args["attribute"], args["date"]
    bad = _metric_entity(snapshot, entity)
    if bad is not None:
        return bad
    parsed = _date(day)
    i = None if parsed is None else _day_index(snapshot, parsed)
    if i is None:
        return _out_of_range(snapshot, day)
    point = _point(snapshot, entity, attribute, day, i)
    result = {"entity": entity, "attribute": attribute, "level": "store", "date": day}
    result["value"] = point["value"]
    result["revision"] = point["revision"]
    return {"ok": True, "result": result}


def _get_series(snapshot: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    entity, attribute, start, end = args["entity"], args["attribute"], args["start"], args["end"]
    bad = _metric_entity(snapshot, entity)
    if bad is not None:
        return bad
    d0, d1 = _date(start), _date(end)
    if d0 is None or d1 is None:
        return _out_of_range(snapshot, start if d0 is None else end)
    if d0 > d1:
        return _nested("bad_range", f"start {start} is after end {end}")
    i0, i1 = _day_index(snapshot, d0), _day_index(snapshot, d1)
    if i0 is None:
        return _out_of_range(snapshot, start)
    if i1 is None:
        return _out_of_range(snapshot, end)
    points = []
    for i in range(i0, i1 + 1):
        day = (d0 + _dt.timedelta(days=i - i0)).isoformat()
        points.append(_point(snapshot, entity, attribute, day, i))
    result = {
        "entity": entity,
        "attribute": attribute,
        "level": "store",
        "start": start,
        "end": end,
    }
    result["points"] = points
    return {"ok": True, "result": result}


def _record_note(snapshot: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    # Pure: the effect is recorded by the parent (runner.worlds.NoteBook), never here.
    return {
        "ok": True,
        "result": {
            "recorded": True,
            "key": args["key"],
            "idempotency_key": args["idempotency_key"],
        },
    }


_TOOLS = {
    "list_entities": _list_entities,
    "get_parent": _get_parent,
    "get_metric": _get_metric,
    "get_series": _get_series,
    "record_note": _record_note,
}


def call_tool(snapshot: dict[str, Any], tool_id: str, args: Any) -> dict[str, Any]:
    """Run one synthetic tool against a world snapshot; never raises for bad ``tool_id``/``args``.

    Returns one of the three response shapes in the module docstring.
    """
    if not isinstance(tool_id, str) or tool_id not in _TOOLS:
        return _refused("unknown_tool", f"no tool named {str(tool_id)[:60]!r}")
    problem = validate(args, TOOL_SCHEMAS[tool_id]["args"])
    if problem is not None:
        path, _, message = problem.partition(": ")
        return _refused("invalid_args", message, path)
    for key in ("date", "start", "end"):
        if key in args and _date(args[key]) is None:
            return _refused("invalid_args", f"{args[key]!r} is not a calendar date", "/" + key)
    if tool_id == "get_series":
        span = (_date(args["end"]) - _date(args["start"])).days  # type: ignore[operator]
        if span >= _MAX_SERIES_DAYS:
            return _refused(
                "invalid_args", f"a series spans at most {_MAX_SERIES_DAYS} days", "/end"
            )
    return _TOOLS[tool_id](snapshot, args)
