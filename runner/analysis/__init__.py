"""Analysis: the static study, the closed-loop hypotheses, tables and reports (DESIGN §9)."""

from runner.analysis._closed import (
    OUTCOME_FIELDS,
    analyse_closed_loop,
    check_inventory,
    validate_outcome,
)
from runner.analysis._common import CLOSED_LOOP_POLICIES, STATIC_POLICIES, ProviderInfo
from runner.analysis._errors import FastPathInvariantBroken, InventoryIncomplete, SpecInvalid
from runner.analysis._report import render_outputs, results_json_bytes, write_outputs
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

__all__ = [
    "CLOSED_LOOP_POLICIES",
    "OUTCOME_FIELDS",
    "STATIC_POLICIES",
    "BootstrapResult",
    "FastPathInvariantBroken",
    "InventoryIncomplete",
    "McNemarResult",
    "ProviderInfo",
    "SpecInvalid",
    "analyse_closed_loop",
    "check_inventory",
    "cluster_bootstrap_diff",
    "cluster_bootstrap_mean",
    "macro_f1",
    "mcnemar_exact",
    "mcnemar_p",
    "noninferior",
    "render_outputs",
    "results_json_bytes",
    "seeded_rng",
    "validate_outcome",
    "write_outputs",
]
