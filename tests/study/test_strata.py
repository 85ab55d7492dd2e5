"""Each fault stratum exercises the check it is named for; reason codes per stratum; overrides.

Measured on the old planner (it never used a checkpoint's draft certificate): over the 72
incomplete ECT cells there was no ``transform.*`` reason on U3, no coverage reason on F1 and no
``evidence.unknown_receipt`` on F7. The slice below runs every incomplete checkpoint of the
frozen spec under ECT with the spec's seeds and simulator parameters (tool calls in-process:
the sandbox is not what is under test here; the study's own runs use it).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from runner.policies import CriticBehaviour, PlannerBehaviour, simulated_responder
from runner.providers import build
from runner.study import (
    AuditGroup,
    CellRecord,
    SpecError,
    StudySpec,
    UnknownParameter,
    cell_result,
    load_spec,
    reason_codes_by_stratum,
    simulator_parameters,
    with_overrides,
)
from runner.study._cell import run_cell_trajectory
from runner.study._lock import closed_loop_refs
from runner.study._schedule import build_schedule
from runner.worlds import closed_loop_checkpoints, world_snapshot
from runner.worlds.tools import call_tool
from tests.study.support import REPO

V2 = REPO / "schedules" / "v2.toml"

# The check each fault is named for (docs/protocol.md's fault list, docs/formats.md's check families):
# a reason-code prefix the verifier gives when that check fails. F8 (a repeated call while a
# recovery is available) is matched by the pipeline's recovery-availability rule, which gives
# no verifier reason code, so it has no entry.
MATCHED = {
    "F1": "coverage.",
    "F2": "scope.entity_mismatch",
    "F3": "evidence.exec_error",
    "F4": "scope.date_mismatch",
    "F5": "coverage.missing_slot",
    "F6": "replay.mismatch",
    "F7": "evidence.unknown_receipt",
    "U1": "evidence.invalid",
    "U2": "scope.duplicate_key",
    "U3": "transform.",
    "T1": "evidence.conflicting_receipts",
}


async def _tool(world_id: str, tool_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return call_tool(world_snapshot(world_id), tool_id, args)


def _records(spec: StudySpec, *, policy: str, checkpoint: str) -> list[CellRecord]:
    rows = [r for r in build_schedule(spec, closed_loop_refs())
            if r.policy == policy and r.checkpoint == checkpoint]
    checkpoints = {c.checkpoint_id: c for c in closed_loop_checkpoints()}
    planner = PlannerBehaviour.from_json(spec.simulated.get("planner", {}))
    critic = CriticBehaviour.from_json(spec.simulated.get("critic", {}))
    out: list[CellRecord] = []

    async def go() -> None:
        for row in rows:
            provider = build("simulated", responder=simulated_responder(planner, critic))
            t = await run_cell_trajectory(spec, row, checkpoints[row.checkpoint_id], provider,
                                          _tool)
            out.append(CellRecord(schedule_row=row, result=cell_result(row, t, simulated=True),
                                  audit=AuditGroup(None, None, ()), artifacts={},
                                  code_version="test"))

    anyio.run(go)
    return out


@pytest.fixture(scope="module")
def ect_incomplete() -> list[CellRecord]:
    return _records(load_spec(V2), policy="ect", checkpoint="incomplete")


def test_every_fault_stratum_exercises_its_matched_check_under_ect(
    ect_incomplete: list[CellRecord],
) -> None:
    strata = {s.stratum: s for s in reason_codes_by_stratum(ect_incomplete)}
    assert set(strata) == {*MATCHED, "F8"}
    for fault, prefix in MATCHED.items():
        assert strata[fault].cells == 6, fault  # two tasks x three seeds
        hits = {c: n for c, n in strata[fault].codes.items() if c.startswith(prefix)}
        assert hits, f"{fault}: no {prefix}* reason among {strata[fault].codes}"


def test_reason_codes_count_cells_once_per_code_in_canonical_order(
    ect_incomplete: list[CellRecord],
) -> None:
    strata = reason_codes_by_stratum(ect_incomplete)
    assert [s.stratum for s in strata] == ["F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "U1",
                                           "U2", "U3", "T1"]
    by = {s.stratum: s for s in strata}
    for record in ect_incomplete:
        stratum = by[record.result.outcome.fault or "clean"]
        codes = {r.code for d in record.result.decisions
                 for r in (d.pipeline.reasons if d.pipeline else ())}
        assert codes <= set(stratum.codes)
    for s in strata:
        assert all(1 <= n <= s.cells for n in s.codes.values())
        assert list(s.codes) == sorted(s.codes)


def test_reason_codes_name_every_pipeline_and_the_clean_stratum() -> None:
    spec = load_spec(V2)
    clean = _records(spec, policy="controller", checkpoint="clean")[:6]
    strata = reason_codes_by_stratum(clean)
    assert [(s.stratum, s.pipeline, s.cells) for s in strata] == [("clean", "controller", 6)]


def test_every_simulator_parameter_has_a_dotted_name_the_frozen_spec_states() -> None:
    spec = load_spec(V2)
    names = simulator_parameters(spec)
    stated = {f"simulated.{t}.{k}" for t, table in spec.simulated.items() for k in table}
    assert set(names) == stated  # the spec states each one (with its reasoning beside it)
    assert names["simulated.planner.p_reuse_draft"] == 0.5


def test_overrides_replace_a_parameter_and_are_recorded() -> None:
    spec = load_spec(V2)
    changed = with_overrides(spec, {"simulated.planner.p_reuse_draft": "0.25",
                                    "simulated.critic.p_reject_supported": 1})
    assert changed.simulated["planner"]["p_reuse_draft"] == 0.25
    assert changed.simulated["critic"]["p_reject_supported"] == 1.0
    assert spec.simulated["planner"]["p_reuse_draft"] == 0.5  # the original is untouched
    assert changed.overrides == {"simulated.critic.p_reject_supported": 1.0,
                                 "simulated.planner.p_reuse_draft": 0.25}
    assert changed.digest != spec.digest and changed.raw == spec.raw
    assert with_overrides(spec, {}).digest == spec.digest


def test_an_unknown_parameter_is_a_typed_error_listing_the_valid_names() -> None:
    spec = load_spec(V2)
    with pytest.raises(UnknownParameter) as info:
        with_overrides(spec, {"simulated.planner.p_reuse_drafts": 0.1})
    assert info.value.name == "simulated.planner.p_reuse_drafts"
    assert info.value.valid == tuple(simulator_parameters())
    assert "simulated.planner.p_reuse_draft," in str(info.value)
    assert isinstance(info.value, SpecError)


@pytest.mark.parametrize("value", [1.5, -0.1, "half", True, float("nan"), None])
def test_an_override_outside_zero_to_one_is_refused(value: object) -> None:
    with pytest.raises(SpecError, match=r"simulated\.planner\.p_premature_finish"):
        with_overrides(load_spec(V2), {"simulated.planner.p_premature_finish": value})


def test_an_override_reaches_the_planner() -> None:
    """With the draft never submitted, the U3 stratum no longer shows the transform check: the
    parameter is what makes it fire (a reader can see what follows from the simulator)."""
    spec = with_overrides(load_spec(V2), {"simulated.planner.p_reuse_draft": 0.0})
    records = [r for r in _records(spec, policy="ect", checkpoint="incomplete")
               if r.result.outcome.fault == "U3"]
    (u3,) = reason_codes_by_stratum(records)
    assert not any(c.startswith("transform.") for c in u3.codes)
