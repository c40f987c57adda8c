"""Success metrics over per-task trial counts, and bootstrap confidence intervals over tasks.

Every estimator here takes, per task, ``n`` (trials run) and ``c`` (trials passed), so the same
numbers feed pass@k, pass^k and consistency@k and they can be reported side by side, as
``SPEC.md`` ("Metric definitions") asks. Names follow the papers exactly:

* **pass@k** (Chen et al. 2021): chance that at least one of k trials drawn without replacement from
  the n run passes, ``1 - C(n-c, k) / C(n, k)``. pass@1 is the mean pass rate.
* **pass^k** (tau-bench): chance that *all* k drawn trials pass, ``C(c, k) / C(n, k)``.
* **consistency@k** (turn-bon): share of tasks solved in at least k of their trials, ``c >= k``.

Tasks with fewer than k trials cannot be scored at k (the estimators are undefined for k > n), so
every aggregate at k drops them from both numerator and denominator instead of treating them as
failures; a crashed trial should already have been counted as a failed trial by the caller (SPEC:
"an attempt that ended in an exception counts as a failure"), so in a healthy run no task is dropped.

Uncertainty is always over tasks, not trials: the tasks are the sample we want to generalise from,
and trials of one task are correlated. When two settings ran the same tasks, compare them with
:func:`paired_bootstrap`, which resamples tasks jointly so that task difficulty cancels out.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

Counts = Sequence[tuple[int, int]]
"""Per-task ``(n, c)``: trials run and trials passed."""

# Upper bound on index-matrix elements materialised at once by the bootstrap, so that many tasks
# times many resamples never needs more than a few tens of megabytes.
_MAX_CHUNK_ELEMENTS = 1_000_000


def _check_counts(n: int, c: int, k: int) -> None:
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must satisfy 1 <= k <= n, got k={k}, n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task (Chen et al. 2021).

    Uses the product form ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` because the binomial coefficients in
    ``1 - C(n-c,k)/C(n,k)`` overflow floats for large n long before the ratio itself is extreme.
    """
    _check_counts(n, c, k)
    if n - c < k:
        # Every k-subset must contain a passing trial.
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """tau-bench pass^k for one task: chance that k trials drawn without replacement all pass.

    Product form ``prod_{i<k} (c-i)/(n-i)`` for the same overflow reason as :func:`pass_at_k`.
    """
    _check_counts(n, c, k)
    if c < k:
        return 0.0
    i = np.arange(k)
    return float(np.prod((c - i) / (n - i)))


def _eligible(counts: Counts, k: int) -> list[tuple[int, int]]:
    """Tasks that can be scored at k, i.e. with at least k trials (see module docstring)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    eligible = [(int(n), int(c)) for n, c in counts if n >= k]
    if not eligible:
        raise ValueError(f"no task has at least k={k} trials")
    return eligible


def _per_task(estimator, counts: Counts, k: int) -> np.ndarray:
    """`estimator(n, c, k)` of every task with at least k trials, in input order. Tasks share few
    distinct (n, c) pairs (n is the trials per task), so each pair is computed once."""
    seen: dict[tuple[int, int], float] = {}
    out = []
    for pair in _eligible(counts, k):
        value = seen.get(pair)
        if value is None:
            value = seen[pair] = estimator(pair[0], pair[1], k)
        out.append(value)
    return np.array(out, dtype=float)


def per_task_pass_at_k(counts: Counts, k: int) -> np.ndarray:
    """pass@k of every task with at least k trials, in input order; feed this to the bootstraps."""
    return _per_task(pass_at_k, counts, k)


def per_task_pass_hat_k(counts: Counts, k: int) -> np.ndarray:
    """pass^k of every task with at least k trials, in input order."""
    return _per_task(pass_hat_k, counts, k)


def mean_pass_at_k(counts: Counts, k: int) -> float:
    """pass@k averaged over tasks; tasks with fewer than k trials are excluded, not failed."""
    return float(per_task_pass_at_k(counts, k).mean())


def mean_pass_hat_k(counts: Counts, k: int) -> float:
    """pass^k averaged over tasks; tasks with fewer than k trials are excluded, not failed."""
    return float(per_task_pass_hat_k(counts, k).mean())


def consistency_at_k(counts: Counts, k: int) -> float:
    """turn-bon consistency@k: share of tasks solved in at least k trials.

    Tasks with fewer than k trials are excluded (as for pass@k) rather than counted as inconsistent,
    so that a task which lost a trial to infrastructure does not silently lower the score.
    """
    eligible = _eligible(counts, k)
    return float(np.mean([c >= k for _, c in eligible]))


def pass_at_k_curve(counts: Counts, ks: Sequence[int] | None = None) -> pd.DataFrame:
    """pass@k, pass^k and consistency@k for each k (default 1..max trials), each clearly named.

    The three are reported together because they answer different questions (any success, all
    successes, at least k successes) and are easy to confuse when only one is shown.
    """
    if ks is None:
        ks = range(1, max(int(n) for n, _ in counts) + 1)
    rows = []
    for k in ks:
        eligible = _eligible(counts, k)
        rows.append(
            {
                "k": k,
                "pass_at_k": mean_pass_at_k(eligible, k),
                "pass_hat_k": mean_pass_hat_k(eligible, k),
                "consistency_at_k": consistency_at_k(eligible, k),
                "n_tasks": len(eligible),
            }
        )
    return pd.DataFrame(rows)


def _as_1d(values: np.ndarray | Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _check_weights(weights: np.ndarray | Sequence[float] | None, size: int) -> np.ndarray | None:
    if weights is None:
        return None
    w = _as_1d(weights, "weights")
    if w.size != size:
        raise ValueError(f"weights has {w.size} entries for {size} tasks")
    if np.any(w <= 0):
        raise ValueError("weights must be positive")
    return w


def _resampled_means(
    values: np.ndarray,
    weights: np.ndarray | None,
    n_resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Means of ``n_resamples`` with-replacement resamples of the tasks, computed in chunks.

    With weights, each resample's statistic is the weighted mean ``sum(w*v)/sum(w)`` over the drawn
    tasks (a ratio estimator), which is how a pooled share over turns is bootstrapped by task.
    """
    n = values.size
    rows_per_chunk = max(1, _MAX_CHUNK_ELEMENTS // n)
    # The draws stay as they always were (the chunks' sizes decide the stream); they are kept as
    # int32 (the same numbers: one generator routine fills both types for n < 2**32) and averaged
    # a few rows at a time, so a chunk's transient memory is a few MB, not 16.
    kind = np.int32 if n < 2**31 else np.int64
    block = max(1, rows_per_chunk // 8)
    means = np.empty(n_resamples, dtype=float)
    for start in range(0, n_resamples, rows_per_chunk):
        stop = min(n_resamples, start + rows_per_chunk)
        idx = rng.integers(0, n, size=(stop - start, n), dtype=kind)
        for b in range(0, stop - start, block):
            means[start + b:start + min(b + block, stop - start)] = _index_means(values, weights, idx[b:b + block])
    return means


def _index_means(values: np.ndarray, weights: np.ndarray | None, idx: np.ndarray) -> np.ndarray:
    if weights is None:
        return values[idx].mean(axis=1)
    w = weights[idx]
    return (w * values[idx]).sum(axis=1) / w.sum(axis=1)


def _point_estimate(values: np.ndarray, weights: np.ndarray | None) -> float:
    return float(values.mean() if weights is None else np.average(values, weights=weights))


def bootstrap_ci(
    per_task_values: np.ndarray | Sequence[float],
    n_resamples: int = 10_000,
    alpha: float = 0.05,
    seed: int = 0,
    weights: np.ndarray | Sequence[float] | None = None,
) -> tuple[float, float, float]:
    """Mean over tasks and its percentile-bootstrap ``1 - alpha`` interval: ``(mean, lo, hi)``.

    The returned mean is the plain sample mean (not the mean of the bootstrap distribution), so it
    agrees exactly with the headline number reported elsewhere. Pass ``weights`` (e.g. turns per
    task) to bootstrap a pooled ratio instead of an average of per-task values.
    """
    values = _as_1d(per_task_values, "per_task_values")
    w = _check_weights(weights, values.size)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    if type(seed) is not int:  # a Generator or SeedSequence: its state moves, so nothing is reused
        return _bootstrap_ci(values, w, n_resamples, alpha, seed)
    return _cached_bootstrap_ci(values.tobytes(), None if w is None else w.tobytes(), n_resamples, alpha, seed)


@functools.lru_cache(maxsize=64)
def _cached_bootstrap_ci(values: bytes, weights: bytes | None, n_resamples: int, alpha: float,
                         seed: int) -> tuple[float, float, float]:
    """bootstrap_ci on the arrays' bytes: with an integer seed the same input gives the same
    interval, so a report asking twice (the summary, the Pareto table) resamples once."""
    return _bootstrap_ci(np.frombuffer(values), None if weights is None else np.frombuffer(weights), n_resamples,
                         alpha, seed)


def _bootstrap_ci(v: np.ndarray, w: np.ndarray | None, n_resamples: int, alpha: float,
                  seed) -> tuple[float, float, float]:
    means = _resampled_means(v, w, n_resamples, np.random.default_rng(seed))
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return _point_estimate(v, w), float(lo), float(hi)


@dataclass(frozen=True)
class PairedResult:
    """Outcome of a paired bootstrap of ``b - a`` over tasks.

    ``diff`` is the observed mean difference, ``lo``/``hi`` its percentile interval, ``p_value`` the
    two-sided bootstrap p-value defined in :func:`paired_bootstrap`, and ``boot_mean`` the mean of
    the bootstrap distribution (kept so the Monte Carlo and exact versions can be compared).
    """

    diff: float
    lo: float
    hi: float
    p_value: float
    boot_mean: float


def _paired_inputs(
    a: np.ndarray | Sequence[float],
    b: np.ndarray | Sequence[float],
    weights: np.ndarray | Sequence[float] | None,
) -> tuple[np.ndarray, np.ndarray | None]:
    a_arr, b_arr = _as_1d(a, "a"), _as_1d(b, "b")
    if a_arr.shape != b_arr.shape:
        raise ValueError(f"a and b must hold the same tasks, got {a_arr.size} and {b_arr.size} values")
    return b_arr - a_arr, _check_weights(weights, a_arr.size)


def paired_bootstrap(
    a: np.ndarray | Sequence[float],
    b: np.ndarray | Sequence[float],
    n_resamples: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
    weights: np.ndarray | Sequence[float] | None = None,
) -> PairedResult:
    """Paired bootstrap over tasks of the mean difference ``b - a`` (b is the treatment).

    ``a[i]`` and ``b[i]`` must be the same task under the two settings. Task indices are resampled
    with replacement, the per-task differences are averaged (weighted by ``weights`` if given), and
    with ``B = n_resamples`` and ``d*`` the resampled mean differences the two-sided p-value is::

        p = min(1, 2 * (min(#{d* <= 0}, #{d* >= 0}) + 1) / (B + 1))

    This is the percentile-interval p-value: the smallest level at which the equal-tailed
    percentile interval excludes zero, so ``p < alpha`` agrees with the reported interval missing
    zero. Resamples exactly at zero count on both sides (conservative with ties; if every task's
    difference is 0, p = 1). The ``+1`` (Davison & Hinkley 1997) keeps a finite simulation from
    reporting p = 0: the smallest reportable value is ``2/(B+1)``, about 2e-4 for 10,000 resamples.
    :func:`paired_bootstrap_exact` computes the same quantity without the correction.
    """
    diffs, w = _paired_inputs(a, b, weights)
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    boot = _resampled_means(diffs, w, n_resamples, np.random.default_rng(seed))
    tail = min(np.count_nonzero(boot <= 0), np.count_nonzero(boot >= 0))
    return _paired_result(diffs, w, boot, min(1.0, 2.0 * (tail + 1) / (n_resamples + 1)), alpha)


def _paired_result(diffs: np.ndarray, w: np.ndarray | None, boot: np.ndarray, p_value: float,
                   alpha: float) -> PairedResult:
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return PairedResult(diff=_point_estimate(diffs, w), lo=float(lo), hi=float(hi), p_value=float(p_value),
                        boot_mean=float(boot.mean()))


def paired_bootstrap_exact(
    a: np.ndarray | Sequence[float],
    b: np.ndarray | Sequence[float],
    alpha: float = 0.05,
    weights: np.ndarray | Sequence[float] | None = None,
    max_tasks: int = 7,
) -> PairedResult:
    """The ideal bootstrap of :func:`paired_bootstrap`, by enumerating all ``n**n`` resamples.

    Exists to check the Monte Carlo version on tiny inputs: every ordered index tuple is one
    equally likely resample, so the distribution is exact and the p-value is
    ``min(1, 2 * min(P(d* <= 0), P(d* >= 0)))`` with no simulation correction.
    """
    diffs, w = _paired_inputs(a, b, weights)
    n = diffs.size
    if n > max_tasks:
        raise ValueError(f"exact enumeration of {n}**{n} resamples is too large (max_tasks={max_tasks})")
    idx = np.array(list(itertools.product(range(n), repeat=n)), dtype=np.intp).reshape(-1, n)
    boot = _index_means(diffs, w, idx)
    return _paired_result(diffs, w, boot, min(1.0, 2.0 * min(np.mean(boot <= 0), np.mean(boot >= 0))), alpha)


def task_counts(df: pd.DataFrame, setting_col: str, task_col: str, passed_col: str) -> pd.DataFrame:
    """Per (setting, task): ``n`` trials and ``c`` passes, from one row per trial.

    ``passed_col`` must be boolean or 0/1; fractional rewards are rejected rather than rounded,
    because what counts as a pass for a partial-credit task is the caller's decision.
    """
    missing = [col for col in (setting_col, task_col, passed_col) if col not in df.columns]
    if missing:
        raise KeyError(f"columns not in frame: {missing}")
    passed = df[passed_col]
    if passed.isna().any():
        raise ValueError(f"{passed_col} has missing values; decide whether they are failures first")
    if not passed.isin([0, 1, True, False]).all():
        raise ValueError(f"{passed_col} must be boolean or 0/1, got other values")
    frame = pd.DataFrame(
        {setting_col: df[setting_col], task_col: df[task_col], "_passed": passed.astype(int)}
    )
    grouped = frame.groupby([setting_col, task_col], sort=True)["_passed"]
    out = grouped.agg(n="size", c="sum").reset_index()
    out["n"] = out["n"].astype(int)
    out["c"] = out["c"].astype(int)
    return out
