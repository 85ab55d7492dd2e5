"""The reports' legend and Table 3's fault-to-check matching are tied to the fault registry
(``runner.worlds.FAULTS``): a fault added there gets its legend line, and an ablation can only
be matched to a registered static fault whose snapshots trip the check it removes."""

from __future__ import annotations

import dataclasses

import pytest

from runner.analysis._legend import CONDITION_CODES, legend_html
from runner.ect import verify
from runner.errors import StudyError
from runner.study import TABLE3_ABLATIONS
from runner.worlds import FAULTS, STATIC_FAULTS, Snapshot, static_grid


def test_the_legend_has_one_line_per_registered_fault_in_order() -> None:
    assert [c for c, _ in CONDITION_CODES] == ["C0", *(f.code for f in FAULTS)]
    assert dict(CONDITION_CODES) == {"C0": dict(CONDITION_CODES)["C0"]} | {
        f.code: f.legend() for f in FAULTS}
    html = legend_html()
    for f in FAULTS:
        assert f"<th>{f.code}</th><td>{f.legend()}</td>" in html.replace("&#x27;", "'")
    kinds = {f.code: f.kind for f in FAULTS}
    for code, line in CONDITION_CODES[1:]:
        assert line.startswith("closed loop, unseen: ") == (kinds[code] == "unseen")
        assert line.startswith("closed loop, trust boundary: ") == (
            kinds[code] == "trust_boundary")


def test_table3_matches_each_check_to_a_distinct_registered_static_fault() -> None:
    matched = [a.fault for a in TABLE3_ABLATIONS if a.fault is not None]
    assert len(matched) == len(set(matched)) == 6
    assert set(matched) <= set(STATIC_FAULTS)
    row = TABLE3_ABLATIONS[0]
    for bad in ("U1", "T1", "F9"):  # closed-loop only, or not registered
        with pytest.raises(StudyError, match="must be a static fault of the registry"):
            dataclasses.replace(row, fault=bad, matched=f"{row.matched}; {bad}")
    with pytest.raises(StudyError, match="named in its 'matched' words"):
        dataclasses.replace(row, fault="F6")  # the words still describe F5


def _removed(removes: tuple[str, ...], code: str) -> bool:
    # A removed name is a reason code, or a verifier step (every code of that family).
    return code in removes or code.split(".", 1)[0] in removes


def test_each_matched_fault_trips_the_check_its_ablation_removes() -> None:
    by_condition: dict[str, list[Snapshot]] = {}
    for s in static_grid()[: 9 * 6]:  # six tasks: one per family
        by_condition.setdefault(s.condition, []).append(s)
    for a in TABLE3_ABLATIONS:
        if a.fault is None:
            continue
        for s in by_condition[a.fault]:
            if a.removes == ("recovery",):
                # The recovery-availability rule: a repeated call while recovery is left.
                assert s.repeated_call and s.recovery_available, a.name
                continue
            d = verify(s.task.contract, s.ledger, s.certificate)
            codes = {r.code for r in d.reasons}
            assert any(_removed(a.removes, c) for c in codes), (a.name, s.snapshot_id, codes)
