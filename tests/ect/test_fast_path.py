"""The compiled fast path of verify_bytes equals the reference strict parser (issue 19, item 6).

``fast_parse`` may only *accept*: whenever it returns an object, that object must be exactly
(repr-equal, so ``1`` and ``1.0`` differ) what ``loads_strict`` + ``from_json`` produce; when
the reference rejects, the fast path must decline. Checked on the whole existing corpus (the
worked examples, the hostile inputs, the wire-test mutations) and on fuzzed inputs, both as
parsed objects and as whole decisions of ``verify_bytes`` against the reference path.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.canonical import loads_strict
from runner.ect import Certificate, Contract, Ledger, ledger_digest, verify_bytes
from runner.ect._structs import SCHEMA_TYPES, TWINS, fast_parse
from runner.ect._verifier import _verify_bytes_reference
from runner.errors import FormatError
from tests.ect.test_hostile import HOSTILE

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
KINDS = {"contract": Contract, "ledger": Ledger, "certificate": Certificate}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _reference(kind: str, data: bytes | str) -> Any:
    try:
        return KINDS[kind].from_json(loads_strict(data), kind)
    except FormatError:
        return None


def _same(kind: str, data: bytes | str) -> Any:
    fast = fast_parse(kind, data)
    ref = _reference(kind, data)
    if fast is not None:
        assert ref is not None, f"fast path accepted what the reference rejects: {data[:200]!r}"
        assert repr(fast) == repr(ref)
    return fast, ref


def _kind(path: Path) -> str:
    for kind in KINDS:
        if path.name.startswith(kind):
            return kind
    raise AssertionError(path)


CORPUS = sorted(p for p in EXAMPLES.rglob("*.json") if p.name != "index.json")


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_every_example_document_decodes_identically(path: Path) -> None:
    data = path.read_bytes()
    fast, ref = _same(_kind(path), data)
    if ref is not None:
        assert fast is not None, "a valid example fell back to the slow path"


def _cases() -> list[dict[str, Any]]:
    return list(json.loads((EXAMPLES / "index.json").read_text())["cases"])


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_every_example_decision_is_identical(case: dict[str, Any]) -> None:
    texts = [(EXAMPLES / case[k]).read_bytes() for k in ("contract", "ledger", "certificate")]
    for explain in (False, True):
        assert verify_bytes(*texts, explain=explain) == _verify_bytes_reference(
            *texts, explain=explain
        )


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_inputs_decide_identically(name: str) -> None:
    cert, _ = HOSTILE[name]
    contract = (EXAMPLES / "aggregation" / "contract.json").read_bytes()
    ledger = (EXAMPLES / "aggregation" / "ledger.json").read_bytes()
    _same("certificate", cert)
    assert verify_bytes(contract, ledger, cert, explain=True) == _verify_bytes_reference(
        contract, ledger, cert, explain=True
    )
    # The same bytes placed as contract and ledger too.
    _same("contract", cert)
    _same("ledger", cert)


def test_duplicate_keys_anywhere_are_refused() -> None:
    ledger = (EXAMPLES / "aggregation" / "ledger.json").read_bytes()
    # A duplicate inside a receipt's scope, deep in the document, with the same value.
    dup = ledger.replace(b'"level": "store"', b'"level": "store", "level": "store"', 1)
    assert dup != ledger
    assert fast_parse("ledger", dup) is None
    assert _reference("ledger", dup) is None
    # A colon inside strings (digests carry one each) does not confuse the count, with or
    # without escapes in the text.
    escaped = ledger.replace(b'"S03"', b'"\\u0053\\u003a03"', 1)
    _same("ledger", escaped)
    assert fast_parse("ledger", escaped) is not None


def test_twins_have_the_schema_structs_fields() -> None:
    for schema_type, twin in TWINS.items():
        assert twin.__struct_fields__ == schema_type.__struct_fields__, twin
    assert set(SCHEMA_TYPES) == {"contract", "ledger", "certificate", "decision"}


# --- fuzzing ------------------------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.sampled_from([2**53 - 1, 2**53, -(2**53) + 1, 0, -0.0, 1.0, 1e300, 1e-320])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["", "S03", "sha256:" + "0" * 64, "2026-03-02", "2026-02-30", "a:b", "\n"])
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(obj: Any, rnd: random.Random, new: Any, key: str) -> Any:
    obj = json.loads(json.dumps(obj))  # noqa: TID251 - a deep copy of test input
    path = rnd.choice(_paths(obj)[1:])
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    action = rnd.randrange(4)
    if action == 0:
        parent[last] = new
    elif action == 1 and isinstance(parent, dict):
        del parent[last]
    elif action == 2 and isinstance(parent, dict):
        parent[key] = new
    elif isinstance(parent, list):
        parent.insert(rnd.randrange(len(parent) + 1), new)
    else:
        parent[last] = new
    return obj


def _text(obj: Any, rnd: random.Random) -> bytes:
    text = json.dumps(  # noqa: TID251 - builds test input, not a digest
        obj, ensure_ascii=rnd.random() < 0.3, indent=rnd.choice([None, 1])
    )
    return text.encode("utf-8", "surrogatepass")


_DOCS = [(p, _kind(p)) for p in CORPUS if _reference(_kind(p), p.read_bytes()) is not None]


@SETTINGS
@given(
    st.sampled_from(_DOCS),
    st.integers(0, 2**32),
    _JSON,
    st.text(max_size=6) | st.sampled_from(["format", "task_id", "value", "params", "k"]),
)
def test_fuzzed_documents_decode_identically(
    doc: tuple[Path, str], seed: int, new: Any, key: str
) -> None:
    path, kind = doc
    rnd = random.Random(seed)
    obj = json.loads(path.read_bytes())
    for _ in range(rnd.randrange(1, 3)):
        obj = _mutate(obj, rnd, new, key)
    _same(kind, _text(obj, rnd))


@SETTINGS
@given(st.sampled_from(_DOCS), st.integers(0, 2**32), st.binary(max_size=6))
def test_fuzzed_bytes_decode_identically(doc: tuple[Path, str], seed: int, junk: bytes) -> None:
    path, kind = doc
    rnd = random.Random(seed)
    data = bytearray(path.read_bytes())
    for _ in range(rnd.randrange(1, 4)):
        at = rnd.randrange(len(data) + 1)
        action = rnd.randrange(3)
        if action == 0:
            data[at:at] = junk
        elif action == 1:
            del data[at : at + rnd.randrange(1, 8)]
        else:
            # Duplicate a "key": value pair textually (a duplicate key) or a structural char.
            data[at:at] = rnd.choice([b'"format": "x", ', b",", b":", b'"', b"\\", b"{", b"]"])
    _same(kind, bytes(data))


@SETTINGS
@given(st.sampled_from(_cases()), st.integers(0, 2**32), _JSON)
def test_fuzzed_triples_decide_identically(case: dict[str, Any], seed: int, new: Any) -> None:
    rnd = random.Random(seed)
    texts = []
    for k in ("contract", "ledger", "certificate"):
        data = (EXAMPLES / case[k]).read_bytes()
        if rnd.random() < 0.5:
            try:
                data = _text(_mutate(json.loads(data), rnd, new, "x"), rnd)
            except ValueError:
                pass  # an example that is not JSON (the truncated one) stays as it is
        texts.append(data)
    assert verify_bytes(*texts) == _verify_bytes_reference(*texts)


_VALUES = (
    st.none()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.text(max_size=4)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(st.none() | st.integers(0, 9) | st.text(max_size=3), max_size=3)
)


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["r-1", "r-2", "r-3", "r:4", "r-5"]),
            _VALUES,
            st.none() | st.text(min_size=1, max_size=4),
        ),
        max_size=5,
        unique_by=lambda row: row[0],
    )
)
def test_fast_digests_equal_the_generic_encoder(rows: list[tuple[Any, Any, Any]]) -> None:
    from runner.canonical import digest
    from runner.ect import value_digest
    from tests.ect.builders import receipt_json

    receipts = [receipt_json(rid, value, entity=entity) for rid, value, entity in rows]
    ledger = Ledger.from_json({"format": "ect.ledger/1", "task_id": "t:1", "receipts": receipts})
    ordered = sorted(ledger.receipts, key=lambda r: r.receipt_id)
    assert ledger_digest(ledger) == digest(
        "ect/ledger/v1", {"task_id": "t:1", "receipts": [r.to_json() for r in ordered]}
    )
    for _, value, _ in rows:
        assert value_digest(value) == digest("ect/value/v1", value)


# --- the wire tests' mutations, as bytes ------------------------------------------------------


def _marked_cases(test: Any) -> list[Any]:
    [mark] = [m for m in test.pytestmark if m.name == "parametrize"]
    return list(mark.args[1])


def _wire_corpus() -> list[tuple[str, bytes]]:
    import copy

    from tests.ect import test_wire
    from tests.ect.builders import receipt_json

    contract, ledger, cert = test_wire.valid_triple()
    out: list[tuple[str, bytes]] = []

    def dump(obj: Any) -> bytes:
        return json.dumps(obj).encode()  # noqa: TID251 - test input (NaN and \\ud800 escaped)

    for mutate, _ in _marked_cases(test_wire.test_certificate_rejections_name_the_path):
        bad = copy.deepcopy(cert)
        mutate(bad)
        out.append(("certificate", dump(bad)))
    for mutate, _ in _marked_cases(test_wire.test_contract_rejections_name_the_path):
        bad = copy.deepcopy(contract)
        mutate(bad)
        out.append(("contract", dump(bad)))
    for field, value, _ in _marked_cases(test_wire.test_receipt_rejections):
        receipt = receipt_json("r-0001", 5)
        receipt[field] = value
        out.append(("ledger", dump({**ledger, "receipts": [receipt]})))
    return out


def test_the_wire_test_mutations_decode_identically() -> None:
    corpus = _wire_corpus()
    assert len(corpus) > 25
    accepted = 0
    for kind, data in corpus:
        _, ref = _same(kind, data)
        accepted += ref is not None
    assert accepted >= 1  # the first certificate mutation (extra params) still parses


_NUMBER = st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,3})?", fullmatch=True)


@SETTINGS
@given(_NUMBER)
def test_number_literals_decode_to_the_same_value(literal: str) -> None:
    # Digests depend on the exact double: the compiled decoder must round every literal as
    # Python does (or decline, e.g. for 1e400 or an integer beyond 2**53).
    cert = (EXAMPLES / "aggregation" / "certificate.json").read_bytes()
    obj = json.loads(cert)
    old = b'"value": ' + str(obj["claims"][0]["value"]).encode()
    assert old in cert
    _same("certificate", cert.replace(old, b'"value": ' + literal.encode(), 1))
