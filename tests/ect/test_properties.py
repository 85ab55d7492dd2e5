"""Property tests (hypothesis): digest order-independence, determinism, mutation, random JSON."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from runner.ect import (
    OPS,
    Ledger,
    ledger_digest,
    values_match,
    verify_bytes,
    verify_json,
)
from tests.ect.builders import receipt_json

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _complete_cases() -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    index = json.loads((EXAMPLES / "index.json").read_text())
    out = []
    for case in index["cases"]:
        if case["decision"] == "complete":
            out.append(
                tuple(
                    json.loads((EXAMPLES / case[k]).read_text())
                    for k in ("contract", "ledger", "certificate")
                )
            )
    return out


BASES = _complete_cases()

scalars = st.one_of(
    st.none(),
    st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4))
ids = st.from_regex(r"\Ar-[0-9]{1,3}\Z")
dates = st.sampled_from(["2026-03-01", "2026-03-02", "2026-03-03", None])


@st.composite
def receipts(draw: st.DrawFn) -> dict[str, Any]:
    return receipt_json(
        draw(ids),
        draw(values),
        entity=draw(st.sampled_from(["S01", "S02", None])),
        date=draw(dates),
        exec_status=draw(st.sampled_from(["ok", "error"])),
    )


@SETTINGS
@given(st.lists(receipts(), max_size=8), st.randoms(use_true_random=False))
def test_ledger_digest_is_independent_of_receipt_order(rs: list[dict[str, Any]], rnd: Any) -> None:
    shuffled = list(rs)
    rnd.shuffle(shuffled)
    a = Ledger.from_json({"format": "ect.ledger/1", "task_id": "t-1", "receipts": rs})
    b = Ledger.from_json({"format": "ect.ledger/1", "task_id": "t-1", "receipts": shuffled})
    assert ledger_digest(a) == ledger_digest(b)


@SETTINGS
@given(st.sampled_from(range(len(BASES))), st.data())
def test_verification_is_deterministic(i: int, data: st.DataObject) -> None:
    contract, ledger, cert = copy.deepcopy(BASES[i])
    # Perturb a little so that both complete and continue decisions are exercised.
    if data.draw(st.booleans()):
        cert["claims"][0]["evidence"] = data.draw(st.lists(ids, max_size=4))
    first = verify_json(contract, ledger, cert)
    again = verify_json(copy.deepcopy(contract), copy.deepcopy(ledger), copy.deepcopy(cert))
    assert first == again and first.to_json() == again.to_json()


def _flip_hex(d: str, pos: int) -> str:
    head, hexpart = d.split(":")
    pos %= 64
    c = "0" if hexpart[pos] != "0" else "1"
    return head + ":" + hexpart[:pos] + c + hexpart[pos + 1 :]


@SETTINGS
@given(st.sampled_from(range(len(BASES))), st.data())
def test_any_single_mutation_yields_continue(i: int, data: st.DataObject) -> None:
    contract, ledger, cert = copy.deepcopy(BASES[i])
    assert verify_json(contract, ledger, cert).complete
    k = data.draw(st.integers(0, len(cert["claims"]) - 1), label="claim")
    c = cert["claims"][k]
    spec = contract["slots"][c["slot"]]
    kind = data.draw(
        st.sampled_from(
            ["value", "drop", "add", "dup", "replace", "op", "params", "descriptor", "ledger"]
        ),
        label="kind",
    )
    ledger_ids = [r["receipt_id"] for r in ledger["receipts"]]
    if kind == "value":
        new = data.draw(values, label="value")
        # Stay outside the slot's tolerance (the one non-exact comparison): the claim may sit
        # up to tol from the exact replay, so a new value more than 2*tol away is wrong.
        assume(not values_match(new, c["value"], None, 2 * spec["tolerance"]["abs"]))
        c["value"] = new
    elif kind == "drop":
        c["evidence"].pop(data.draw(st.integers(0, len(c["evidence"]) - 1)))
    elif kind == "add":
        extra = data.draw(st.one_of(st.sampled_from(ledger_ids), ids))
        c["evidence"].append(extra)
    elif kind == "dup":
        c["evidence"].append(data.draw(st.sampled_from(c["evidence"])))
    elif kind == "replace":
        j = data.draw(st.integers(0, len(c["evidence"]) - 1))
        new_id = data.draw(st.one_of(st.sampled_from(ledger_ids), ids))
        assume(new_id not in c["evidence"])
        c["evidence"][j] = new_id
    elif kind == "op":
        new_op = data.draw(st.sampled_from(sorted(OPS)))
        assume(new_op != c["transform"]["op"])
        c["transform"]["op"] = new_op
    elif kind == "params":
        key = data.draw(st.sampled_from(["k", "order", "a", "b", "x"]))
        new_param = data.draw(st.one_of(st.integers(0, 3), st.text(max_size=3)))
        assume(c["transform"]["params"].get(key, object()) != new_param)
        c["transform"]["params"][key] = new_param
    elif kind == "descriptor":
        cert["descriptor_digest"] = _flip_hex(cert["descriptor_digest"], data.draw(st.integers()))
    else:
        cert["ledger_digest"] = _flip_hex(cert["ledger_digest"], data.draw(st.integers()))
    decision = verify_json(contract, ledger, cert)
    assert decision.decision == "continue", (kind, decision.to_json())


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(max_size=12), children, max_size=5),
    ),
    max_leaves=30,
)
# Objects that look like the formats, to get past the first checks more often.
shaped = st.fixed_dictionaries(
    {
        "format": st.sampled_from(["ect.contract/1", "ect.ledger/1", "ect.certificate/1", "x"]),
        "task_id": st.sampled_from(["w10-aggregation-0", "x"]),
    },
    optional={
        "claims": json_values,
        "receipts": json_values,
        "descriptor": json_values,
        "slots": json_values,
        "descriptor_digest": json_values,
        "ledger_digest": json_values,
    },
)


@SETTINGS
@given(
    st.one_of(json_values, shaped), st.one_of(json_values, shaped), st.one_of(json_values, shaped)
)
def test_random_json_never_crashes_and_never_completes(a: Any, b: Any, c: Any) -> None:
    decision = verify_json(a, b, c)
    assert decision.decision == "continue"


@SETTINGS
@given(
    st.sampled_from(range(len(BASES))), st.sampled_from([0, 1, 2]), st.one_of(json_values, shaped)
)
def test_random_json_in_place_of_one_input_never_completes(i: int, which: int, junk: Any) -> None:
    triple = list(copy.deepcopy(BASES[i]))
    triple[which] = junk
    assert verify_json(*triple).decision == "continue"


@SETTINGS
@given(st.binary(max_size=200), st.sampled_from([0, 1, 2]))
def test_random_bytes_never_crash(junk: bytes, which: int) -> None:
    texts = [json.dumps(x).encode() for x in BASES[0]]  # noqa: TID251 - test input, not hashed
    texts[which] = junk
    decision, _ = verify_bytes(*texts, explain=True)
    assert decision.decision == "continue"
