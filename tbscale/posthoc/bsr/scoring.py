"""BSR's numbers: the comparison schedule (exhaustive pairs, Swiss rounds), the regularized
weighted Bradley-Terry fit, and the mapping of scores to bounded auxiliary rewards that keeps every
pass above every fail (bsr-self-reward.txt Appendix A; docs/bsr.md)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np

from tbscale.errors import TbscaleError


# ---------------------------------------------------------------------------------------------
# Scheduling
# ---------------------------------------------------------------------------------------------


def swiss_rounds(n: int) -> int:
    """T = min(ceil(log2 n) + 2, n - 1) (Table 6)."""
    return min(math.ceil(math.log2(n)) + 2, n - 1) if n >= 2 else 0


def exhaustive_pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def swiss_round_pairs(scores: Sequence[float], played: set[frozenset[int]], rng: random.Random) -> list[tuple[int, int]]:
    """One Swiss round: order by current score (ties in seeded random order), then pair each unpaired
    player with the nearest-ranked unpaired one it has not met yet. At most floor(n/2) pairs."""
    n = len(scores)
    jitter = [rng.random() for _ in range(n)]
    order = sorted(range(n), key=lambda i: (-scores[i], jitter[i]))
    used: set[int] = set()
    pairs: list[tuple[int, int]] = []
    for a_pos, i in enumerate(order):
        if i in used:
            continue
        for j in order[a_pos + 1:]:
            if j not in used and frozenset((i, j)) not in played:
                pairs.append((i, j))
                used.update((i, j))
                break
    return pairs[: n // 2]


# ---------------------------------------------------------------------------------------------
# Bradley-Terry and the reward mapping
# ---------------------------------------------------------------------------------------------


def fit_bradley_terry(n: int, comparisons: Sequence[tuple[int, int, float]], l2: float = 0.1,
                      iters: int = 100, tol: float = 1e-10) -> np.ndarray:
    """Scores s (length n) maximizing sum w*log sigmoid(s_winner - s_loser) - l2/2 * ||s||^2.

    ``comparisons``: (winner, loser, weight). Newton's method on a strictly concave objective
    (l2 > 0), with step halving as a safeguard. Unconnected or uncompared players stay at 0.
    """
    if l2 <= 0:
        raise ValueError("bt_l2 must be > 0 (the fit is otherwise unbounded when one side never loses)")
    s = np.zeros(n)
    if n == 0 or not comparisons:
        return s
    win = np.array([c[0] for c in comparisons])
    lose = np.array([c[1] for c in comparisons])
    w = np.array([float(c[2]) for c in comparisons])

    def objective(x: np.ndarray) -> float:
        return float(np.sum(w * -np.logaddexp(0.0, -(x[win] - x[lose]))) - l2 / 2 * x @ x)

    current = objective(s)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(s[win] - s[lose])))  # P(winner beats loser)
        g = -l2 * s
        np.add.at(g, win, w * (1 - p))
        np.add.at(g, lose, -w * (1 - p))
        h = -l2 * np.eye(n)
        c = w * p * (1 - p)
        np.add.at(h, (win, win), -c)
        np.add.at(h, (lose, lose), -c)
        np.add.at(h, (win, lose), c)
        np.add.at(h, (lose, win), c)
        step = np.linalg.solve(h, -g)
        t = 1.0
        while t > 1e-6:
            cand = s + t * step
            value = objective(cand)
            if value >= current - 1e-12:
                break
            t /= 2
        s, improvement = cand, value - current
        current = value
        if np.max(np.abs(t * step)) < tol or abs(improvement) < tol:
            break
    return s


def normalize(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=float)
    if scores.size == 0:
        return scores
    sd = scores.std()
    return np.zeros_like(scores) if sd < 1e-12 else (scores - scores.mean()) / sd


def soft_deadzone(z: np.ndarray, delta: float, tau: float) -> np.ndarray:
    """sign(z) * (g(|z|) - g(0)), g(x) = tau*softplus((x - delta)/tau); tau=0: max(|z|-delta, 0)*sign(z)."""
    z = np.asarray(z, dtype=float)
    a = np.abs(z)
    if tau <= 0:
        return np.sign(z) * np.maximum(a - delta, 0.0)
    g = tau * np.logaddexp(0.0, (a - delta) / tau)
    g0 = tau * np.logaddexp(0.0, -delta / tau)
    return np.sign(z) * (g - g0)


def center_and_bound(d: np.ndarray, amplitude: float) -> np.ndarray:
    """Centre on the bucket mean, then scale so the largest |value| is exactly `amplitude`."""
    d = np.asarray(d, dtype=float)
    if d.size == 0:
        return d
    u = d - d.mean()
    top = np.max(np.abs(u))
    return np.zeros_like(u) if top < 1e-12 else amplitude * u / top


def aux_from_scores(scores: np.ndarray, amplitude: float, delta: float, tau: float) -> np.ndarray:
    return center_and_bound(soft_deadzone(normalize(scores), delta, tau), amplitude)


def random_aux(n: int, amplitude: float, rng: np.random.Generator) -> np.ndarray:
    """Random-reward control: uniform draws, centred and bounded exactly like BSR's rewards."""
    if n < 2:
        return np.zeros(n)
    return center_and_bound(rng.uniform(-1.0, 1.0, size=n), amplitude)


def effective_amplitudes(rewards: Sequence[float], passed: Sequence[bool], a0: float, a1: float,
                         margin: float = 0.01) -> tuple[float, float, float]:
    """(a0, a1, scale): shrink both amplitudes when a0 + a1 would let a failure reach a pass."""
    r = np.asarray(rewards, dtype=float)
    p = np.asarray(passed, dtype=bool)
    if not p.any() or p.all() or a0 + a1 <= 0:
        return a0, a1, 1.0
    gap = float(r[p].min() - r[~p].max())
    if gap <= 0:
        raise TbscaleError(f"a passing trajectory has verifier reward {r[p].min()} <= a failing one's {r[~p].max()}: "
                           "no refinement can keep passes above failures")
    scale = min(1.0, (1 - margin) * gap / (a0 + a1))
    return a0 * scale, a1 * scale, scale


def check_ordering(refined: Sequence[float], passed: Sequence[bool]) -> bool:
    r = np.asarray(refined, dtype=float)
    p = np.asarray(passed, dtype=bool)
    return bool(not p.any() or p.all() or r[p].min() > r[~p].max())
