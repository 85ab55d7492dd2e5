"""Every simulator probability in every shipped spec follows a stated rule.

docs/protocol.md states two rules (SLIP = 0.05, COIN = 0.5); each `[simulated]` value of
`schedules/v2.toml` and `schedules/static.toml` must equal the value of the rule its comment
names, and one behaviour has one value in both specs (no table-fitted values).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from runner.policies import CriticBehaviour, PlannerBehaviour

REPO = Path(__file__).resolve().parents[2]
RULES = {"SLIP": 0.05, "COIN": 0.5}
SPECS = ("schedules/v2.toml", "schedules/static.toml")
LINE = re.compile(r"^(p_[a-z_]+)\s*=\s*([0-9.]+)\s*#\s*([A-Z]+):")


def _simulated(path: str) -> dict[str, float]:
    doc = tomllib.loads((REPO / path).read_text(encoding="utf-8"))
    return {f"{table}.{k}": float(v) for table, values in doc["simulated"].items()
            for k, v in values.items()}


@pytest.mark.parametrize("path", SPECS)
def test_every_value_is_the_value_of_the_rule_its_comment_names(path: str) -> None:
    values = _simulated(path)
    stated = {}
    for line in (REPO / path).read_text(encoding="utf-8").splitlines():
        m = LINE.match(line)
        if m:
            name, value, rule = m.groups()
            assert rule in RULES, f"{path}: {name} names no stated rule ({rule})"
            assert float(value) == RULES[rule], f"{path}: {name} = {value}, {rule} is {RULES[rule]}"
            stated[name] = rule
    assert {k.split(".", 1)[1] for k in values} == set(stated)  # every value has its rule


def test_one_behaviour_has_one_value_in_every_spec_and_the_defaults() -> None:
    defaults = {f"planner.{k}": v for k, v in PlannerBehaviour().to_json().items()}
    defaults |= {f"critic.{k}": v for k, v in CriticBehaviour().to_json().items()}
    for path in SPECS:
        for name, value in _simulated(path).items():
            assert value == defaults[name], f"{path}: {name} = {value}, default {defaults[name]}"
