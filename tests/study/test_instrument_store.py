"""The closed-loop study as an instrument, checked on a real sandboxed run of the full design.

The same three properties as ``tests/loop/test_instrument.py`` (which runs every schedule row
in-process in the default suite), read back from what ``ect run`` committed: every provider
request from the store's raw exchange blobs (the provider seam), every cell's decisions,
outcome, final certificate and new receipts. About two minutes on two cores: run with
``pytest -m slow tests/study/test_instrument_store.py``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from runner.analysis import load_outcomes_from_store
from runner.canonical import canonical_bytes, loads_strict
from runner.ect import Claim, Ledger, values_match, verify_json
from runner.policies._views import extract_view
from runner.store import Store
from runner.worlds import closed_loop_checkpoints, propose_certificate
from tests.sizes import STUDY_CELLS
from tests.study.support import make_study, run
from tests.worlds.test_drafts import _derivable

pytestmark = pytest.mark.slow

CHECKPOINTS = {cp.checkpoint_id: cp for cp in closed_loop_checkpoints()}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("demo")
    spec = make_study(tmp / "study", worlds=("w10", "w11", "w12", "w13"), seeds=3)
    path = tmp / "v2.db"
    summary = run(spec, path, concurrency=2)
    assert summary.committed == summary.total == STUDY_CELLS
    return path


def test_demo_store_requests_show_no_gold_value_their_receipts_do_not_give(store: Path) -> None:
    loaded = load_outcomes_from_store(store)
    leaks, checked = [], 0
    with Store.open(store, readonly=True) as s:
        for cell in loaded.cells:
            task = CHECKPOINTS[cell.schedule_row.checkpoint_id].task
            for call in cell.audit.calls:
                body = loads_strict(s.get_blob(call.raw[0].request))
                text = "\n".join(p.get("text") or "" for m in body["messages"]
                                 if m["role"] == "user" for p in m["parts"])
                _, view = extract_view(text)
                if "ledger" not in view:
                    continue
                ledger = Ledger.from_json(view["ledger"])
                by_id = {r.receipt_id: r for r in ledger.receipts}
                honest = {c.slot: c.value
                          for c in propose_certificate(task.contract, ledger).claims}
                for cert in (view.get("draft"), view.get("proposal")):
                    for raw in (cert or {}).get("claims") or []:
                        claim = Claim.from_json(raw)
                        if not values_match(claim.value, task.gold.get(claim.slot),
                                            tolerance=0):
                            continue
                        checked += 1
                        cited = [by_id[e] for e in claim.evidence if e in by_id]
                        if not (_derivable(claim, cited) or (
                                claim.slot in honest
                                and values_match(honest[claim.slot], claim.value, tolerance=0))):
                            leaks.append((cell.schedule_row.cell_id, claim.slot))
    assert checked > 0 and leaks == []


def test_demo_store_first_planner_actions_are_paired(store: Path) -> None:
    first: dict[tuple[str, str, int], set[bytes]] = defaultdict(set)
    for cell in load_outcomes_from_store(store).cells:
        row = cell.schedule_row
        first[(row.task_id, row.checkpoint, row.seed_index)].add(
            canonical_bytes(cell.result.decisions[0].action.to_json()))
    assert len(first) == 144
    assert [k for k, v in first.items() if len(v) != 1] == []


def test_demo_store_supported_cells_pass_the_verifier(store: Path) -> None:
    supported = 0
    for cell in load_outcomes_from_store(store).cells:
        res = cell.result
        if not res.outcome.supported_completion:
            continue
        supported += 1
        cp = CHECKPOINTS[cell.schedule_row.checkpoint_id]
        ledger = Ledger(cp.ledger.task_id, (*cp.ledger.receipts,
                                            *res.new_receipts))
        cert = {"format": "ect.certificate/1", **(res.final_certificate or {})}
        decision = verify_json(cp.task.contract.to_json(), ledger.to_json(), cert)
        assert decision.decision == "complete", cell.schedule_row.cell_id
    assert supported > 0
