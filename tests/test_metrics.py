"""Tests for tbscale.analysis.metrics: estimators against closed forms, bootstraps against enumeration."""

from __future__ import annotations

import time
from math import comb

import numpy as np
import pandas as pd
import pytest

from tbscale.analysis.metrics import (
    bootstrap_ci,
    consistency_at_k,
    mean_pass_at_k,
    mean_pass_hat_k,
    paired_bootstrap,
    paired_bootstrap_exact,
    pass_at_k,
    pass_at_k_curve,
    pass_hat_k,
    per_task_pass_at_k,
    task_counts,
)


def test_pass_at_k_matches_comb_formula_on_random_counts() -> None:
    rng = np.random.default_rng(1234)
    for _ in range(2000):
        n = int(rng.integers(1, 40))
        c = int(rng.integers(0, n + 1))
        k = int(rng.integers(1, n + 1))
        expected = 1 - comb(n - c, k) / comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_pass_at_k_large_n_stays_finite_and_in_range() -> None:
    # C(2000, 1000) overflows a float; the product form must not.
    value = pass_at_k(2000, 3, 1000)
    expected = 1 - comb(1997, 1000) / comb(2000, 1000)  # exact integer ratio, then float
    assert value == pytest.approx(expected, rel=1e-9)


def test_pass_at_k_edge_values() -> None:
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(4, 3, 2) == 1.0  # only one failure, any pair contains a pass
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)  # pass@1 is the pass rate


@pytest.mark.parametrize("n,c,k", [(4, 2, 0), (4, 2, 5), (3, 4, 1), (3, -1, 1)])
def test_pass_at_k_rejects_invalid_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_pass_hat_k_hand_computed() -> None:
    # n=4, c=2, k=2: C(2,2)/C(4,2) = 1/6
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    # n=4, c=3, k=2: C(3,2)/C(4,2) = 3/6 = 0.5
    assert pass_hat_k(4, 3, 2) == pytest.approx(0.5)
    # n=5, c=4, k=3: C(4,3)/C(5,3) = 4/10 = 0.4
    assert pass_hat_k(5, 4, 3) == pytest.approx(0.4)
    # c < k: cannot draw k passes
    assert pass_hat_k(4, 1, 2) == 0.0
    # k = 1 is the pass rate: 3/4
    assert pass_hat_k(4, 3, 1) == pytest.approx(0.75)


def test_pass_hat_k_matches_comb_formula_on_random_counts() -> None:
    rng = np.random.default_rng(99)
    for _ in range(500):
        n = int(rng.integers(1, 30))
        c = int(rng.integers(0, n + 1))
        k = int(rng.integers(1, n + 1))
        assert pass_hat_k(n, c, k) == pytest.approx(comb(c, k) / comb(n, k), abs=1e-12)


def test_aggregates_hand_computed() -> None:
    counts = [(4, 0), (4, 1), (4, 2), (4, 4)]
    # consistency@1 = share with c >= 1 = 3/4; @2: c >= 2 -> 2/4; @3 and @4: only c=4 -> 1/4
    assert consistency_at_k(counts, 1) == pytest.approx(0.75)
    assert consistency_at_k(counts, 2) == pytest.approx(0.5)
    assert consistency_at_k(counts, 3) == pytest.approx(0.25)
    assert consistency_at_k(counts, 4) == pytest.approx(0.25)
    # pass@1 = mean pass rate = (0 + 1/4 + 2/4 + 4/4) / 4 = 1.75/4 = 0.4375
    assert mean_pass_at_k(counts, 1) == pytest.approx(0.4375)
    # pass@2 per task: 0; 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5; 1 - C(2,2)/6 = 5/6; 1 -> mean
    assert mean_pass_at_k(counts, 2) == pytest.approx((0 + 0.5 + 5 / 6 + 1) / 4)
    # pass^2 per task: 0; 0; C(2,2)/6 = 1/6; 1 -> mean (1/6 + 1)/4
    assert mean_pass_hat_k(counts, 2) == pytest.approx((1 / 6 + 1) / 4)
    # consistency@1 equals pass@n when every task has n trials
    assert consistency_at_k(counts, 1) == pytest.approx(mean_pass_at_k(counts, 4))


def test_tasks_with_too_few_trials_are_excluded_not_failed() -> None:
    counts = [(4, 4), (4, 0), (2, 2)]
    # at k=3 the (2, 2) task cannot be scored: mean over the two 4-trial tasks = (1 + 0)/2
    assert mean_pass_at_k(counts, 3) == pytest.approx(0.5)
    assert consistency_at_k(counts, 3) == pytest.approx(0.5)
    # at k=1 all three count: (1 + 0 + 1)/3
    assert mean_pass_at_k(counts, 1) == pytest.approx(2 / 3)
    assert per_task_pass_at_k(counts, 3).tolist() == [1.0, 0.0]
    with pytest.raises(ValueError):
        mean_pass_at_k(counts, 5)


def test_pass_at_k_curve_is_monotone_and_names_each_metric() -> None:
    counts = [(4, 0), (4, 1), (4, 2), (4, 4)]
    curve = pass_at_k_curve(counts)
    assert curve["k"].tolist() == [1, 2, 3, 4]
    assert np.all(np.diff(curve["pass_at_k"]) >= 0)  # more draws, more chances
    assert np.all(np.diff(curve["pass_hat_k"]) <= 0)  # more draws, harder to pass them all
    assert curve.loc[curve.k == 2, "pass_hat_k"].item() == pytest.approx(mean_pass_hat_k(counts, 2))


def test_bootstrap_ci_contains_mean_and_narrows_with_more_tasks() -> None:
    rng = np.random.default_rng(7)
    small = rng.binomial(1, 0.4, size=30).astype(float)
    large = rng.binomial(1, 0.4, size=1000).astype(float)
    mean_s, lo_s, hi_s = bootstrap_ci(small)
    mean_l, lo_l, hi_l = bootstrap_ci(large)
    assert mean_s == pytest.approx(small.mean())
    assert lo_s <= mean_s <= hi_s
    assert lo_l <= mean_l <= hi_l
    assert hi_l - lo_l < (hi_s - lo_s) / 3  # width ~ 1/sqrt(n): sqrt(1000/30) ~ 5.8
    # the normal-theory width for a proportion is a sanity anchor: 2*1.96*sqrt(p(1-p)/n)
    p = large.mean()
    assert hi_l - lo_l == pytest.approx(2 * 1.96 * np.sqrt(p * (1 - p) / large.size), rel=0.1)


def test_bootstrap_ci_is_deterministic_given_seed() -> None:
    values = np.linspace(0, 1, 25)
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)


def test_bootstrap_ci_weighted_mean_is_pooled_ratio() -> None:
    shares = np.array([0.5, 1.0, 0.0])
    turns = np.array([2.0, 6.0, 2.0])
    mean, lo, hi = bootstrap_ci(shares, weights=turns)
    # pooled: (0.5*2 + 1*6 + 0*2) / 10 = 7/10
    assert mean == pytest.approx(0.7)
    assert lo <= mean <= hi


@pytest.mark.parametrize(
    "a,b",
    [
        ([0.0, 0.25, 0.5, 0.5, 1.0], [0.25, 0.25, 1.0, 0.75, 1.0]),
        ([0.5, 0.5, 0.0, 1.0], [0.25, 1.0, 0.25, 0.75]),
        ([0.0, 1.0, 0.5, 0.25, 0.75], [1.0, 0.0, 0.5, 0.5, 0.5]),
    ],
)
def test_paired_bootstrap_agrees_with_exact_enumeration(a: list[float], b: list[float]) -> None:
    mc = paired_bootstrap(np.array(a), np.array(b), n_resamples=200_000, seed=11)
    exact = paired_bootstrap_exact(np.array(a), np.array(b))
    assert mc.diff == pytest.approx(exact.diff)
    assert mc.diff == pytest.approx(np.mean(np.array(b) - np.array(a)))
    assert mc.boot_mean == pytest.approx(exact.boot_mean, abs=0.01)
    # The ideal bootstrap mean of resampled means equals the sample mean.
    assert exact.boot_mean == pytest.approx(exact.diff)
    assert mc.p_value == pytest.approx(exact.p_value, abs=0.01)
    assert mc.lo == pytest.approx(exact.lo, abs=0.06)
    assert mc.hi == pytest.approx(exact.hi, abs=0.06)


def test_exact_p_value_hand_computed_for_two_tasks() -> None:
    # differences d = [1, -1]; the 4 resamples have means 1, 0, 0, -1
    # P(d* <= 0) = 3/4, P(d* >= 0) = 3/4 -> p = min(1, 2 * 3/4) = 1
    assert paired_bootstrap_exact([0, 1], [1, 0]).p_value == 1.0
    # d = [1, 0]: means 1, 0.5, 0.5, 0 -> P(d* <= 0) = 1/4 -> p = 0.5
    assert paired_bootstrap_exact([0, 0], [1, 0]).p_value == pytest.approx(0.5)


def test_paired_weighted_agrees_with_exact() -> None:
    a = np.array([0.2, 0.5, 0.1, 0.4])
    b = np.array([0.6, 0.5, 0.3, 0.2])
    w = np.array([3.0, 1.0, 5.0, 2.0])
    mc = paired_bootstrap(a, b, weights=w, n_resamples=100_000, seed=5)
    exact = paired_bootstrap_exact(a, b, weights=w)
    assert mc.diff == pytest.approx(np.average(b - a, weights=w))
    assert mc.p_value == pytest.approx(exact.p_value, abs=0.01)
    assert mc.boot_mean == pytest.approx(exact.boot_mean, abs=0.01)


def test_p_value_small_for_consistent_difference_and_large_for_none() -> None:
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 0.5, size=100)
    big = paired_bootstrap(a, a + 0.3 + rng.normal(0, 0.05, size=100))
    assert big.diff == pytest.approx(0.3, abs=0.02)
    assert big.p_value < 0.001
    assert big.lo > 0
    # Never reports exactly zero from a finite simulation: floor is 2/(B+1).
    assert big.p_value == pytest.approx(2 / 10_001)

    noise = paired_bootstrap(a, a + rng.normal(0, 0.1, size=100) * np.resize([1, -1], 100))
    assert noise.p_value > 0.2
    assert noise.lo < 0 < noise.hi

    identical = paired_bootstrap(a, a)
    assert identical.diff == 0.0
    assert identical.p_value == 1.0


def test_paired_bootstrap_is_fast_enough() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.uniform(size=100), rng.uniform(size=100)
    start = time.perf_counter()
    paired_bootstrap(a, b, n_resamples=10_000)
    assert time.perf_counter() - start < 1.0


def test_paired_bootstrap_rejects_mismatched_inputs() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap([0.1, 0.2], [0.1])
    with pytest.raises(ValueError):
        paired_bootstrap([0.1, np.nan], [0.1, 0.2])
    with pytest.raises(ValueError):
        paired_bootstrap_exact(np.zeros(8), np.ones(8))


def test_task_counts_groups_trials() -> None:
    df = pd.DataFrame(
        {
            "setting": ["bon4", "bon4", "bon4", "base", "base", "bon4"],
            "task": ["t1", "t1", "t2", "t1", "t1", "t1"],
            "passed": [True, False, True, False, False, True],
        }
    )
    out = task_counts(df, "setting", "task", "passed")
    rows = {(r.setting, r.task): (r.n, r.c) for r in out.itertuples()}
    assert rows == {("base", "t1"): (2, 0), ("bon4", "t1"): (3, 2), ("bon4", "t2"): (1, 1)}
    # the output plugs straight into the estimators
    bon = out[out.setting == "bon4"]
    assert mean_pass_at_k(list(zip(bon.n, bon.c)), 1) == pytest.approx((2 / 3 + 1) / 2)


def test_task_counts_rejects_fractional_rewards() -> None:
    df = pd.DataFrame({"s": ["x"], "t": ["a"], "r": [0.5]})
    with pytest.raises(ValueError):
        task_counts(df, "s", "t", "r")
