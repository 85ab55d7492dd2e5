"""A study that survives a paid API (issue 26): faults, throttle, the halt policy and resume.

Every test runs ``ect run``/``ect resume`` (child processes, mandatory probes) with
``--provider openai`` (or ``gemini``, through the real google-genai client) against
:class:`tests.fake_provider.FakeProvider`, whose replies are a deterministic function of the
request bytes: a cell whose result digest differs from the undisturbed run's is the runner's
doing. The runs are kept small (``--limit``); the long variants are marked ``slow``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner.canonical import loads_strict
from tests.fake_provider import FakeProvider, Faults
from tests.study.support import REPO, ect, make_study, result_digests, subprocess_env

LIMIT = 6
CELLS = LIMIT


@pytest.fixture(scope="module")
def live_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small study with a 3 s per-request timeout (a hung request costs 3 s, not 60)."""
    return make_study(tmp_path_factory.mktemp("paid-study"),
                      edits={"timeout_s = 60.0": "timeout_s = 3.0"})


def _run(spec: Path, store: Path, server: FakeProvider, *extra: str, resume: bool = False,
         provider: str = "openai", limit: int = LIMIT) -> Any:
    url = server.url if provider == "openai" else server.origin
    args = ["resume" if resume else "run", "--store", str(store),
            "--provider", provider, "--base-url", url, "--limit", str(limit),
            "--concurrency", "4", "--json", "--quiet", *extra]
    if not resume:
        args[1:1] = ["--study", str(spec)]
    if provider == "gemini":
        args += ["--credential-env", "ECT_FAKE_KEY"]
    else:
        args += ["--model", "gemini-2.5-flash"]
    return ect(*args, env=subprocess_env(ECT_FAKE_KEY="fake-key-0123456789"))


@pytest.fixture(scope="module")
def undisturbed(live_study: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    store = tmp_path_factory.mktemp("undisturbed") / "ref.db"
    with FakeProvider() as server:
        done = _run(live_study, store, server)
    assert done.returncode == 0, done.stderr
    digests = result_digests(store)
    assert len(digests) == CELLS
    return digests


def _committed_failures(store: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        bodies = [loads_strict(r[0]) for r in conn.execute("SELECT body FROM records WHERE seq > 0")]
    finally:
        conn.close()
    return [c["failure"] for b in bodies for c in b["audit"]["calls"] if c["failure"] is not None]


def _attempts(store: Path) -> int:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM attempts WHERE kind = 'begin'").fetchone()[0])
    finally:
        conn.close()


def _assert_equal_and_clean(store: Path, undisturbed: dict[str, str]) -> None:
    assert result_digests(store) == undisturbed
    transport = [f for f in _committed_failures(store) if f.get("class") != "model_output"]
    assert transport == [], transport


def test_throttled_run_under_a_rate_limit_and_faults_sees_no_429_and_changes_no_cell(
        live_study: Path, undisturbed: dict[str, str], tmp_path: Path) -> None:
    # The server allows 10 requests a second and answers the first sending of some request
    # bodies with 503 (5%), 500, a hang (the 3 s request timeout), a body that is not JSON, a
    # truncated body or a closed connection; the run is throttled to 480 requests a minute.
    faults = Faults(rate_limit=(10, 1.0),
                    first_faults={"503": 0.05, "500": 0.03, "hang": 0.03, "malformed": 0.04,
                                  "truncated": 0.04, "close": 0.04})
    store = tmp_path / "throttled.db"
    with FakeProvider(faults) as server:
        done = _run(live_study, store, server, "--requests-per-minute", "480")
    assert done.returncode == 0, done.stderr
    assert server.stats["429"] == 0, server.stats
    injected = {k: v for k, v in server.stats.items() if k != "ok"}
    assert sum(injected.values()) >= 3, server.stats  # the faults did happen
    _assert_equal_and_clean(store, undisturbed)
    summary = json.loads(done.stdout)
    assert summary["provider_failures"]["by_class"]["transport"] == 0
    # every attempt, retried ones included, is in the journal and in the count
    assert summary["provider_attempts"] == _attempts(store) == len(server.seen)
    assert summary["throttle"] == {"requests_per_minute": 480, "tokens_per_minute": None}
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        header = loads_strict(conn.execute("SELECT body FROM records WHERE seq = 0").fetchone()[0])
    finally:
        conn.close()
    assert header["throttle"] == {"requests_per_minute": 480, "tokens_per_minute": None}


def test_a_503_storm_halts_without_committing_a_damaged_cell_and_resume_finishes(
        live_study: Path, undisturbed: dict[str, str], tmp_path: Path) -> None:
    store = tmp_path / "storm.db"
    # a burst that outlasts any single retry, once the first cells have had some replies
    with FakeProvider(Faults(storm=12, storm_after=8)) as server:
        halted = _run(live_study, store, server)
        assert halted.returncode == 4, halted.stderr
        assert "transport failure" in halted.stderr and "server_error" in halted.stderr
        summary = json.loads(halted.stdout)
        assert summary["transport_halts"], summary
        assert all(f["class"] == "model_output" for f in _committed_failures(store))
        committed = result_digests(store)
        assert len(committed) < CELLS
        assert all(undisturbed[c] == d for c, d in committed.items())
        paid = _orphan_replies(store)  # replies already paid for, for cells not committed
        assert paid >= 1
        server.faults.storm = 0  # the storm is over
        sent_before = len(server.seen)
        resumed = _run(live_study, store, server, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    _assert_equal_and_clean(store, undisturbed)
    # resume does not pay twice: every journaled reply of an uncommitted cell was replayed
    summary = json.loads(resumed.stdout)
    assert summary["replayed_attempts"] == paid
    assert summary["provider_attempts"] == len(server.seen) - sent_before


def _orphan_replies(store: Path) -> int:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        committed = {loads_strict(r[0])["cell_id"]
                     for r in conn.execute("SELECT body FROM records WHERE seq > 0")}
        ends = [(r[0], loads_strict(r[1])) for r in
                conn.execute("SELECT cell_id, body FROM attempts WHERE kind = 'end'")]
    finally:
        conn.close()
    return sum(1 for cell, body in ends if cell not in committed
               and "attempt" in body["entry"]  # not a halt entry
               and body["entry"]["attempt"]["status"] == 200
               and body["entry"]["attempt"]["response_sha256"] is not None)


def test_record_policy_keeps_the_strict_reading_and_counts_it(tmp_path: Path) -> None:
    # Through the real google-genai client: a 503 storm under on_transport_failure = "record"
    # is kept as the calls' outcome (the paper's strict reading), counted by class and role.
    spec = make_study(tmp_path / "study", edits={
        'on_transport_failure = "halt"': 'on_transport_failure = "record"'})
    lock = json.loads((spec.parent / "v2.lock.json").read_text("utf-8"))
    assert lock["generation"]["retry"]["on_transport_failure"] == "record"
    store = tmp_path / "record.db"
    with FakeProvider(Faults(storm=4)) as server:
        done = _run(spec, store, server, provider="gemini", limit=2)
    assert done.returncode == 0, done.stderr
    failures = _committed_failures(store)
    assert failures and failures[0]["class"] == "transport"
    assert failures[0]["kind"] == "server_error" and failures[0]["role"] == "planner"
    summary = json.loads(done.stdout)
    counts = summary["provider_failures"]
    assert counts["by_class"]["transport"] == len(failures) >= 1
    assert counts["by_role"]["planner"] >= 1 and counts["cells"] >= 1
    assert counts["cells_with_transport_failure"]


@pytest.mark.slow
def test_gemini_client_through_faults_changes_no_cell(live_study: Path, tmp_path: Path) -> None:
    faults = Faults(first_faults={"503": 0.3, "malformed": 0.2, "close": 0.2})
    ref, disturbed = tmp_path / "g-ref.db", tmp_path / "g.db"
    with FakeProvider() as server:
        clean = _run(live_study, ref, server, provider="gemini", limit=3)
    assert clean.returncode == 0, clean.stderr
    with FakeProvider(faults) as server:
        done = _run(live_study, disturbed, server, provider="gemini", limit=3)
    assert done.returncode == 0, done.stderr
    assert sum(v for k, v in server.stats.items() if k != "ok") >= 1, server.stats
    _assert_equal_and_clean(disturbed, result_digests(ref))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["503", "500", "hang", "malformed", "truncated", "close"])
def test_each_fault_alone_over_a_longer_run(kind: str, tmp_path: Path) -> None:
    spec = make_study(tmp_path / "study", edits={"timeout_s = 60.0": "timeout_s = 3.0"})
    ref, disturbed = tmp_path / "ref.db", tmp_path / "disturbed.db"
    with FakeProvider() as server:
        assert _run(spec, ref, server, limit=24).returncode == 0
    with FakeProvider(Faults(first_faults={kind: 0.15})) as server:
        done = _run(spec, disturbed, server, limit=24)
    assert done.returncode == 0, done.stderr
    assert server.stats[kind] >= 1
    _assert_equal_and_clean(disturbed, result_digests(ref))


def test_the_progress_eta_counts_only_the_cells_this_session_runs() -> None:
    # `ect resume --limit 6` on a 576-row study: the ETA is for the 4 cells left of 6, not 574.
    from runner.cli._progress import cell_fields
    from runner.study import RunSummary

    summary = RunSummary(store="s.db", total=576, committed=2, target=6)
    assert summary.goal == 6
    assert cell_fields(summary, done_now=2, elapsed=2.0)["eta"] == "ETA 4s"


@pytest.mark.parametrize(("line", "message"), [
    ('on_transport_failure = "retry"', "on_transport_failure must be one of 'halt', 'record'"),
    ("requests_per_minute = -5", "requests_per_minute must be 0 (no limit) or a positive"),
    ("tokens_per_minute = 1.5", "tokens_per_minute must be 0 (no limit) or a positive"),
    ("burst = 3", "[provider] has unknown field 'burst'"),
])
def test_a_bad_provider_table_is_refused_in_one_line(tmp_path: Path, line: str,
                                                     message: str) -> None:
    from runner.study import SpecError, load_spec

    text = (REPO / "schedules" / "v2.toml").read_text("utf-8")
    key = line.split(" = ")[0]
    lines = [x for x in text.splitlines() if not x.startswith(key + " = ")]
    at = lines.index("[provider]") + 1
    spec = tmp_path / "v2.toml"
    spec.write_text("\n".join([*lines[:at], line, *lines[at:]]) + "\n", "utf-8")
    with pytest.raises(SpecError) as e:
        load_spec(spec)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert load_spec(REPO / "schedules" / "v2.toml").provider.on_transport_failure == "halt"


@pytest.mark.slow
def test_the_whole_small_study_throttled_under_a_rate_limit_with_5pct_503s(
        tmp_path: Path) -> None:
    # 48 cells at concurrency 8; the API allows 20 requests in any 5 s and answers the first
    # sending of 5% of request bodies with 503; the run is throttled to 220 a minute.
    spec = make_study(tmp_path / "study")
    ref, throttled = tmp_path / "ref.db", tmp_path / "throttled.db"
    with FakeProvider() as server:
        assert _run(spec, ref, server, limit=48).returncode == 0
    faults = Faults(rate_limit=(20, 5.0), first_faults={"503": 0.05})
    with FakeProvider(faults) as server:
        done = _run(spec, throttled, server, "--requests-per-minute", "220", "--concurrency",
                    "8", limit=48)
    assert done.returncode == 0, done.stderr
    assert server.stats["429"] == 0 and server.stats["503"] >= 1, server.stats
    _assert_equal_and_clean(throttled, result_digests(ref))
