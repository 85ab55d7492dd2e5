"""RFC 6962 / RFC 9162 Merkle tree hashing, inclusion and consistency proofs.

Written for this project from the algorithm text of RFC 9162 §2.1 (no code copied); tested
against the transparency-dev/merkle test vectors (tests/store/vectors/). Hashes are raw 32-byte
sha256 digests. Domain separation as the RFCs define it::

    leaf_hash(d)   = sha256(0x00 || d)
    node_hash(l,r) = sha256(0x01 || l || r)
    MTH({})        = sha256("")

Functions take *leaf hashes* (what the store keeps per record), not leaf data, except
:func:`leaf_hash` itself.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Sequence
from itertools import repeat

from runner.store._errors import ProofInvalid

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "Accumulator",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "root",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
_sha256 = hashlib.sha256
_digest = type(_sha256()).digest  # the unbound ``.digest``: maps over hash objects in C


def leaf_hash(data: bytes) -> bytes:
    """``sha256(0x00 || data)``: the hash of one leaf's data."""
    return _sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``sha256(0x01 || left || right)``: the hash of an interior node."""
    return _sha256(b"\x01" + left + right).digest()


class Accumulator:
    """Streaming Merkle tree head: O(log n) memory, the root of any prefix as it grows.

    Keeps the roots of the perfect subtrees that make up the first ``size`` leaves (largest
    first); the RFC tree's root folds them from the right.
    """

    __slots__ = ("_stack", "size")

    def __init__(self) -> None:
        self._stack: list[bytes] = []
        self.size = 0

    def append(self, leaf: bytes) -> None:
        h = leaf
        n = self.size
        stack = self._stack
        # Each trailing 1 bit of the old size is a perfect subtree that now gets a sibling.
        while n & 1:
            h = _sha256(b"\x01" + stack.pop() + h).digest()
            n >>= 1
        stack.append(h)
        self.size += 1

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        return _fold(self._stack)

    def extend(self, leaves: Sequence[bytes], roots_at: Collection[int] = ()) -> dict[int, bytes]:
        """Append ``leaves`` in order, exactly as one :meth:`append` each, and return the root
        of every tree size in ``roots_at`` that the tree passes through (``size < k <= size +
        len(leaves)``), as :meth:`root` would have returned it at that size.

        Built a level at a time: every node of a level is hashed in one pass over the level
        (no Python-level loop per leaf), so a batch costs about one sha256 call per leaf.
        """
        start = self.size
        end = start + len(leaves)
        if end == start:
            return {}
        # The pending perfect subtrees of the old tree, by height (the stack is largest first).
        pending = dict(zip((h for h in reversed(range(start.bit_length())) if start >> h & 1),
                           self._stack, strict=True))
        levels: list[tuple[int, list[bytes]]] = []  # per height: (index of the first node, nodes)
        nodes = list(leaves)
        for height in range(end.bit_length()):
            base = start >> height
            if height in pending:  # a left sibling waiting for its right half
                nodes.insert(0, pending[height])
                base -= 1
            levels.append((base, nodes))
            pairs = iter(nodes)
            nodes = list(map(_digest, map(_sha256, map(b"".join, zip(repeat(b"\x01"), pairs,
                                                                        pairs)))))
        self._stack = [levels[h][1][-1] for h in reversed(range(end.bit_length())) if end >> h & 1]
        self.size = end
        roots: dict[int, bytes] = {}
        for k in sorted(set(roots_at)):
            if start < k <= end:
                parts, offset = [], 0
                for h in reversed(range(k.bit_length())):
                    if k >> h & 1:
                        base, level = levels[h]
                        parts.append(level[(offset >> h) - base])
                        offset += 1 << h
                roots[k] = _fold(parts)
        return roots


def _fold(subtrees: list[bytes]) -> bytes:
    """The RFC tree's root from its perfect subtrees' roots (largest first), folded from the
    right."""
    r = subtrees[-1]
    for h in reversed(subtrees[:-1]):
        r = _sha256(b"\x01" + h + r).digest()
    return r


def root(leaves: Sequence[bytes]) -> bytes:
    """MTH over the given leaf hashes (RFC 9162 §2.1.1)."""
    acc = Accumulator()
    for leaf in leaves:
        acc.append(leaf)
    return acc.root()


def _split(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def _mth(leaves: Sequence[bytes], lo: int, hi: int) -> bytes:
    acc = Accumulator()
    for i in range(lo, hi):
        acc.append(leaves[i])
    return acc.root()


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """PATH(index, D[n]) of RFC 9162 §2.1.3.1 for the tree of all ``leaves``.

    Raises:
        ValueError: ``index`` is not in ``[0, len(leaves))``.
    """
    n = len(leaves)
    if not 0 <= index < n:
        raise ValueError(f"leaf index {index} outside tree of size {n}")
    out: list[bytes] = []
    lo, hi, m = 0, n, index
    # Walk down from the root; siblings are collected top-down and returned bottom-up.
    while hi - lo > 1:
        k = _split(hi - lo)
        if m < k:
            out.append(_mth(leaves, lo + k, hi))
            hi = lo + k
        else:
            out.append(_mth(leaves, lo, lo + k))
            lo, m = lo + k, m - k
    out.reverse()
    return out


def consistency_proof(leaves: Sequence[bytes], size1: int) -> list[bytes]:
    """PROOF(size1, D[n]) of RFC 9162 §2.1.4.1 from the tree of the first ``size1`` leaves to
    the tree of all ``leaves``. Empty when ``size1 == len(leaves)``.

    Raises:
        ValueError: ``size1`` is not in ``[1, len(leaves)]``.
    """
    n = len(leaves)
    if not 0 < size1 <= n:
        raise ValueError(f"consistency proof from size {size1} to {n} is undefined")
    out: list[bytes] = []
    lo, hi, m, whole = 0, n, size1, True
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            out.append(_mth(leaves, lo + k, hi))
            hi = lo + k
        else:
            out.append(_mth(leaves, lo, lo + k))
            lo, m, whole = lo + k, m - k, False
    if not whole:
        out.append(_mth(leaves, lo, hi))
    out.reverse()
    return out


def _eq(a: bytes, b: bytes) -> bool:
    return hmac.compare_digest(a, b)


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root_hash: bytes
) -> None:
    """Verify an inclusion proof (RFC 9162 §2.1.3.2).

    Raises:
        ProofInvalid: the proof does not show ``leaf`` at ``index`` in the tree ``root_hash``.
    """
    if not 0 <= index < size:
        raise ProofInvalid(f"leaf index {index} outside tree of size {size}")
    if len(leaf) != HASH_SIZE:
        raise ProofInvalid("leaf hash has the wrong length")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if len(p) != HASH_SIZE:
            raise ProofInvalid("proof element has the wrong length")
        if sn == 0:
            raise ProofInvalid("proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofInvalid("proof is shorter than the tree is deep")
    if not _eq(r, root_hash):
        raise ProofInvalid("computed root does not match the tree root")


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Verify that the tree (size2, root2) extends the tree (size1, root1) (RFC 9162 §2.1.4.2).

    A proof from the empty tree is meaningless and refused, as transparency-dev does.

    Raises:
        ProofInvalid: the proof does not show consistency.
    """
    if size2 < size1:
        raise ProofInvalid(f"size2 {size2} is smaller than size1 {size1}")
    if size1 == 0:
        raise ProofInvalid("a consistency proof from the empty tree is meaningless")
    if size1 == size2:
        if proof:
            raise ProofInvalid("sizes are equal but the proof is not empty")
        if not _eq(root1, root2):
            raise ProofInvalid("sizes are equal but the roots differ")
        return
    if not proof:
        raise ProofInvalid("empty consistency proof")
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # size1 is a power of two: its root is the first node
        path.insert(0, root1)
    for p in path:
        if len(p) != HASH_SIZE:
            raise ProofInvalid("proof element has the wrong length")
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofInvalid("proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofInvalid("proof is shorter than the tree is deep")
    if not _eq(fr, root1):
        raise ProofInvalid("proof does not reproduce the first root")
    if not _eq(sr, root2):
        raise ProofInvalid("proof does not reproduce the second root")
