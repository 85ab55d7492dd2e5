"""RFC 6962/9162 Merkle code against the transparency-dev/merkle vectors (tests/store/vectors)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.store import ProofInvalid, merkle

VECTORS = Path(__file__).with_name("vectors")
ROOTS = json.loads((VECTORS / "roots.json").read_text())
LEAVES = [merkle.leaf_hash(bytes.fromhex(h)) for h in ROOTS["leaf_inputs_hex"]]


def _b64(s: str | None) -> bytes:
    return base64.b64decode(s) if s else b""


def _cases(kind: str) -> list[tuple[str, dict[str, Any]]]:
    files = sorted((VECTORS / kind).rglob("*.json"))
    return [(str(f.relative_to(VECTORS)), json.loads(f.read_text())) for f in files]


INCLUSION = _cases("inclusion")
CONSISTENCY = _cases("consistency")


def test_vector_corpus_is_complete() -> None:
    # 98 inclusion + 98 consistency cases at transparency-dev/merkle 417fb0c; most negative.
    assert len(INCLUSION) == 98
    assert len(CONSISTENCY) == 98
    negatives = sum(c["wantErr"] for _, c in INCLUSION + CONSISTENCY)
    assert negatives > 150


def test_empty_root() -> None:
    assert merkle.root([]).hex() == ROOTS["empty_root_hex"]


@pytest.mark.parametrize("size", sorted(int(k) for k in ROOTS["root_hashes_hex_by_size"]))
def test_roots_of_small_trees(size: int) -> None:
    assert merkle.root(LEAVES[:size]).hex() == ROOTS["root_hashes_hex_by_size"][str(size)]


@pytest.mark.parametrize(("name", "case"), INCLUSION, ids=[n for n, _ in INCLUSION])
def test_inclusion_vector(name: str, case: dict[str, Any]) -> None:
    args = (
        _b64(case["leafHash"]),
        case["leafIdx"],
        case["treeSize"],
        [_b64(p) for p in case["proof"] or []],
        _b64(case["root"]),
    )
    if case["wantErr"]:
        with pytest.raises(ProofInvalid):
            merkle.verify_inclusion(*args)
    else:
        merkle.verify_inclusion(*args)


@pytest.mark.parametrize(("name", "case"), CONSISTENCY, ids=[n for n, _ in CONSISTENCY])
def test_consistency_vector(name: str, case: dict[str, Any]) -> None:
    args = (
        case["size1"],
        case["size2"],
        [_b64(p) for p in case["proof"] or []],
        _b64(case["root1"]),
        _b64(case["root2"]),
    )
    if case["wantErr"]:
        with pytest.raises(ProofInvalid):
            merkle.verify_consistency(*args)
    else:
        merkle.verify_consistency(*args)


@pytest.mark.parametrize(
    ("name", "case"),
    [(n, c) for n, c in INCLUSION if n.endswith("happy-path.json") and 0 < c["treeSize"] <= 8],
)
def test_generated_inclusion_proofs_match_vectors(name: str, case: dict[str, Any]) -> None:
    leaves = LEAVES[: case["treeSize"]]
    assert merkle.leaf_hash(bytes.fromhex(ROOTS["leaf_inputs_hex"][case["leafIdx"]])) == _b64(
        case["leafHash"]
    )
    proof = merkle.inclusion_proof(leaves, case["leafIdx"])
    assert proof == [_b64(p) for p in case["proof"] or []]


@pytest.mark.parametrize(
    ("name", "case"), [(n, c) for n, c in CONSISTENCY if n.endswith("happy-path.json")]
)
def test_generated_consistency_proofs_match_vectors(name: str, case: dict[str, Any]) -> None:
    proof = merkle.consistency_proof(LEAVES[: case["size2"]], case["size1"])
    assert proof == [_b64(p) for p in case["proof"] or []]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(min_value=1, max_value=70), data=st.data())
def test_generated_proofs_verify(n: int, data: st.DataObject) -> None:
    leaves = [merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(n)]
    root = merkle.root(leaves)
    i = data.draw(st.integers(min_value=0, max_value=n - 1))
    merkle.verify_inclusion(leaves[i], i, n, merkle.inclusion_proof(leaves, i), root)
    m = data.draw(st.integers(min_value=1, max_value=n))
    merkle.verify_consistency(
        m, n, merkle.consistency_proof(leaves, m), merkle.root(leaves[:m]), root
    )
    if n > 1:  # and a proof for one leaf never proves its neighbour
        j = (i + 1) % n
        with pytest.raises(ProofInvalid):
            merkle.verify_inclusion(leaves[j], i, n, merkle.inclusion_proof(leaves, i), root)


def test_accumulator_matches_recursive_definition() -> None:
    def mth(d: list[bytes]) -> bytes:
        if not d:
            return merkle.EMPTY_ROOT
        if len(d) == 1:
            return d[0]
        k = 1 << ((len(d) - 1).bit_length() - 1)
        return merkle.node_hash(mth(d[:k]), mth(d[k:]))

    leaves = [merkle.leaf_hash(bytes([i])) for i in range(40)]
    acc = merkle.Accumulator()
    for i, leaf in enumerate(leaves):
        acc.append(leaf)
        assert acc.root() == mth(leaves[: i + 1])


def test_proof_arguments_out_of_range() -> None:
    with pytest.raises(ValueError):
        merkle.inclusion_proof(LEAVES[:3], 3)
    with pytest.raises(ValueError):
        merkle.consistency_proof(LEAVES[:3], 0)
