"""The published JSON Schemas (issue 19, item 5): generated, shipped, and in step with the parser."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.canonical import loads_strict
from runner.ect import (
    REASON_CODES,
    Certificate,
    Contract,
    Decision,
    Ledger,
    json_schemas,
    load_schema,
    verify_bytes,
)
from runner.errors import FormatError
from tests.ect.test_fast_path import _DOCS, _JSON, SETTINGS, _mutate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
README = " ".join((ROOT / "docs" / "schema" / "README.md").read_text("utf-8").split())
PARSERS = {"contract": Contract, "ledger": Ledger, "certificate": Certificate, "decision": Decision}
VALIDATORS = {k: jsonschema.Draft202012Validator(load_schema(k)) for k in PARSERS}

# The parser messages of the rules docs/schema/README.md lists as beyond JSON Schema. A document
# the schema accepts and the parser refuses must be refused for one of these.
DOCUMENTED = (
    "integer outside the IEEE-754 safe range",
    "expected an integer",
    "param 'k' must be an integer >= 1",
    "expected an ISO date",
    "must be ISO dates",
    "differs from the contract task_id",
    "missing spec for required slot",
    "is not required",
    "start is after end",
    "min is greater than max",
    "must differ",
    "overlap",
    "nested deeper than 32",
)


def _parser_accepts(kind: str, obj: Any) -> tuple[bool, str]:
    try:
        PARSERS[kind].from_json(obj, kind)
    except FormatError as e:
        return False, str(e)
    return True, ""


def _agree(kind: str, obj: Any) -> None:
    schema_ok = VALIDATORS[kind].is_valid(obj)
    parser_ok, message = _parser_accepts(kind, obj)
    if not schema_ok:
        assert not parser_ok, f"the schema rejects what the parser accepts: {obj!r:.300}"
    elif not parser_ok:
        assert any(d in message for d in DOCUMENTED), f"undocumented difference: {message}"


def test_committed_schemas_equal_regeneration() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "schema" / "generate.py"), "--check"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_each_schema_is_2020_12_and_shipped(name: str) -> None:
    schema = load_schema(name)
    assert schema == json_schemas()[name]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert json.loads((ROOT / "docs" / "schema" / f"{name}.schema.json").read_text()) == schema


def test_every_documented_difference_is_in_the_readme() -> None:
    for phrase in DOCUMENTED:
        assert phrase in README, phrase


def _kind(path: Path) -> str:
    return next(k for k in ("contract", "ledger", "certificate") if path.name.startswith(k))


EXAMPLE_FILES = sorted(p for p in EXAMPLES.rglob("*.json") if p.name != "index.json")


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_every_example_validates_as_the_parser_decides(path: Path) -> None:
    try:
        obj = loads_strict(path.read_bytes())
    except FormatError:
        assert path.name == "certificate-truncated.json"  # not JSON at all: text-level rule
        return
    kind = _kind(path)
    parser_ok, _ = _parser_accepts(kind, obj)
    assert VALIDATORS[kind].is_valid(obj) is parser_ok
    if not path.name.startswith("certificate-extra"):
        assert parser_ok


def test_every_example_decision_validates() -> None:
    for case in json.loads((EXAMPLES / "index.json").read_text())["cases"]:
        texts = [(EXAMPLES / case[k]).read_bytes() for k in ("contract", "ledger", "certificate")]
        decision = verify_bytes(*texts)[0].to_json()
        VALIDATORS["decision"].validate(decision)


def test_decision_schema_states_the_complete_rule() -> None:
    reason = {"code": "coverage.missing_slot", "slot": "days", "detail": "x"}
    bad = [
        {"decision": "complete", "reasons": [reason], "missing_slots": []},
        {"decision": "complete", "reasons": [], "missing_slots": ["days"]},
        {"decision": "continue", "reasons": [], "missing_slots": []},
        {"decision": "continue", "reasons": [{**reason, "code": "made.up"}], "missing_slots": []},
    ]
    for obj in bad:
        _agree("decision", obj)
        assert not VALIDATORS["decision"].is_valid(obj)
    assert set(load_schema("decision")["$defs"]["Reason"]["properties"]["code"]["enum"]) == set(
        REASON_CODES
    )


@pytest.mark.parametrize(
    ("kind", "path", "value", "phrase"),
    [
        ("ledger", ("receipts", 0, "value"), 2**53, "integer outside"),
        ("contract", ("slots", "total", "cardinality", "min"), 7.0, "expected an integer"),
        ("ledger", ("receipts", 0, "scope", "date"), "2026-02-30", "expected an ISO date"),
        ("contract", ("task_id",), "other-task", "differs from the contract task_id"),
        ("contract", ("slots", "total", "scope", "dates", "start"), "2026-03-09", "start is after"),
    ],
)
def test_each_documented_difference_is_real(
    kind: str, path: tuple[Any, ...], value: Any, phrase: str
) -> None:
    obj = json.loads((EXAMPLES / "aggregation" / f"{kind}.json").read_text())
    node = obj
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    assert VALIDATORS[kind].is_valid(obj)
    ok, message = _parser_accepts(kind, obj)
    assert not ok and phrase in message


@SETTINGS
@given(
    st.sampled_from(_DOCS),
    st.integers(0, 2**32),
    _JSON
    | st.sampled_from(
        [2**53, 2.0, "2026-02-30", "", [], {}, {"start": "2026-03-05", "end": "2026-03-01"}]
    ),
    st.sampled_from(["format", "x", "value", "k", "a", "entity", "dates", "cardinality", "op"]),
)
def test_schema_and_parser_agree_on_fuzzed_documents(
    doc: tuple[Path, str], seed: int, new: Any, key: str
) -> None:
    path, kind = doc
    rnd = random.Random(seed)
    obj = json.loads(path.read_bytes())
    for _ in range(rnd.randrange(1, 3)):
        obj = _mutate(obj, rnd, new, key)
    _agree(kind, obj)


@SETTINGS
@given(
    st.sampled_from(["complete", "continue", "done"]),
    st.lists(
        st.fixed_dictionaries(
            {"code": st.sampled_from([*sorted(REASON_CODES)[:5], "x.y"]),
             "slot": st.none() | st.text(max_size=3), "detail": st.text(max_size=5)}
        ),
        max_size=2,
    ),
    st.lists(st.text(max_size=3) | st.integers(), max_size=2),
)  # fmt: skip
def test_decision_schema_and_parser_agree(decision: str, reasons: list[Any], missing: list[Any]) -> None:
    _agree("decision", {"decision": decision, "reasons": reasons, "missing_slots": missing})


def test_schema_patterns_are_anchored_for_ecma() -> None:
    text = json.dumps(json_schemas())  # noqa: TID251 - inspection only
    assert "\\\\A" not in text and "\\\\Z" not in text
    for pattern in re.findall(r'"pattern": "([^"]+)"', text):
        assert pattern.startswith("^") and pattern.endswith("$")
