"""The task manifest pins every digest; a drift without a spec change fails here."""

from __future__ import annotations

import copy
import json

from runner.canonical import digest, is_digest
from runner.worlds import manifest_counts, task_manifest, task_manifest_digest
from tests.sizes import STATIC_SNAPSHOTS
from tests.worlds import regenerate_golden

EXPECTED_COUNTS = {
    "static": {"tasks": 48, "snapshots": STATIC_SNAPSHOTS, "heldout_fault_snapshots": 288},
    "closed_loop": {"tasks": 24, "checkpoints": 48},
}


def _golden() -> dict:
    return json.loads(regenerate_golden.GOLDEN.read_text(encoding="utf-8"))


def _first_difference(a: object, b: object, path: str = "") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}/{key}: present on one side only"
            found = _first_difference(a[key], b[key], f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}/{i}")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def test_manifest_digest_matches_the_golden_file() -> None:
    golden = _golden()
    where = _first_difference(golden["manifest"], task_manifest())
    assert where is None, (
        f"task manifest drifted at {where}; if the benchmark spec changed on purpose, run "
        "`python tests/worlds/regenerate_golden.py` and commit the new golden file"
    )
    assert golden["digest"] == task_manifest_digest()


def test_regeneration_matches_golden() -> None:
    assert regenerate_golden.render() == regenerate_golden.GOLDEN.read_text(encoding="utf-8")


def test_manifest_pins_every_task_oracle_answer_snapshot_and_checkpoint() -> None:
    m = task_manifest()
    assert m["format"] == "ect.task-manifest/1"
    assert len(m["tasks"]) == 72 and len(m["snapshots"]) == STATIC_SNAPSHOTS and len(m["checkpoints"]) == 48
    assert len(m["worlds"]) == 12
    for t in m["tasks"]:
        assert all(is_digest(t[k]) for k in ("descriptor_digest", "contract_digest", "gold_digest"))
    assert all(is_digest(s["digest"]) and is_digest(s["ledger_digest"]) for s in m["snapshots"])
    assert len({s["digest"] for s in m["snapshots"]}) == STATIC_SNAPSHOTS
    assert m["counts"] == manifest_counts() == EXPECTED_COUNTS
    assert task_manifest_digest() == digest("ect/manifest/v1", m)


def test_any_change_to_a_pinned_entry_changes_the_digest() -> None:
    m = task_manifest()
    base = digest("ect/manifest/v1", m)
    for mutate in (
        lambda x: x["tasks"][5].__setitem__("gold_digest", "sha256:" + "0" * 64),
        lambda x: x["snapshots"][100].__setitem__("gold_decision", "complete"),
        lambda x: x["worlds"].__setitem__("w03", "sha256:" + "1" * 64),
        lambda x: x["fault_assignment"]["U3"].reverse(),
    ):
        changed = copy.deepcopy(m)
        mutate(changed)
        assert digest("ect/manifest/v1", changed) != base
    # task_manifest() hands out copies: mutating one does not touch the pinned digest.
    m["tasks"].clear()
    assert task_manifest_digest() == _golden()["digest"]
