"""`ect sweep`: the closed-loop study rerun over a grid of simulator parameters.

The end-to-end test runs the real thing (spec -> schedule -> lock -> sandboxed study -> verified
store -> report, per point, in parallel processes) on a one-world, one-seed slice of the frozen
spec (48 cells a point) so it stays CI-sized.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.analysis._sweep import (
    MAX_POINTS,
    SweepInvalid,
    UnknownSimulatorParameter,
    parse_grid,
    simulator_parameter_names,
    spec_with_overrides,
)
from runner.canonical import loads_toml
from runner.cli import cli
from runner.study import load_spec

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "schedules" / "v2.toml"
P = "simulated.planner.p_premature_finish"


def small_spec(tmp: Path) -> Path:
    """The frozen spec restricted to world w10 and one seed (48 cells)."""
    text = SPEC.read_text("utf-8")
    lines = []
    for line in text.splitlines():
        if line.startswith("worlds = "):
            line = 'worlds = ["w10"]'
        elif line.startswith("seeds = "):
            line = "seeds = 1"
        lines.append(line)
    path = tmp / "small.toml"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def test_the_grid_is_checked_before_anything_runs() -> None:
    assert parse_grid([f"{P}=0,0.5", "simulated.critic.p_reject_supported=1"]) == {
        P: (0.0, 0.5), "simulated.critic.p_reject_supported": (1.0,)}
    with pytest.raises(UnknownSimulatorParameter) as e:
        parse_grid(["simulated.planner.p_vibes=0.1"])
    assert P in str(e.value) and P in e.value.valid  # the error teaches every valid name
    for bad, msg in (
        ([f"{P}"], "expected NAME=v1,v2"),
        ([f"{P}=0.1,x"], "not a number"),
        ([f"{P}=1.5"], r"not a probability in \[0, 1\]"),
        ([f"{P}=nan"], "not a probability"),
        ([f"{P}=0.1,0.1"], "listed twice"),
        ([f"{P}=0.1", f"{P}=0.2"], "given twice"),
        ([], "at least one --param"),
    ):
        with pytest.raises(SweepInvalid, match=msg):
            parse_grid(bad)
    values = ",".join(str(i / 100) for i in range(MAX_POINTS + 1))
    with pytest.raises(SweepInvalid, match="points"):
        parse_grid([f"{P}={values}"])


def test_a_written_spec_changes_only_the_parameters_asked(tmp_path: Path) -> None:
    base = SPEC.read_bytes()
    out = spec_with_overrides(base, {P: 0.125, "simulated.critic.p_stuck_on_repeat": 1.0})
    path = tmp_path / "point.toml"
    path.write_bytes(out)
    spec = load_spec(path)  # a valid study spec
    assert spec.simulated["planner"]["p_premature_finish"] == 0.125
    assert spec.simulated["critic"]["p_stuck_on_repeat"] == 1.0
    before, after = loads_toml(base), loads_toml(out)
    after["simulated"]["planner"]["p_premature_finish"] = before["simulated"]["planner"][
        "p_premature_finish"]
    after["simulated"]["critic"]["p_stuck_on_repeat"] = before["simulated"]["critic"][
        "p_stuck_on_repeat"]
    assert after == before
    with pytest.raises(UnknownSimulatorParameter):
        spec_with_overrides(base, {"simulated.oracle.p_x": 0.5})
    assert P in simulator_parameter_names()


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    for args in (
        ["--param", "simulated.planner.p_vibes=0.1", "--out", str(tmp_path / "a")],
        ["--param", f"{P}=2", "--out", str(tmp_path / "b")],
        ["--param", f"{P}=0.5"],
        ["--study", str(tmp_path / "missing.toml"), "--param", f"{P}=0.5", "--out",
         str(tmp_path / "c")],
    ):
        res = runner.invoke(cli, ["sweep", *args])
        assert res.exit_code == 2, (args, res.output)
        assert res.output.startswith("ect: ") and len(res.output.strip().splitlines()) == 1
        assert "Traceback" not in res.output
    assert not any(tmp_path.iterdir())  # nothing was written for a refused sweep
    res = runner.invoke(cli, ["sweep", "--list"])
    assert res.exit_code == 0 and f"{P} = " in res.output


def test_a_two_point_grid_gives_two_rows_that_differ(tmp_path: Path) -> None:
    spec = small_spec(tmp_path)
    out = tmp_path / "sweep"
    res = CliRunner().invoke(cli, [
        "sweep", "--study", str(spec), "--param", f"{P}=0,1", "--out", str(out),
        "--replicates", "200", "--jobs", "2", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data == json.loads((out / "sweep.json").read_text())
    rows = data["rows"]
    assert [r["parameters"] for r in rows] == [{P: 0.0}, {P: 1.0}]
    # The planner never finishes prematurely at 0 and always may at 1: the controller's
    # premature unsupported stops, and so the H2 estimate, move with the parameter.
    never, always = rows
    assert never["table4"]["controller"]["U"] < always["table4"]["controller"]["U"]
    assert never["h2"]["diff_pp"] != always["h2"]["diff_pp"]
    for r in rows:
        assert set(r) >= {"h2", "h3", "h4", "table4", "parameters", "directory"}
        assert (out / r["directory"] / "report" / "results.json").is_file()
    # The other parameters are read from the spec, not typed in.
    planner = load_spec(spec).simulated["planner"]
    assert data["base_parameters"][P] == planner["p_premature_finish"]
    md = (out / "sweep.md").read_text()
    assert md.count("\n| 0 |") == 1 and md.count("\n| 1 |") == 1
    assert "chosen by this project" in md
    for text in (md, (out / "sweep.svg").read_text(), res.output):
        assert "PASSED" not in text and "FAILED" not in text
    assert (out / "sweep.svg").read_text().startswith("<svg")
    # progress (issue 29): each point's line says how long it has been, the rate and what is left
    points = [line for line in res.stderr.splitlines() if line.startswith("sweep: point ")]
    assert len(points) == 2, res.stderr
    assert re.fullmatch(r"sweep: point 1/2 done \(.*\): H2 .*; H3 .*; H4 .* "
                        r"\[\S+ elapsed, \S+/point, ETA \S+\]", points[0]), points[0]
    assert re.fullmatch(r"sweep: point 2/2 done \(.*\): .* \[\S+ elapsed, \S+/point\]", points[1])
    # and overall, cell by cell across the points: done/total over the whole grid
    cells = [re.fullmatch(r"sweep: (\d+)/(\d+) cells \(all points\)( .*)?", line)
             for line in res.stderr.splitlines() if "cells (all points)" in line]
    assert cells and all(cells), res.stderr
    per_point = len((out / "points" / "p001" / "study.schedule.jsonl").read_text().splitlines())
    assert {int(m[2]) for m in cells if m} == {2 * per_point}
    done = [int(m[1]) for m in cells if m]
    assert done == sorted(done) and 1 <= done[0] <= done[-1] <= 2 * per_point


def test_a_failed_point_names_itself_and_crosses_processes(tmp_path: Path) -> None:
    import pickle

    from runner.analysis._sweep import SweepPointFailed, _Point, _run_point

    point = _Point(3, {P: 0.5}, str(tmp_path / "p003"), 1, 20)
    bad = SPEC.read_bytes().replace(b'format = "ect.study/1"', b'format = "ect.study/9"')
    with pytest.raises(SweepPointFailed) as e:
        _run_point(point, bad)
    assert f"sweep point p003 ({P}=0.5): " in str(e.value)
    again = pickle.loads(pickle.dumps(e.value))  # as a worker process hands it back
    assert type(again) is type(e.value) and str(again) == str(e.value)
