"""The report shows every provider attempt, failure, halt and the billed cost (issue 36) --
only when there is something to say for a simulated run, so an undisturbed simulated report
keeps its bytes."""

from __future__ import annotations

import dataclasses
import json

from runner.analysis import ClosedLoopResults, ProviderInfo, analyse_closed_loop, render_outputs
from runner.analysis._closed_results import HaltRow, ProviderAccounting
from runner.canonical import canonical_bytes
from tests.analysis import _fixtures as fx

REAL = ProviderInfo(name="gemini", model="gemini-2.5-flash", simulated=False)

ACCOUNTING = ProviderAccounting(
    attempts=1281, retries=100, failed_attempts=100,
    failures_by_class={"transport": 100, "model_output": 0},
    failures_by_kind={"rate_limited": 29, "server_error": 65, "transport_after_output": 4,
                      "timeout_before_response": 1, "closed_before_response": 1},
    billed_attempts=1185, billed_usd=1.25, estimated_attempts=4, estimated_usd=0.004,
    unbilled_attempts=96, in_flight=0, orphan_attempts=7, orphan_usd=0.002,
    committed_usd=1.2,
    halts=(HaltRow("2026-12-03T10:00:00Z", "w10-lookup-0:clean:s1:ect", 12, "transport",
                   "provider transport failure in w10-lookup-0:clean:s1:ect"),))


def _closed(accounting: ProviderAccounting | None) -> ClosedLoopResults:
    return analyse_closed_loop(fx.typed(fx.outcomes()), fx.schedule_rows(), provider=REAL,
                               seed=2705, replicates=200, provider_accounting=accounting)


def test_the_accounting_is_in_results_json_and_its_table() -> None:
    out = render_outputs(_closed(ACCOUNTING))
    data = json.loads(out["results.json"])
    acc = data["provider_accounting"]
    assert acc["attempts"] == 1281 and acc["billed_usd"] == 1.25
    assert acc["halts"][0]["cell_id"] == "w10-lookup-0:clean:s1:ect"
    # read back strictly, equal
    again = ClosedLoopResults.from_json(data)
    assert again.provider_accounting == ACCOUNTING
    md = out["tables.md"].decode()
    assert "## Provider attempts and billed cost" in md
    assert "| billed cost, USD | 1.2500 |" in md
    assert "| committed cells' cost, USD | 1.2000 |" in md
    assert "| failed: rate_limited | 29 |" in md
    assert "halt 1" in md and "w10-lookup-0:clean:s1:ect (transport)" in md
    assert "Provider attempts and billed cost" in out["report.html"].decode()


def test_without_accounting_the_outputs_are_unchanged() -> None:
    plain = render_outputs(_closed(None))
    assert "provider_accounting" not in json.loads(plain["results.json"])
    assert b"Provider attempts and billed cost" not in plain["tables.md"]
    # the field is the only difference
    with_acc = _closed(ACCOUNTING)
    assert dataclasses.replace(with_acc, provider_accounting=None) == _closed(None)


def test_report_shows_the_plan_beside_the_actual_figures(tmp_path) -> None:
    from tests.analysis.test_store_report import make_store, report, write_schedule

    store = make_store(tmp_path, fx.outcomes())
    schedule = write_schedule(tmp_path)
    plan = {"cells": 576, "pilot": None, "simulated": True,
            "requests": {"min": 576, "expected": 1000, "max": 6912},
            "input_tokens": {"min": 1, "expected": 2, "max": 3},
            "output_tokens": {"min": 1, "expected": 2, "max": 3},
            "cost_usd": {"min": 0.1, "expected": 0.2, "max": 0.3}}
    path = tmp_path / "plan.json"
    path.write_bytes(canonical_bytes(plan))
    res = report(store, schedule, tmp_path / "out", "--plan", str(path))
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = {r["figure"]: r for r in data["plan_vs_actual"]["rows"]}
    assert rows["requests"]["expected"] == 1000 and rows["requests"]["actual"] == 576
    md = (tmp_path / "out" / "tables.md").read_text()
    assert "## Plan vs actual" in md and "| requests | 576 | 1000 | 6912 | 576 | -42.4% |" in md
    assert "SIMULATED pass" in md
    bad = tmp_path / "bad.json"
    bad.write_text('{"cells": 576}')
    res = report(store, schedule, tmp_path / "out2", "--plan", str(bad))
    assert res.exit_code == 2 and "requests must be" in res.output
    # without --plan the table is not there
    res = report(store, schedule, tmp_path / "out3")
    assert "plan_vs_actual" not in json.loads((tmp_path / "out3" / "results.json").read_text())
