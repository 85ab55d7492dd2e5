"""`ect plan` (issue 36): requests, tokens, dollars and wall time before the first paid call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.study import load_spec
from tests.study.support import ect, make_study, run


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
    # at 60 requests a minute the throttle bounds the run: one request a second
    assert plan["wall_bound"] == "the requests-per-minute throttle"
    assert plan["wall_s"]["expected"] == pytest.approx(r["expected"], rel=1e-6)
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


def test_a_pilot_runs_the_first_cells_live_and_rescales_the_plan(study: Path,
                                                                 tmp_path: Path) -> None:
    from tests.fake_provider import FakeProvider
    from tests.study.support import result_digests, subprocess_env

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
                   "--pilot", "4", "--pilot-store", str(pilot), "--json", env=subprocess_env())
        assert done.returncode == 0, done.stderr
        sent = len(server.seen)
        plan, before = json.loads(done.stdout), json.loads(plain.stdout)
        p = plan["pilot"]
        assert p["cells"] == 4 and len(result_digests(pilot)) == 4
        assert p["requests"] == sent  # no fault: one attempt a call
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
    done = ect("plan", "--study", str(study), "--limit", "2", "--pilot", "3", "--pilot-store",
               str(tmp_path / "p.db"))
    assert done.returncode == 2 and "more than the 2 cells" in done.stderr
