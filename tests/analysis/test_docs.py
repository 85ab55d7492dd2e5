"""docs/analysis.md matches the code: the ablation table, the gate rules, the result keys,
the CLI commands and the exported surface."""

from __future__ import annotations

import re
from pathlib import Path

import runner.analysis as analysis
from runner.analysis import ProviderInfo, analyse_closed_loop
from runner.cli import cli
from runner.study import TABLE3_ABLATIONS
from tests.analysis import _fixtures as fx

DOC = (Path(__file__).resolve().parents[2] / "docs" / "analysis.md").read_text()


def test_ablation_table_matches_code() -> None:
    rows = re.findall(r"^\| ([^|]+) \| `(\w+)` \| ([^|]+) \| (F\d|none) \| ([^|]+) \| (U|S|-) \|$",
                      DOC, re.M)
    documented = [
        (label.strip(), name, tuple(re.findall(r"`([\w.]+)`", removes)),
         None if f == "none" else f, words.strip())
        for label, name, removes, f, words, _ in rows
    ]
    assert documented == [
        (a.paper_check, a.name, a.removes, a.fault, a.paper_fault if a.fault else "-")
        for a in TABLE3_ABLATIONS
    ]


def test_gate_rules_and_keys_match_code() -> None:
    res = analyse_closed_loop(
        fx.typed(fx.outcomes()),
        fx.schedule_rows(),
        provider=ProviderInfo("simulated", "simulated-1", True),
        seed=1,
        replicates=20,
    )
    assert res.h4.rule in DOC.replace("\n", " ")
    keys_line = DOC.split("`results.json` (closed loop) top-level keys:")[1].split("\n\n")[0]
    assert set(re.findall(r"`(\w+)`", keys_line)) >= set(res.to_json()) - {"format"}
    assert "strictly" in DOC and "−10" in DOC


def test_commands_and_exports_are_documented() -> None:
    for name in ("static", "report"):
        assert name in cli.commands
        assert f"ect {name}" in DOC
    for name in ("static_study", "report_from_store", "load_outcomes_from_store", "mcnemar_exact"):
        assert name in analysis.__all__ and name in DOC


def test_exported_surface() -> None:
    public = {n for n in dir(analysis) if not n.startswith("_")}
    assert set(analysis.__all__) == public
    assert set(analysis.__all__) == {
        "AllModelCallsFailed", "BootstrapResult", "CLOSED_LOOP_POLICIES", "DEFAULT_REPORT_SEED",
        "ClosedLoopResults", "InventoryIncomplete", "McNemarResult",
        "ProviderInfo", "STATIC_POLICIES", "ScheduleDisagrees", "StaticResults",
        "StoreOutcomes", "analyse_closed_loop", "analyse_static",
        "check_inventory", "closed_loop_report", "cluster_bootstrap_diff",
        "cluster_bootstrap_mean", "load_outcomes_from_store", "macro_f1", "mcnemar_exact",
        "mcnemar_p", "noninferior", "read_results", "render_outputs", "report_from_store",
        "results_json_bytes", "seeded_rng", "static_study",
        "write_outputs",
        # the demo as one call, and the sweep the CLI runs (issue 31: no private imports)
        "DemoHooks", "DemoResult", "check_demo_specs", "default_out_dir", "run_demo",
        "SweepInvalid", "SweepPointFailed", "SweepPointHalted", "SweepPointRefused",
        "SweepResult", "SweepRow", "UnknownSimulatorParameter", "parse_grid",
        "simulator_parameter_names", "sweep", "sweep_table",
    }  # fmt: skip


def test_static_result_keys_are_documented() -> None:
    import anyio

    from runner.analysis import analyse_static
    from runner.study import StaticSpec, run_static
    from tests.analysis import _standin

    spec = StaticSpec.load(Path(__file__).resolve().parents[2] / "schedules" / "static.toml")
    spec = StaticSpec(**{**spec.__dict__, "replicates": 20})

    async def go():  # type: ignore[no-untyped-def]
        script = _standin.Script()
        return await run_static(spec, None, snapshots=_standin.grid(), decide=script.decide)

    rows = anyio.run(go).rows
    res = analyse_static(rows, spec=spec, provider=ProviderInfo("simulated", "simulated-1", True))
    keys_line = DOC.split("`results.json` (static) top-level keys:")[1].split("\n\n")[0]
    assert set(re.findall(r"`(\w+)`", keys_line)) >= set(res.to_json()) - {"format"}


def test_every_project_choice_is_documented_with_the_papers_words() -> None:
    from runner.analysis._honesty import CHOICES

    flat = DOC.replace("\n", " ")
    for c in CHOICES:
        assert f"| `{c.key}` | {c.what} | {c.ours} | {c.paper} |" in flat, c.key
