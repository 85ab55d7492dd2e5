"""The closed-loop drafts come from what a premature agent observed, never from the gold answer.

A checkpoint's draft (``naive_certificate``) is shown to the planner; a value the draft holds
that its cited receipts cannot give would put the answer into the model's prompt.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runner.ect import Claim, Receipt, ReplayError, Transform, replay, values_match
from runner.worlds import closed_loop_checkpoints, observed_value
from runner.worlds._grid import _incomplete

INCOMPLETE = [cp for cp in closed_loop_checkpoints() if cp.kind == "incomplete"]


def _derivable(claim: Claim, cited: list[Receipt]) -> bool:
    """Whether a replay over (part of) what the claim cites gives its value: all of it; the
    receipts that showed a value (successful, valid, not null); those with membership receipts
    only for measured stores; with fewer than k entities, the ranking of those there are."""
    if claim.transform.op == "all_null":
        return claim.value is None  # the one value all_null can give
    seen = [r for r in cited
            if r.exec_status == "ok" and r.validation == "valid" and r.value is not None]
    measured = {r.scope.entity for r in seen if r.scope.attribute != "parent"}
    trimmed = [r for r in seen if r.scope.attribute != "parent" or r.scope.entity in measured]
    k = claim.transform.params.get("k")
    ks: list[int | None] = list(range(k, 0, -1)) if isinstance(k, int) else [None]
    for pool in (cited, seen, trimmed):
        for n in ks:
            t = claim.transform if n is None else Transform(
                claim.transform.op, {**claim.transform.params, "k": n})
            try:
                if values_match(replay(t, pool), claim.value, tolerance=0):
                    return True
            except ReplayError:
                continue
    return False


def test_no_draft_claim_equals_gold_unless_its_cited_receipts_give_it() -> None:
    leaks = []
    for cp in closed_loop_checkpoints():
        by_id = {r.receipt_id: r for r in cp.ledger.receipts}
        for claim in cp.naive_certificate.claims:
            if not values_match(claim.value, cp.task.gold[claim.slot], tolerance=0):
                continue
            cited = [by_id[e] for e in claim.evidence if e in by_id]
            if not _derivable(claim, cited):
                leaks.append((cp.checkpoint_id, claim.slot, claim.value))
    assert leaks == []


@pytest.mark.parametrize("cp", INCOMPLETE, ids=lambda cp: cp.checkpoint_id)
def test_a_draft_does_not_change_when_the_gold_answer_does(cp: Any) -> None:
    """Rebuilt for a task whose gold answer is replaced by values no receipt holds, the
    checkpoint (trace, notes and draft) is byte-identical: gold is never read."""
    fake = dataclasses.replace(
        cp.task, gold={slot: f"not-the-answer-{slot}" for slot in cp.task.gold})
    again = _incomplete(fake, cp.fault)
    assert again.trace == cp.trace
    assert again.naive_certificate.to_json() == cp.naive_certificate.to_json()


def test_observed_value_uses_only_what_was_seen() -> None:
    """A failed call's receipt is skipped (F3: the sum of what answered, not the gold total);
    with too few entities for top_k the ranking of those there are; a missing dated operand
    gives null."""
    cp = next(c for c in INCOMPLETE if c.task.task_id == "w12-aggregation-0")
    claim = next(c for c in cp.naive_certificate.claims if c.slot == "total")
    by_id = {r.receipt_id: r for r in cp.ledger.receipts}
    cited = [by_id[e] for e in claim.evidence]
    answered = [r for r in cited if r.exec_status == "ok" and r.value is not None]
    assert len(answered) < len(cited)  # the staged nested error is cited
    assert observed_value(claim.transform, cited) == sum(r.value for r in answered)
    assert claim.value == sum(r.value for r in answered) != cp.task.gold["total"]
