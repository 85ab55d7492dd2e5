"""The msgspec structs are generated from the wire records (issue 40 item 1): a field is
declared once, on the record, and the generated structs (the schema's source and the fast
path's decoders) accept and refuse what the records' ``from_json`` accepts and refuses."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from runner.canonical import loads_strict
from runner.canonical import spec as field_spec
from runner.ect import Certificate, Contract, Decision, Ledger
from runner.ect import _structs as structs
from runner.ect import _wire as w
from runner.errors import FormatError
from tests.ect.test_fast_path import _DOCS, _mutate
from tests.ect.test_hostile import HOSTILE
from tests.ect.test_schema import DOCUMENTED

RECORDS = {"contract": Contract, "ledger": Ledger, "certificate": Certificate}
TWINS = {"ledger": structs.TWINS[structs.Ledger],
         "certificate": structs.TWINS[structs.Certificate]}
# What json_schemas adds to the structs' schema (the transforms' closed language, unique
# required slots) and the fast path checks in Python (check_params, _descriptor).
STRUCT_CHECKS = (*DOCUMENTED, "duplicate slot name")
_OP_PARAMS = re.compile(r"\.transforms\[\d+\]: op '")  # check_params: an op and its params
# What a twin leaves to the fast path's own checks (one regex over all ids and digests, the
# dates, the non-empty scope names): a twin may accept what the record refuses for these.
TWIN_CHECKS = (*STRUCT_CHECKS, "invalid identifier", "expected a 'sha256:", "must not be empty")


def _record(kind: str, obj: Any) -> str | None:
    """None when the record reads ``obj``, else its message."""
    try:
        RECORDS[kind].from_json(obj, kind)
    except FormatError as e:
        return str(e)
    return None


def _beyond(message: str, checks: tuple[str, ...]) -> bool:
    """Whether the record refused for a rule the structs leave to others."""
    return any(c in message for c in checks) or _OP_PARAMS.search(message) is not None


def _decodes(struct: Any, data: bytes) -> bool:
    try:
        msgspec.json.decode(data, type=struct)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return False
    return True


def _agree(kind: str, data: bytes) -> None:
    try:
        obj = loads_strict(data)
    except FormatError:
        return  # not strict JSON: a text-level rule (duplicates, NaN), no record involved
    refused = _record(kind, obj)
    struct = structs.SCHEMA_TYPES[kind]
    if not _decodes(struct, data):
        assert refused is not None, f"the struct refuses what the record reads: {data[:300]!r}"
    elif refused is not None:
        assert _beyond(refused, STRUCT_CHECKS), f"undocumented difference: {refused}"
    if kind in TWINS:
        if not _decodes(TWINS[kind], data):
            assert refused is not None, f"the twin refuses what the record reads: {data[:300]!r}"
        elif refused is not None:
            assert _beyond(refused, TWIN_CHECKS), f"undocumented difference: {refused}"


@pytest.mark.parametrize("doc", _DOCS, ids=lambda d: d[0].name)
def test_generated_structs_read_every_valid_example(doc: Any) -> None:
    path, kind = doc
    data = path.read_bytes()
    assert _record(kind, loads_strict(data)) is None
    assert _decodes(structs.SCHEMA_TYPES[kind], data)
    if kind in TWINS:
        assert _decodes(TWINS[kind], data)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_generated_structs_refuse_what_the_records_refuse_on_hostile_input(name: str) -> None:
    data, _ = HOSTILE[name]
    for kind in RECORDS:
        _agree(kind, data)


_NEW = [None, True, 0, -1, 2**53, 1.5, "", "x", "2026-02-30", "sha256:" + "0" * 64, [], {},
        ["a"], {"k": 1}]


@pytest.mark.parametrize("seed", range(60))
def test_generated_structs_refuse_what_the_records_refuse_on_mutations(seed: int) -> None:
    rnd = random.Random(seed)
    for path, kind in _DOCS:
        for _ in range(4):
            obj = _mutate(json.loads(path.read_bytes()), rnd, rnd.choice(_NEW),
                          rnd.choice(["format", "task_id", "extra", "abs", "k"]))
            _agree(kind, json.dumps(obj).encode())  # noqa: TID251 - builds test input


def test_a_field_declared_on_a_record_is_a_field_of_its_struct() -> None:
    """The struct follows the record's declaration: keys, omitted fields, dotted keys, readers."""

    @dataclass(frozen=True, slots=True)
    class Probe(w._Wire):
        _format = "ect.probe/1"

        task_id: w.Ident
        limit: int = field(metadata=field_spec(key="bounds.max"))
        spans: w.StrList | None = field(default=None, metadata={"omit": True})
        digest: w.WireDigest = field(default="", metadata=field_spec(key="sha"))

    made = structs._structs((Probe,))[Probe]
    assert made.__struct_fields__ == ("format", "task_id", "bounds", "sha", "spans")
    ok = {"format": "ect.probe/1", "task_id": "t-1", "bounds": {"max": 3},
          "sha": "sha256:" + "0" * 64}
    decoded: Any = msgspec.convert(ok, made)
    assert decoded.bounds.max == 3 and decoded.spans is msgspec.UNSET
    for bad in ({**ok, "task_id": "not an id!"}, {**ok, "sha": "md5"}, {**ok, "spans": []},
                {**ok, "format": "ect.probe/2"}, {**ok, "limit": 3}, {**ok, "bounds": {}}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, made)
    assert msgspec.convert({**ok, "spans": ["a"]}, made).spans == ["a"]  # type: ignore[attr-defined]


def test_the_schema_structs_are_the_records_structs() -> None:
    for kind, record in {**RECORDS, "decision": Decision}.items():
        assert structs.SCHEMA_TYPES[kind] is structs.SCHEMA_STRUCTS[record]
