"""The frozen study runs the ECT paper's protocol limits and no other stop rule, and says so.

The paper's closed loop has two limits (four decisions, three additional tool calls). The study
used to run ``runner.control``'s default no-progress detector as well, so a run that repeated a
rejected finish ended ``no_progress`` and was scored "recoverable stuck". Now every control
beyond the protocol is off in ``schedules/v2.toml``, and the lock and each store's header record
the rules in force.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.canonical import loads_strict
from runner.loop import StopRules
from runner.store import Store
from runner.study import RunHeader, SpecError, load_spec, read_lock, study_paths
from tests.study.conftest import Reference
from tests.study.support import REPO, make_study

V2 = REPO / "schedules" / "v2.toml"
OFF = {"no_progress": False, "token_ceiling": None, "side_effect_call_limit": None}


def test_the_frozen_spec_turns_every_control_beyond_the_protocol_off() -> None:
    spec = load_spec(V2)
    assert spec.stop_rules == StopRules()
    rules = spec.stop_rules_in_force()
    assert rules["protocol"] == {"max_decisions": 4, "max_additional_tool_calls": 3}
    assert rules["beyond_protocol"] == OFF


def test_the_committed_lock_records_the_stop_rules_in_force() -> None:
    lock = read_lock(study_paths(V2).lock)
    assert lock.stop_rules == load_spec(V2).stop_rules_in_force()
    assert lock.stop_rules["beyond_protocol"] == OFF
    assert "max_tokens" not in lock.to_json()["generation"]["budget"]


def test_turning_a_rule_on_changes_the_lock(tmp_path: Path) -> None:
    spec_path = make_study(tmp_path / "np", edits={"no_progress = false": "no_progress = true",
                                                   "token_ceiling = 0": "token_ceiling = 50000"})
    lock = read_lock(study_paths(spec_path).lock)
    assert lock.stop_rules["beyond_protocol"] == {
        "no_progress": True, "token_ceiling": 50000, "side_effect_call_limit": None}


@pytest.mark.parametrize("edit, needle", [
    ({"no_progress = false": "no_progress = 1"}, "[stop_rules].no_progress"),
    ({"token_ceiling = 0": "token_ceiling = -5"}, "[stop_rules].token_ceiling"),
    ({"side_effect_call_limit = 0": "side_effect_call_limit = 0\nstalled = 2"}, "unknown field"),
    ({"max_additional_tool_calls = 3": "max_additional_tool_calls = 3\nmax_tokens = 400000"},
     "[budget] has unknown field 'max_tokens'"),
])
def test_a_malformed_stop_rules_table_is_refused(tmp_path: Path, edit: dict[str, str],
                                                  needle: str) -> None:
    text = V2.read_text("utf-8")
    for old, new in edit.items():
        assert old in text
        text = text.replace(old, new)
    bad = tmp_path / "bad.toml"
    bad.write_text(text, "utf-8")
    with pytest.raises(SpecError, match=None) as info:
        load_spec(bad)
    assert needle in str(info.value)


def test_the_run_header_records_the_stop_rules_in_force(reference: Reference) -> None:
    with Store.open(reference.store) as store:
        header = store.header
        lock = loads_strict(store.get_blob(header["lock_blob"]))
    assert header["stop_rules"] == lock["stop_rules"] == load_spec(reference.spec).stop_rules_in_force()
    assert header["stop_rules"]["beyond_protocol"] == OFF
    typed = RunHeader.from_header(header)
    assert typed.stop_rules == header["stop_rules"]
    assert typed.to_json()["stop_rules"] == header["stop_rules"]
    older = {k: v for k, v in header.items() if k != "stop_rules"}  # a store from before
    assert RunHeader.from_header(older).stop_rules is None
