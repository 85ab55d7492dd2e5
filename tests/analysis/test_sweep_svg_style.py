"""sweep.svg follows the report's neutral rule for simulated gates (issue 39, finding 10): it
drew a simulated gate in green with a bare "(met)". Every sweep point is simulated, so: no
pass/fail colours, SIMULATED beside the figures, and "met" always qualified."""

from __future__ import annotations

import re

from runner.analysis import SweepResult
from runner.analysis._sweep import sweep_svg


def _result(passed: bool) -> SweepResult:
    gate = {"diff_pp": -12.5, "ci_pp": [-20.0, -5.0], "passed": passed,
            "outcome": "gate met under the simulator's parameters"}
    counts = {"U": 1, "U_den": 2, "S": 0, "S_den": 2, "FC": 0, "FC_den": 2, "R": 1, "R_den": 2}
    return SweepResult.from_json({
        "format": "ect.sweep/1",
        "spec": {"name": "ect-v2", "sha256": "sha256:" + "0" * 64},
        "grid": {"simulated.planner.p_premature_finish": [0.5]},
        "base_parameters": {"simulated.planner.p_premature_finish": 0.2},
        "seed": 1, "replicates": 10, "note": "simulated",
        "rows": [{"point": 0, "parameters": {"simulated.planner.p_premature_finish": 0.5},
                  "directory": "points/0", "h2": gate, "h3": gate,
                  "h4": {"recoveries": 1, "eligible": 2, "recovered_then_supported": 1,
                         "passed": passed, "outcome": "x"},
                  "table4": {"ect": counts}}],
    })


def test_sweep_svg_uses_the_neutral_simulated_style() -> None:
    for passed in (True, False):
        svg = sweep_svg(_result(passed)).decode("utf-8")
        assert "SIMULATED" in svg
        colours = set(re.findall(r'(?:fill|stroke)="(#[0-9a-f]{6})"', svg))
        # no pass/fail colours: the report's green (#1e7b34, #15803d) or red (#b42318, #c2410c)
        assert not colours & {"#15803d", "#1e7b34", "#16a34a", "#b42318", "#c2410c", "#dc2626"}
        assert "(met)" not in svg and "(not met)" not in svg
        assert ("(met, simulated)" if passed else "(not met, simulated)") in svg
        assert "under the simulator&#x27;s parameters" in svg
