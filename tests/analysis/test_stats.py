"""Statistics against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.analysis import (
    cluster_bootstrap_diff,
    cluster_bootstrap_mean,
    macro_f1,
    mcnemar_exact,
    mcnemar_p,
    noninferior,
    seeded_rng,
)
from runner.analysis._stats import _draw_counts
from runner.errors import AnalysisError


def sig(x: float, digits: int = 6) -> str:
    return f"{x:.{digits - 1}e}"


def test_mcnemar_zero_vs_36_matches_paper() -> None:
    # 2 * 0.5**36, printed in the ECT paper as 2.91038e-11.
    assert sig(mcnemar_p(0, 36)) == "2.91038e-11"
    assert mcnemar_p(36, 0) == mcnemar_p(0, 36)


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (1, 5, 2 * 7 / 64),  # P(X<=1 | n=6) = (1 + 6) / 64, doubled
        (0, 5, 2 / 32),
        (2, 8, 2 * (1 + 10 + 45) / 1024),
        (3, 3, 1.0),  # symmetric: capped at 1
        (0, 0, 1.0),  # no discordant pairs: no evidence either way
    ],
)
def test_mcnemar_hand_values(b: int, c: int, expected: float) -> None:
    assert math.isclose(mcnemar_p(b, c), expected, rel_tol=1e-12)


def test_mcnemar_from_indicators_counts_discordant_pairs() -> None:
    x = [True, True, False, False, True, False]
    y = [True, False, True, True, False, False]
    r = mcnemar_exact(x, y)
    assert (r.b_x, r.b_y, r.n_pairs) == (2, 2, 6)
    assert r.p_value == 1.0
    r = mcnemar_exact([False] * 36, [True] * 36)
    assert (r.b_x, r.b_y) == (0, 36)
    with pytest.raises(AnalysisError):
        mcnemar_exact([True], [True, False])


def test_bootstrap_constant_clusters_give_degenerate_interval() -> None:
    # The paper's static H1: every task has 0/8 unsafe under ECT and 7/8 under the critic core.
    clusters = [t for t in range(36) for _ in range(8)]
    ect = [0] * len(clusters)
    critic = [0 if f == 0 else 1 for _ in range(36) for f in range(8)]
    r = cluster_bootstrap_diff(
        clusters, ect, clusters, critic, replicates=10_000, seed=1, label="h1"
    )
    assert r.estimate == -0.875
    assert (r.lo, r.hi) == (-0.875, -0.875)
    assert r.pp() == (-87.5, -87.5, -87.5)
    assert r.n_clusters == 36 and r.replicates == 10_000


def test_bootstrap_two_clusters_hand_distribution() -> None:
    # Cluster "a" contributes rows A=1,1,1 (B=0); cluster "b" contributes A=0 (B=0).
    # Draws: aa -> 1, ab/ba -> 3/4 (all rows of a drawn cluster kept), bb -> 0.
    r = cluster_bootstrap_diff(
        ["a", "a", "a", "b"],
        [1, 1, 1, 0],
        ["a", "b"],
        [0, 0],
        replicates=20_000,
        seed=7,
        label="two",
    )
    assert r.estimate == 0.75
    values, counts = np.unique(r.samples, return_counts=True)
    assert values.tolist() == [0.0, 0.75, 1.0]
    freq = counts / counts.sum()
    assert np.allclose(freq, [0.25, 0.5, 0.25], atol=0.02)
    assert (r.lo, r.hi) == (0.0, 1.0)


def test_bootstrap_matches_naive_loop_on_same_draws() -> None:
    rng = np.random.default_rng(3)
    clusters = [f"t{i:02d}" for i in range(12) for _ in range(rng.integers(1, 5))]
    va = rng.integers(0, 2, len(clusters)).tolist()
    vb = rng.random(len(clusters)).tolist()
    r = cluster_bootstrap_diff(clusters, va, clusters, vb, replicates=500, seed=11, label="x")
    labels = sorted(set(clusters))
    draws = seeded_rng(11, "x").integers(0, len(labels), size=(500, len(labels)))
    naive = []
    for row in draws:
        rows = [i for k in row for i, c in enumerate(clusters) if c == labels[k]]
        naive.append(sum(va[i] for i in rows) / len(rows) - sum(vb[i] for i in rows) / len(rows))
    assert np.allclose(r.samples, naive, rtol=0, atol=1e-12)
    assert r.lo == pytest.approx(float(np.quantile(naive, 0.025)))
    assert r.hi == pytest.approx(float(np.quantile(naive, 0.975)))


def test_draw_counts_rows_sum_to_cluster_count() -> None:
    w = _draw_counts(7, 100, seeded_rng(0, "w"))
    assert w.shape == (100, 7)
    assert (w.sum(axis=1) == 7).all()


def test_bootstrap_is_deterministic_per_seed_and_label() -> None:
    clusters = [i // 3 for i in range(30)]
    va = [i % 2 for i in range(30)]
    vb = [(i // 2) % 2 for i in range(30)]
    a = cluster_bootstrap_diff(clusters, va, clusters, vb, replicates=2000, seed=5, label="l")
    b = cluster_bootstrap_diff(clusters, va, clusters, vb, replicates=2000, seed=5, label="l")
    c = cluster_bootstrap_diff(clusters, va, clusters, vb, replicates=2000, seed=6, label="l")
    d = cluster_bootstrap_diff(clusters, va, clusters, vb, replicates=2000, seed=5, label="m")
    assert a.samples.tobytes() == b.samples.tobytes() and a.to_json() == b.to_json()
    assert a.samples.tobytes() != c.samples.tobytes()
    assert a.samples.tobytes() != d.samples.tobytes()


def test_bootstrap_refuses_unpaired_clusters_and_bad_parameters() -> None:
    with pytest.raises(AnalysisError, match="one arm only"):
        cluster_bootstrap_diff(["a", "b"], [1, 0], ["a"], [0], replicates=10, seed=0, label="u")
    with pytest.raises(AnalysisError, match="no rows"):
        cluster_bootstrap_diff([], [], ["a"], [0], replicates=10, seed=0, label="e")
    with pytest.raises(AnalysisError, match="replicates"):
        cluster_bootstrap_mean(["a"], [1], replicates=0, seed=0, label="r")
    with pytest.raises(AnalysisError, match="seed"):
        cluster_bootstrap_mean(["a"], [1], replicates=10, seed=-1, label="r")


def test_bootstrap_mean_of_a_rate() -> None:
    r = cluster_bootstrap_mean(
        ["a", "a", "b", "b"], [1, 1, 0, 0], replicates=4000, seed=2, label="m"
    )
    assert r.estimate == 0.5
    assert sorted(set(r.samples.tolist())) == [0.0, 0.5, 1.0]


def test_noninferiority_is_strict_at_the_margin() -> None:
    assert noninferior(-9.99, -10.0)
    assert noninferior(0.0, -10.0)
    assert not noninferior(-10.0, -10.0)
    assert not noninferior(-12.0, -10.0)
    with pytest.raises(AnalysisError):
        noninferior(0.0, 10.0)


def _static_labels(unsafe: int, clean_noncomplete: int) -> tuple[list[str], list[str]]:
    """Held-out grid: 36 clean (gold complete), 288 faults (gold continue)."""
    gold = ["complete"] * 36 + ["continue"] * 288
    pred = (
        ["continue"] * clean_noncomplete
        + ["complete"] * (36 - clean_noncomplete)
        + ["complete"] * unsafe
        + ["stuck"] * (288 - unsafe)
    )
    return gold, pred


@pytest.mark.parametrize(
    ("unsafe", "clean_nc", "expected"),
    [
        # Hand: complete-class F1 = 2*36/(2*36+252) = 2/9; continue-class = 72/324 = 2/9.
        (252, 0, 2 / 9),
        # Hand: complete 36/110, continue 464/538 (the paper's full-trace row, .595).
        (56, 18, (36 / 110 + 464 / 538) / 2),
        (144, 0, (72 / 216 + 288 / 432) / 2),  # .500
        (0, 0, 1.0),
    ],
)
def test_macro_f1_reproduces_paper_rows(unsafe: int, clean_nc: int, expected: float) -> None:
    gold, pred = _static_labels(unsafe, clean_nc)
    assert macro_f1(gold, pred) == pytest.approx(expected, abs=1e-12)


def test_macro_f1_rounds_like_the_paper() -> None:
    gold, pred = _static_labels(56, 18)
    assert f"{macro_f1(gold, pred):.3f}" == "0.595"
    with pytest.raises(AnalysisError):
        macro_f1(["stuck"], ["complete"])


# --- properties -------------------------------------------------------------------------------

PROPS = settings(max_examples=40, deadline=None, derandomize=True)


@PROPS
@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_matches_the_binomial_sum(b: int, c: int) -> None:
    n, k = b + c, min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n if n else 0.5
    expected = min(1.0, 2 * tail) if n else 1.0
    assert math.isclose(mcnemar_p(b, c), expected, rel_tol=1e-9)
    assert mcnemar_p(b, c) == mcnemar_p(c, b)


@PROPS
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=40
    )
)
def test_swapping_arms_mirrors_the_interval(rows: list[tuple[int, int, int]]) -> None:
    clusters = [r[0] for r in rows]
    a = [float(r[1]) for r in rows]
    b = [float(r[2]) for r in rows]
    ab = cluster_bootstrap_diff(clusters, a, clusters, b, replicates=300, seed=3, label="p")
    ba = cluster_bootstrap_diff(clusters, b, clusters, a, replicates=300, seed=3, label="p")
    assert ba.estimate == pytest.approx(-ab.estimate, abs=1e-12)
    assert ba.lo == pytest.approx(-ab.hi, abs=1e-12) and ba.hi == pytest.approx(-ab.lo, abs=1e-12)
    assert min(ab.samples) <= ab.lo <= ab.hi <= max(ab.samples)
