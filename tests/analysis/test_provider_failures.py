"""Provider failures are counted everywhere a store is read (issue 26): the report (results.json,
tables.md, report.html, its first lines), ``ect store show`` and the viewer's run summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from runner.cli import cli
from runner.study import AuditCall, AuditFailure, AuditGroup, RawExchangeRef
from runner.view import CELL_COLUMNS, StoreSource, cell_rows, run_summary
from tests.analysis import _fixtures as fx
from tests.analysis.test_store_report import (
    ATTEMPT,
    BLOB,
    attempt_of,
    make_store,
    report,
    write_schedule,
)

FAILED = {"kind": "server_error", "detail": "HTTP 503 Service Unavailable", "status": 503,
          "retry_after_s": None, "error_class": "HTTP 503", "class": "transport",
          "role": "planner"}
PROSE = {"kind": "empty_response", "detail": "no candidate", "status": 200,
         "retry_after_s": None, "error_class": None, "class": "model_output", "role": "critic"}


def _audit(*failures: dict[str, Any]) -> AuditGroup:
    ok = AuditCall(request=BLOB, parsed=BLOB, ok=True, failure=None,
                   attempts=(attempt_of(ATTEMPT),),
                   raw=(RawExchangeRef(BLOB, BLOB),))
    bad = tuple(AuditCall(request=BLOB, parsed=None, ok=False, failure=AuditFailure.from_json(f),
                          attempts=(attempt_of(ATTEMPT),),
                          raw=(RawExchangeRef(BLOB, None),)) for f in failures)
    return AuditGroup(provider="simulated", model=None, calls=(ok, *bad))


def test_a_report_over_failures_says_so_first_and_counts_them(tmp_path: Path) -> None:
    store = make_store(tmp_path, fx.outcomes(), audit=_audit(FAILED, PROSE))
    schedule = write_schedule(tmp_path)
    res = report(store, schedule, tmp_path / "out")
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    counts = data["provider_failures"]
    assert counts["total"] == 2 * fx.ROWS and counts["cells"] == fx.ROWS
    assert counts["by_class"] == {"transport": fx.ROWS, "model_output": fx.ROWS}
    assert counts["by_role"] == {"critic": fx.ROWS, "planner": fx.ROWS}
    assert counts["by_kind"] == {"empty_response": fx.ROWS, "server_error": fx.ROWS}
    assert set(counts["by_pipeline"]) == {"critic_core", "controller", "full_trace", "ect"}
    assert len(counts["cells_with_transport_failure"]) == fx.ROWS
    head = (tmp_path / "out" / "tables.md").read_text().splitlines()[:6]
    assert any("provider failure(s)" in line and f"{fx.ROWS} transport" in line for line in head), head
    md = (tmp_path / "out" / "tables.md").read_text()
    assert "## Provider failures" in md and f"| role | planner | {fx.ROWS} |" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.index("provider failure(s)") < html.index('class="gates"')
    assert any(c["key"] == "transport_failures" for c in data["choices"])


def test_a_report_without_failures_carries_a_zero_count_and_no_warning(tmp_path: Path) -> None:
    store = make_store(tmp_path, fx.outcomes(), audit=_audit())
    res = report(store, write_schedule(tmp_path), tmp_path / "out")
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["provider_failures"]["total"] == 0
    md = (tmp_path / "out" / "tables.md").read_text()
    assert "provider failure(s)" not in md and "## Provider failures" not in md


def test_store_show_and_the_viewer_count_and_flag_failures(tmp_path: Path) -> None:
    store = make_store(tmp_path, fx.outcomes()[:3], audit=_audit(FAILED))
    res = CliRunner().invoke(cli, ["store", "show", str(store), "--json"])
    assert res.exit_code == 0, res.output
    shown = json.loads(res.output)["provider_failures"]
    assert shown["by_class"] == {"transport": 3, "model_output": 0} and shown["cells"] == 3
    one = json.loads(CliRunner().invoke(cli, ["store", "show", str(store), "--seq", "1",
                                              "--json"]).output)
    assert one["provider_failures"] == [{"kind": "server_error", "class": "transport",
                                         "role": "planner", "status": 503}]
    src = StoreSource(store)
    summary = run_summary(src, integrity=None)
    assert summary["provider_failures"]["by_role"] == {"planner": 3}
    col = CELL_COLUMNS.index("provider_failures")  # the table also names damage (issue 39)
    assert [row[col] for row in cell_rows(src)] == ["1 (1 T)"] * 3
