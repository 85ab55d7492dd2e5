"""runner/control's records declare their fields once (runner/canonical's record mechanism):
the package keeps no hand-written ``to_json``/``from_json`` beyond the eval case's error wrapper
and the run record's open keys (the mechanism has no open part). (Here, not in tests/control: the mutation run rewrites
runner/control's source, so its line counts say nothing there.)"""

from __future__ import annotations

from tests.canonical.test_serialisation_budget import RUNNER, _lines


def test_the_control_package_keeps_at_most_the_eval_case_wrapper_hand_written() -> None:
    per_file = {p.name: _lines(p) for p in sorted((RUNNER / "control").glob("*.py"))}
    # 199 lines before: the eval case 80, the calibration 54, stops and steps 25, the run
    # result 20, budgets 11, the eval results 5, the guard 4
    assert {k: v for k, v in per_file.items() if v} == {"_evalcase.py": 7, "_result.py": 2}
