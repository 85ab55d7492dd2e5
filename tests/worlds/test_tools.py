"""The stdlib-only synthetic tools: schemas, responses, nested errors, never raising."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.worlds import TOOLS_PATH, NoteBook, build_world, tools, world_snapshot

SNAP = world_snapshot("w02")
WORLD = build_world("w02")
STORE = WORLD.store_ids[0]

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_entities", {"level": "region"}),
    ("list_entities", {"level": "store"}),
    ("list_entities", {"level": "store", "parent": "R2"}),
    ("get_parent", {"entity": STORE}),
    ("get_parent", {"entity": "R1"}),
    ("get_metric", {"entity": STORE, "attribute": "units", "date": "2026-03-05"}),
    (
        "get_series",
        {"entity": STORE, "attribute": "revenue", "start": "2026-03-01", "end": "2026-03-28"},
    ),
    ("record_note", {"key": "answer", "value": [1, "a"], "idempotency_key": "k1"}),
]


def test_tools_module_imports_only_the_standard_library() -> None:
    tree = ast.parse(TOOLS_PATH.read_text(encoding="utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0])
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules


def test_tools_run_under_isolated_python_loaded_by_path(tmp_path) -> None:
    """What the sandbox worker does: ``python -I -S``, load tools.py by file path, call."""
    snap_path = tmp_path / "w02.json"
    snap_path.write_text(json.dumps(SNAP), encoding="utf-8")  # noqa: TID251
    program = (
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('tools', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "snap = json.load(open(sys.argv[2]))\n"
        "calls = json.loads(sys.stdin.read())\n"
        "print(json.dumps([m.call_tool(snap, t, a) for t, a in calls]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", program, str(TOOLS_PATH), str(snap_path)],
        input=json.dumps(CALLS),  # noqa: TID251
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(proc.stdout) == [tools.call_tool(SNAP, t, a) for t, a in CALLS]


def test_every_success_response_matches_its_schema() -> None:
    for tool_id, args in CALLS:
        response = tools.call_tool(SNAP, tool_id, args)
        assert response["ok"] is True and "error" not in response["result"], (tool_id, response)
        assert tools.validate(response, tools.TOOL_SCHEMAS[tool_id]["response"]) is None


def test_values_come_from_the_world() -> None:
    r = tools.call_tool(
        SNAP, "get_metric", {"entity": STORE, "attribute": "units", "date": "2026-03-05"}
    )
    assert r["result"]["value"] == WORLD.value(STORE, "units", "2026-03-05")
    s = tools.call_tool(
        SNAP,
        "get_series",
        {"entity": STORE, "attribute": "returns", "start": "2026-03-01", "end": "2026-03-28"},
    )
    assert [p["value"] for p in s["result"]["points"]] == list(WORLD.metrics[(STORE, "returns")])
    revisions = {p["date"]: p["revision"] for p in s["result"]["points"]}
    for d, rev in revisions.items():
        assert rev == (2 if (STORE, "returns", d) in WORLD.corrections else 1)
    kids = tools.call_tool(SNAP, "list_entities", {"level": "store", "parent": "R2"})
    assert [e["id"] for e in kids["result"]["entities"]] == list(WORLD.stores_of("R2"))
    p = tools.call_tool(SNAP, "get_parent", {"entity": STORE})
    assert p["result"]["parent"] == WORLD.parent(STORE)


def test_missing_values_are_null() -> None:
    store, attr, start, _end = WORLD.gap
    r = tools.call_tool(SNAP, "get_metric", {"entity": store, "attribute": attr, "date": start})
    assert r == {
        "ok": True,
        "result": {
            "entity": store,
            "attribute": attr,
            "level": "store",
            "date": start,
            "value": None,
            "revision": 1,
        },
    }


def _nested_code(response: dict[str, Any]) -> str:
    assert response["ok"] is True
    return response["result"]["error"]["code"]


def test_transport_ok_nested_errors() -> None:
    assert (
        _nested_code(
            tools.call_tool(
                SNAP, "get_metric", {"entity": STORE, "attribute": "units", "date": "2026-04-01"}
            )
        )
        == "date_out_of_range"
    )
    assert (
        _nested_code(
            tools.call_tool(
                SNAP, "get_metric", {"entity": "S99", "attribute": "units", "date": "2026-03-01"}
            )
        )
        == "unknown_entity"
    )
    assert (
        _nested_code(
            tools.call_tool(
                SNAP, "get_metric", {"entity": "R1", "attribute": "units", "date": "2026-03-01"}
            )
        )
        == "no_metric_at_level"
    )
    assert (
        _nested_code(
            tools.call_tool(
                SNAP,
                "get_series",
                {"entity": STORE, "attribute": "units", "start": "2026-03-09", "end": "2026-03-02"},
            )
        )
        == "bad_range"
    )
    assert _nested_code(tools.call_tool(SNAP, "get_parent", {"entity": "X1"})) == "unknown_entity"
    assert (
        _nested_code(tools.call_tool(SNAP, "list_entities", {"level": "region", "parent": "R1"}))
        == "no_children"
    )
    for tool_id in ("get_metric", "get_series", "get_parent", "list_entities"):
        nested = {"ok": True, "result": {"error": {"code": "x", "message": "y"}}}
        assert tools.validate(nested, tools.TOOL_SCHEMAS[tool_id]["response"]) is None


def test_refused_calls() -> None:
    assert tools.call_tool(SNAP, "rm_rf", {})["error"]["code"] == "unknown_tool"
    bad = [
        ("get_metric", {"entity": STORE, "attribute": "units"}),
        ("get_metric", {"entity": STORE, "attribute": "price", "date": "2026-03-01"}),
        ("get_metric", {"entity": STORE, "attribute": "units", "date": "2026-02-30"}),
        ("get_metric", {"entity": STORE, "attribute": "units", "date": "2026-03-01", "x": 1}),
        (
            "get_series",
            {"entity": STORE, "attribute": "units", "start": "2000-01-01", "end": "2030-01-01"},
        ),
        ("list_entities", {"level": 3}),
        ("record_note", {"key": "", "value": 1, "idempotency_key": "k"}),
        ("get_parent", ["S01"]),
    ]
    for tool_id, args in bad:
        r = tools.call_tool(SNAP, tool_id, args)
        assert r["ok"] is False and r["error"]["code"] == "invalid_args", (tool_id, args, r)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    tool_id=st.sampled_from([*tools.TOOL_SCHEMAS, "nope"]),
    args=st.dictionaries(
        st.sampled_from(
            [
                "entity",
                "attribute",
                "date",
                "start",
                "end",
                "level",
                "parent",
                "key",
                "value",
                "idempotency_key",
                "junk",
            ]
        ),
        _json | st.sampled_from([STORE, "R1", "units", "2026-03-03", "2026-13-40", "store"]),
        max_size=5,
    )
    | _json,
)
def test_call_tool_never_raises(tool_id: str, args: Any) -> None:
    r = tools.call_tool(SNAP, tool_id, args)
    assert isinstance(r, dict) and isinstance(r["ok"], bool)
    if r["ok"]:
        assert tools.validate(r, tools.TOOL_SCHEMAS[tool_id]["response"]) is None


def test_record_note_is_pure_and_the_notebook_is_idempotent() -> None:
    args = {"key": "answer", "value": 42, "idempotency_key": "run-1"}
    assert tools.call_tool(SNAP, "record_note", args) == {
        "ok": True,
        "result": {"recorded": True, "key": "answer", "idempotency_key": "run-1"},
    }
    assert "record_note" in tools.SIDE_EFFECT_TOOLS
    book = NoteBook()
    assert book.record(args) == "recorded"
    assert book.record(dict(args)) == "duplicate"
    assert book.record(dict(args, value=43)) == "conflict"
    assert book.record({"key": "answer", "value": 7, "idempotency_key": "run-2"}) == "recorded"
    assert book.notes == {"answer": 7}
