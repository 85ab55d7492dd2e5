"""Analysis: the static study, the closed-loop hypotheses, tables and reports (docs/analysis.md)."""

from runner.analysis._closed import analyse_closed_loop, check_inventory
from runner.analysis._closed_results import ClosedLoopResults
from runner.analysis._common import CLOSED_LOOP_POLICIES, STATIC_POLICIES, ProviderInfo
from runner.analysis._demo import DemoHooks, DemoResult, check_demo_specs, default_out_dir, run_demo
from runner.analysis._driver import (
    DEFAULT_REPORT_SEED,
    closed_loop_report,
    report_from_store,
    static_study,
)
from runner.analysis._errors import (
    AllModelCallsFailed,
    InventoryIncomplete,
    ScheduleDisagrees,
)
from runner.analysis._load import StoreOutcomes, load_outcomes_from_store
from runner.analysis._report import (
    read_results,
    render_outputs,
    results_json_bytes,
    write_outputs,
)
from runner.analysis._static import StaticResults, analyse_static
from runner.analysis._stats import (
    BootstrapResult,
    McNemarResult,
    cluster_bootstrap_diff,
    cluster_bootstrap_mean,
    macro_f1,
    mcnemar_exact,
    mcnemar_p,
    noninferior,
    seeded_rng,
)
from runner.analysis._sweep import (
    SweepInvalid,
    SweepPointFailed,
    SweepPointHalted,
    SweepPointRefused,
    SweepResult,
    SweepRow,
    UnknownSimulatorParameter,
    parse_grid,
    simulator_parameter_names,
    sweep,
    sweep_table,
)

__all__ = [
    "CLOSED_LOOP_POLICIES",
    "DEFAULT_REPORT_SEED",
    "STATIC_POLICIES",
    "AllModelCallsFailed",
    "BootstrapResult",
    "ClosedLoopResults",
    "DemoHooks",
    "DemoResult",
    "InventoryIncomplete",
    "McNemarResult",
    "ProviderInfo",
    "ScheduleDisagrees",
    "StaticResults",
    "StoreOutcomes",
    "SweepInvalid",
    "SweepPointFailed",
    "SweepPointHalted",
    "SweepPointRefused",
    "SweepResult",
    "SweepRow",
    "UnknownSimulatorParameter",
    "analyse_closed_loop",
    "analyse_static",
    "check_demo_specs",
    "check_inventory",
    "closed_loop_report",
    "cluster_bootstrap_diff",
    "cluster_bootstrap_mean",
    "default_out_dir",
    "load_outcomes_from_store",
    "macro_f1",
    "mcnemar_exact",
    "mcnemar_p",
    "noninferior",
    "parse_grid",
    "read_results",
    "render_outputs",
    "report_from_store",
    "results_json_bytes",
    "run_demo",
    "seeded_rng",
    "simulator_parameter_names",
    "static_study",
    "sweep",
    "sweep_table",
    "write_outputs",
]
