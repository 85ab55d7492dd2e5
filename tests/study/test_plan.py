"""`ect plan` (issue 36): requests, tokens, dollars and wall time before the first paid call."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from runner.study import load_spec
from tests.study.support import ect, make_study, run, subprocess_env


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_study(tmp_path_factory.mktemp("plan-study"))


def test_the_plan_predicts_the_simulated_run(study: Path, tmp_path: Path) -> None:
    done = ect("plan", "--study", str(study), "--provider", "openai", "--model", "m-1",
               "--limit", "8", "--concurrency", "2", "--requests-per-minute", "60",
               "--latency-s", "0.5", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    summary = run(study, tmp_path / "sim.db", concurrency=2, limit=8)
    # the requests the simulated run made, exactly, by role and pipeline
    assert plan["requests"]["expected"] == summary.provider_attempts
    assert sum(plan["requests_by_role"].values()) == summary.provider_attempts
    assert set(plan["requests_by_role"]) <= {"planner", "critic", "self_check"}
    assert sum(plan["requests_by_pipeline"].values()) == summary.provider_attempts
    r = plan["requests"]
    assert r["min"] <= r["expected"] <= r["max"]
    spec = load_spec(study)
    assert r["max"] <= 8 * spec.budget.max_decisions * 3
    # dollars are the spec's price table times the token estimate
    price = plan["price"]
    expected_usd = (plan["input_tokens"]["expected"] * price["input_per_mtok"]
                    + plan["output_tokens"]["expected"] * price["output_per_mtok"]) / 1e6
    assert plan["cost_usd"]["expected"] == pytest.approx(expected_usd, rel=1e-6)
    # at 60 requests a minute the throttle bounds the run: the first request at once, each next
    # one 1.001 s later (the throttle's spacing), then the last reply's assumed latency
    assert plan["wall_bound"] == "the requests-per-minute throttle"
    assert plan["wall_s"]["expected"] == pytest.approx((r["expected"] - 1) * 1.001 + 0.5,
                                                       rel=1e-6)
    assert plan["throttle"] == {"requests_per_minute": 60, "tokens_per_minute": None}
    assert plan["simulated"] is True and plan["simulator"]
    assert (plan["provider"], plan["model"], plan["cells"]) == ("openai", "m-1", 8)
    assert not list(study.parent.glob("*.db"))  # the simulated pass left no store behind


def test_the_text_plan_says_simulated_and_names_its_parameters(study: Path) -> None:
    done = ect("plan", "--study", str(study), "--limit", "2", "--requests-per-minute", "0")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "plan for " in out and "2 cells on gemini/" in out
    assert "SIMULATED" in out and "simulated.planner.p_premature_finish=" in out
    assert "provider requests:" in out and "wall time:" in out and "$" in out
    assert "cell.committed" not in done.stderr  # the simulated pass's log is not the plan


def test_bad_plan_input_is_one_line(tmp_path: Path) -> None:
    done = ect("plan", "--study", str(tmp_path / "missing.toml"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    done = ect("plan", "--limit", "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_a_first_cells_pilot_runs_a_prefix_live_and_rescales_the_plan(study: Path,
                                                                      tmp_path: Path) -> None:
    from tests.fake_provider import FakeProvider
    from tests.study.support import result_digests

    key = tmp_path / "api.key"
    key.write_text("fake-key-0123456789\n", "ascii")
    key.chmod(0o600)
    pilot = tmp_path / "pilot.db"
    common = ("--study", str(study), "--provider", "openai", "--model", "gemini-2.5-flash",
              "--limit", "12", "--concurrency", "2", "--requests-per-minute", "0")
    with FakeProvider() as server:
        plain = ect("plan", *common, "--json")
        assert plain.returncode == 0, plain.stderr
        done = ect("plan", *common, "--base-url", server.url, "--credential-file", str(key),
                   "--pilot", "4", "--pilot-cells", "first", "--pilot-store", str(pilot),
                   "--json", env=subprocess_env())
        assert done.returncode == 0, done.stderr
        sent = len(server.seen)
        plan, before = json.loads(done.stdout), json.loads(plain.stdout)
        p = plan["pilot"]
        assert p["cells"] == 4 and len(result_digests(pilot)) == 4
        assert (p["sampling"], p["rows"], p["ratio"]) == ("first", [1, 2, 3, 4], None)
        assert p["requests"] == p["attempts"] == sent  # no fault: one attempt a call
        assert p["simulated_requests"] >= 4
        # the pilot's cells count as what they really sent, the others as simulated
        assert plan["requests"]["expected"] == (before["requests"]["expected"]
                                                - p["simulated_requests"] + p["requests"])
        # tokens a request come from the live usage, the latency from the pilot's replies
        assert plan["input_tokens"]["expected"] == pytest.approx(
            plan["requests"]["expected"] * p["input_tokens"] / p["requests"], rel=1e-6)
        assert plan["latency_from"] == "the pilot"
        assert plan["latency_s"] == pytest.approx(p["latency_s"], abs=1e-6)
        # the pilot is a real run: it continues with the printed kind of command
        resumed = ect("resume", "--store", str(pilot), "--credential-file", str(key),
                      "--limit", "6", "--quiet", env=subprocess_env())
        assert resumed.returncode == 0, resumed.stderr
    assert len(result_digests(pilot)) == 6


def test_pilot_options_without_a_pilot_are_refused(study: Path, tmp_path: Path) -> None:
    done = ect("plan", "--study", str(study), "--pilot", "2")
    assert done.returncode == 2 and "--pilot-store" in done.stderr
    done = ect("plan", "--study", str(study), "--base-url", "http://127.0.0.1:9/v1")
    assert done.returncode == 2 and "--pilot N only" in done.stderr
    done = ect("plan", "--study", str(study), "--pilot-cells", "first")
    assert done.returncode == 2 and "--pilot N only" in done.stderr
    done = ect("plan", "--study", str(study), "--limit", "2", "--pilot", "3", "--pilot-store",
               str(tmp_path / "p.db"))
    assert done.returncode == 2 and "more than the 2 cells" in done.stderr


def test_a_spread_pilot_takes_every_stratum_evenly_over_tasks(study: Path) -> None:
    from runner.study import pilot_rows, read_schedule, study_paths

    rows = read_schedule(study_paths(study).schedule)
    strata = {(r.checkpoint, r.policy) for r in rows}
    assert len(strata) == 8 and len(rows) > 16
    picked = pilot_rows(rows, 8)
    # one cell of each stratum, not the first task's cells: over tasks and their faults
    assert {(r.checkpoint, r.policy) for r in picked} == strata
    assert [r.row for r in picked] == sorted(r.row for r in picked)
    assert len({r.task_id for r in picked}) > 1
    assert len({r.fault for r in picked if r.checkpoint == "incomplete"}) > 1
    assert [r.row for r in pilot_rows(rows, 8, "first")] == list(range(1, 9))
    # two a stratum: evenly spaced over its rows, each stratum at its own phase
    twice = pilot_rows(rows, 16)
    assert len(twice) == 16 and len({r.task_id for r in twice}) > 2
    for key in strata:
        members = [r.row for r in rows if (r.checkpoint, r.policy) == key]
        at = [members.index(r.row) for r in twice if (r.checkpoint, r.policy) == key]
        assert len(at) == 2 and abs((at[1] - at[0]) - len(members) / 2) <= 1
    # more than the rows: every row once
    assert pilot_rows(rows[:5], 9) == rows[:5]
    with pytest.raises(ValueError, match="pilot sampling"):
        pilot_rows(rows, 2, "last")


def test_a_spread_pilot_rescales_every_other_cell_by_its_ratio(study: Path,
                                                               tmp_path: Path) -> None:
    from runner.study import PlanSettings, ProviderChoice, plan_study
    from tests.fake_provider import FakeProvider

    settings = PlanSettings(study, provider="openai", model="gemini-2.5-flash", concurrency=2,
                            limit=16, requests_per_minute=0, tokens_per_minute=0)
    before = plan_study(settings)
    with FakeProvider() as server:
        plan = plan_study(dataclasses.replace(
            settings, pilot=4, pilot_store=tmp_path / "pilot.db", pilot_probes="mandatory",
            pilot_choice=ProviderChoice("openai", "gemini-2.5-flash", server.url)))
        sent = len(server.seen)
    p = plan.pilot
    assert p is not None and p.sampling == "spread" and p.cells == 4
    assert len({r % 4 for r in p.rows}) == 4  # the four pipelines (canonical order walks them)
    assert p.requests == p.attempts == sent
    assert p.ratio == pytest.approx(p.requests / p.simulated_requests)
    rest = before.requests.expected - p.simulated_requests
    assert plan.requests.expected == pytest.approx(p.requests + rest * p.ratio)
    assert p.ratio_se is not None and plan.requests_se == pytest.approx(rest * p.ratio_se)
    out = plan.to_json()
    assert out["pilot"]["rows"] == list(p.rows) and out["requests_se"] is not None
    # the pilot size that brings one standard error within 10%: at least this pilot's, and
    # growing as the square of the error
    rel = plan.requests_se / plan.requests.expected
    assert out["pilot_cells_for_10pct"] == max(4, math.ceil(4 * (rel / 0.10) ** 2))
    assert before.pilot_cells_for() is None
    text = "\n".join(plan.lines())
    assert "spread over the strata" in text and "a sample the run does not continue" in text
    # the sample is not a prefix of the run: resuming it is refused in one line, nothing run
    done = ect("resume", "--store", str(tmp_path / "pilot.db"), "--provider", "simulated",
               "--quiet", env=subprocess_env())
    assert done.returncode != 0 and "Traceback" not in done.stderr


def test_the_pilots_retries_are_planned(study: Path, tmp_path: Path) -> None:
    """Regression (issue 36): the plan counted calls while a run's requests are its attempts,
    so every retry of a fault was missing from the plan; the pilot's attempts a call now scale
    it. A pilot of every planned cell against a faulty fake API must predict exactly the
    attempts a run of the same cells makes against the same faults."""
    from runner.study import PlanSettings, ProviderChoice, plan_study
    from tests.fake_provider import FakeProvider, Faults

    faults = {"503": 0.3}
    with FakeProvider(Faults(first_faults=dict(faults))) as server:
        plan = plan_study(PlanSettings(
            study, provider="openai", model="gemini-2.5-flash", concurrency=2, limit=8,
            requests_per_minute=600, tokens_per_minute=0, pilot=8,
            pilot_store=tmp_path / "pilot.db", pilot_probes="mandatory",
            pilot_choice=ProviderChoice("openai", "gemini-2.5-flash", server.url)))
    with FakeProvider(Faults(first_faults=dict(faults))) as server:
        choice = ProviderChoice("openai", "gemini-2.5-flash", server.url)
        summary = run(study, tmp_path / "run.db", concurrency=2, limit=8, provider=choice)
    assert plan.pilot is not None and plan.pilot.attempts > plan.pilot.requests
    assert summary.provider_attempts > plan.pilot.requests
    assert plan.requests.expected == pytest.approx(summary.provider_attempts)
    # under the throttle, what the pilot took beyond its spaced attempts is planned too: a pilot
    # of every cell predicts its own wall time
    p = plan.pilot
    spaced = (p.attempts - 1) * 1.001 * 60 / 600 + plan.latency_s
    assert plan.throttle_overhead_s == pytest.approx(max(0.0, p.wall_s - spaced))
    assert plan.wall_bound == "the requests-per-minute throttle"
    assert plan.wall_s.expected == pytest.approx(max(spaced, p.wall_s))
