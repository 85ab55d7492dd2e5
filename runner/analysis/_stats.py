"""Statistics for the prespecified endpoints (docs/analysis.md; the ECT paper's "Endpoints and
Inference").

- exact two-sided McNemar test on paired binary indicators (scipy's exact binomial test on the
  discordant pairs);
- cluster bootstrap of a paired difference of two rates or means: clusters (tasks, or worlds for
  the sensitivity analysis) are drawn with replacement and every row of a drawn cluster is
  retained, for both arms at once, so the pairing survives resampling;
- percentile intervals; a non-inferiority check at a margin; macro-F1 over complete/continue.

Resampling is vectorised in numpy: one ``(replicates, clusters)`` matrix of draw counts per
estimate, then matrix products for the resampled sums. Every estimate draws from its own
generator, derived from the study seed and a label (``seeded_rng``), so adding or reordering
estimates never changes another estimate's numbers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from runner.canonical import JsonRecord, key, spec
from runner.errors import AnalysisError

__all__ = [
    "BootstrapResult",
    "McNemarResult",
    "cluster_bootstrap_diff",
    "cluster_bootstrap_mean",
    "macro_f1",
    "mcnemar_exact",
    "mcnemar_p",
    "noninferior",
    "seeded_rng",
]


@dataclass(frozen=True)
class McNemarResult(JsonRecord):
    """Discordant counts and the exact two-sided p-value.

    ``b_x`` counts pairs where only the first indicator is true, ``b_y`` where only the second is.
    """

    b_x: int
    b_y: int
    n_pairs: int
    p_value: float = field(metadata=key("p"))



@dataclass(frozen=True)
class BootstrapResult(JsonRecord):
    """A point estimate with its percentile interval from a cluster bootstrap.

    All figures are in the units of the inputs (rates as fractions); ``pp`` scales by 100.
    """

    estimate: float
    lo: float
    hi: float
    replicates: int
    n_clusters: int = field(metadata=key("clusters"))
    confidence: float
    label: str = field(metadata=key("rng.label"))
    seed: int = field(metadata=key("rng.seed"))
    samples: np.ndarray = field(repr=False, compare=False, default_factory=lambda: np.empty(0),
                                metadata=spec(skip=True))
    """The replicate statistics, in draw order (not serialised)."""
    interval: str = field(default="percentile", init=False)

    def pp(self) -> tuple[float, float, float]:
        return (self.estimate * 100.0, self.lo * 100.0, self.hi * 100.0)


def seeded_rng(seed: int, label: str) -> np.random.Generator:
    """A PCG64 generator determined by ``seed`` and ``label`` alone."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise AnalysisError(f"bootstrap seed must be a non-negative integer, got {seed!r}")
    tag = int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "big")
    return np.random.default_rng(np.random.SeedSequence([seed, tag]))


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for ``b`` and ``c`` discordant pairs (1.0 when none)."""
    # scipy.stats takes ~0.7 s to import: only the exact test needs it, so load it here.
    from scipy.stats import binomtest

    if b < 0 or c < 0:
        raise AnalysisError(f"discordant counts must be non-negative, got {b}, {c}")
    n = b + c
    if n == 0:
        return 1.0
    return float(binomtest(min(b, c), n, 0.5, alternative="two-sided").pvalue)


def mcnemar_exact(x: Sequence[bool], y: Sequence[bool]) -> McNemarResult:
    """Exact McNemar test on paired indicators ``x[i]``, ``y[i]``."""
    if len(x) != len(y):
        raise AnalysisError(f"McNemar needs paired indicators, got {len(x)} and {len(y)}")
    xa = np.asarray(x, dtype=bool)
    ya = np.asarray(y, dtype=bool)
    b = int(np.count_nonzero(xa & ~ya))
    c = int(np.count_nonzero(~xa & ya))
    return McNemarResult(b_x=b, b_y=c, n_pairs=len(xa), p_value=mcnemar_p(b, c))


def _cluster_index(
    clusters_a: Sequence[Hashable], clusters_b: Sequence[Hashable]
) -> tuple[list[Hashable], np.ndarray, np.ndarray]:
    labels = sorted(set(clusters_a) | set(clusters_b), key=lambda v: (type(v).__name__, v))
    pos = {label: i for i, label in enumerate(labels)}
    ia = np.fromiter((pos[c] for c in clusters_a), dtype=np.int64, count=len(clusters_a))
    ib = np.fromiter((pos[c] for c in clusters_b), dtype=np.int64, count=len(clusters_b))
    return labels, ia, ib


def _draw_counts(n_clusters: int, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """``(replicates, n_clusters)`` matrix: how often each cluster was drawn in each replicate."""
    draws = rng.integers(0, n_clusters, size=(replicates, n_clusters))
    flat = draws + (np.arange(replicates, dtype=np.int64) * n_clusters)[:, None]
    counts = np.bincount(flat.ravel(), minlength=replicates * n_clusters)
    return counts.reshape(replicates, n_clusters).astype(np.float64)


def _check(replicates: int, confidence: float) -> None:
    if not isinstance(replicates, int) or replicates < 1:
        raise AnalysisError(f"bootstrap replicates must be a positive integer, got {replicates!r}")
    if not 0.0 < confidence < 1.0:
        raise AnalysisError(f"confidence must be in (0, 1), got {confidence!r}")


def _percentiles(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha], method="linear")
    return float(lo), float(hi)


def cluster_bootstrap_diff(
    clusters_a: Sequence[Hashable],
    values_a: Sequence[float],
    clusters_b: Sequence[Hashable],
    values_b: Sequence[float],
    *,
    replicates: int,
    seed: int,
    label: str,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Cluster bootstrap of ``mean(values_a) - mean(values_b)``.

    Each replicate draws as many clusters as there are (the union of both arms' cluster labels)
    with replacement and keeps every row of each drawn cluster, in both arms, as often as it was
    drawn. Rates are means of 0/1 values. Raises AnalysisError when an arm has no rows or a
    cluster has rows in only one arm (the pairing would be broken).
    """
    _check(replicates, confidence)
    if len(clusters_a) != len(values_a) or len(clusters_b) != len(values_b):
        raise AnalysisError("cluster labels and values differ in length")
    if not values_a or not values_b:
        raise AnalysisError(f"{label}: an arm has no rows")
    labels, ia, ib = _cluster_index(clusters_a, clusters_b)
    k = len(labels)
    va = np.asarray(values_a, dtype=np.float64)
    vb = np.asarray(values_b, dtype=np.float64)
    sum_a = np.bincount(ia, weights=va, minlength=k)
    n_a = np.bincount(ia, minlength=k).astype(np.float64)
    sum_b = np.bincount(ib, weights=vb, minlength=k)
    n_b = np.bincount(ib, minlength=k).astype(np.float64)
    unpaired = [labels[i] for i in range(k) if (n_a[i] == 0) != (n_b[i] == 0)]
    if unpaired:
        raise AnalysisError(f"{label}: clusters with rows in one arm only: {unpaired[:5]}")
    estimate = float(sum_a.sum() / n_a.sum() - sum_b.sum() / n_b.sum())
    w = _draw_counts(k, replicates, seeded_rng(seed, label))
    # Every cluster has rows in both arms, so each replicate's denominators are positive.
    stats = (w @ sum_a) / (w @ n_a) - (w @ sum_b) / (w @ n_b)
    lo, hi = _percentiles(stats, confidence)
    return BootstrapResult(estimate, lo, hi, replicates, k, confidence, label, seed, stats)


def cluster_bootstrap_mean(
    clusters: Sequence[Hashable],
    values: Sequence[float],
    *,
    replicates: int,
    seed: int,
    label: str,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Cluster bootstrap of ``mean(values)`` (e.g. one policy's rate, for plot intervals)."""
    _check(replicates, confidence)
    if len(clusters) != len(values):
        raise AnalysisError("cluster labels and values differ in length")
    if not values:
        raise AnalysisError(f"{label}: no rows")
    labels, ia, _ = _cluster_index(clusters, ())
    k = len(labels)
    v = np.asarray(values, dtype=np.float64)
    sums = np.bincount(ia, weights=v, minlength=k)
    ns = np.bincount(ia, minlength=k).astype(np.float64)
    estimate = float(sums.sum() / ns.sum())
    w = _draw_counts(k, replicates, seeded_rng(seed, label))
    stats = (w @ sums) / (w @ ns)
    lo, hi = _percentiles(stats, confidence)
    return BootstrapResult(estimate, lo, hi, replicates, k, confidence, label, seed, stats)


def noninferior(ci_lo: float, margin: float) -> bool:
    """Non-inferiority holds when the interval's lower bound lies strictly above ``margin``.

    ``margin`` is negative and in the interval's units (e.g. -10 with a pp interval).
    """
    if margin >= 0:
        raise AnalysisError(f"a non-inferiority margin must be negative, got {margin!r}")
    return ci_lo > margin


def macro_f1(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """Macro-F1 over the two classes ``complete`` and ``continue``.

    Every prediction other than ``complete`` (``continue``, ``stuck``, a failure) counts as
    ``continue``: only ``complete`` ends a run as a success. A class with no gold and no
    predicted members scores 0, as in scikit-learn's default.
    """
    if len(gold) != len(predicted):
        raise AnalysisError(f"macro-F1 needs paired labels, got {len(gold)} and {len(predicted)}")
    bad = sorted({g for g in gold if g not in ("complete", "continue")})
    if bad:
        raise AnalysisError(f"gold labels must be complete/continue, got {bad}")
    g = np.asarray([x == "complete" for x in gold], dtype=bool)
    p = np.asarray([x == "complete" for x in predicted], dtype=bool)
    scores = []
    for gc, pc in ((g, p), (~g, ~p)):
        tp = int(np.count_nonzero(gc & pc))
        fp = int(np.count_nonzero(~gc & pc))
        fn = int(np.count_nonzero(gc & ~pc))
        denom = 2 * tp + fp + fn
        scores.append(0.0 if denom == 0 else 2 * tp / denom)
    return float(sum(scores) / 2)
