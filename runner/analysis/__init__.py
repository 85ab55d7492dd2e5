"""Analysis: the static study, the closed-loop hypotheses, tables and reports (DESIGN §9)."""

from runner.analysis._errors import FastPathInvariantBroken, InventoryIncomplete, SpecInvalid
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
    "BootstrapResult",
    "FastPathInvariantBroken",
    "InventoryIncomplete",
    "McNemarResult",
    "SpecInvalid",
    "cluster_bootstrap_diff",
    "cluster_bootstrap_mean",
    "macro_f1",
    "mcnemar_exact",
    "mcnemar_p",
    "noninferior",
    "seeded_rng",
]
