"""Whole-sequence statistics of sampled continuations against the target's conditionals, per position and
pooled: the probability-ordered randomized PIT and the log-likelihood test.

Notation: sequence i, output position t, token x_it drawn from p_it = the target's processed conditional
given the prompt and x_i,<t. Under correctness every x_it is a draw from p_it, whatever happened before.

- Probability-ordered PIT (Dunn & Smyth 1996, with the vocabulary sorted by p_it, largest first):
      u_it = P_it(tokens ranked before x_it) + V_it p_it(x_it),   V_it ~ U(0, 1)
  u_it ~ U(0, 1) i.i.d. under correctness; mass moved toward likely tokens pushes u toward 0, mass moved
  to the tail pushes it toward 1 (a vocabulary-id order scatters either shift over [0, 1]).
- Log-likelihood: X_it = log p_it(x_it) - mu_it, mu_it = sum_v p log p, summed over a position's sequences
  (or over all tokens): S = sum X_it, Z = S / sqrt(sum s2_it) with s2_it = sum_v p (log p)^2 - mu_it^2 (the
  exact conditional variance). A bias toward the head makes S > 0, toward the tail S < 0. log p is heavily
  skewed (a rare token is a large negative term), so the normal approximation is far too liberal in the lower
  tail at the suite's per-test alpha (~1e-6); the p-value is the Lugannani-Rice saddlepoint approximation
  from the exact conditional cumulant generating function, summed over the terms:
      K_it(s) = log sum_v p^(1 + s) - s mu_it,   K(s) = sum K_it(s),   K'(s_hat) = S,
      w = sign(s_hat) sqrt(2 (s_hat S - K(s_hat))),   u = s_hat sqrt(K''(s_hat)),
      P(sum >= S) ~ 1 - Phi(w) + phi(w) (1/u - 1/w),   p = 2 min(P(sum >= S), P(sum <= S)).
  K is tabulated on SADDLE_GRID (with K' and K'' for cubic Hermite interpolation); beyond the grid the
  Chernoff bound exp(K(s) - s S) at its end is used (conservative).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import interpolate, optimize, stats

from harness.stats.kernels import SADDLE_GRID, cumulants, log_likelihood_terms, probability_ordered_pit

__all__ = ["SADDLE_GRID", "cumulants", "log_likelihood_terms", "probability_ordered_pit"]

NEAR_THE_MEAN = 0.1  # |w| below which the saddlepoint formula gives way to its normal limit


def saddlepoint_p(total: float, table: np.ndarray, grid: np.ndarray | None = None) -> float:
    """Two-sided p-value of an observed sum S = `total` of independent terms whose summed K, K', K'' on the
    grid are `table` [G, 3] (Lugannani-Rice; see the module docstring)."""
    grid = SADDLE_GRID.numpy() if grid is None else grid
    k, k1, k2 = table[:, 0], table[:, 1], table[:, 2]
    variance = float(np.interp(0.0, grid, k2))
    if variance <= 0.0:
        return 1.0
    if total <= k1[0] or total >= k1[-1]:  # the saddlepoint is beyond the grid: Chernoff bound at its end
        end = 0 if total <= k1[0] else -1
        return float(min(1.0, 2.0 * np.exp(k[end] - grid[end] * total)))
    slope = interpolate.CubicHermiteSpline(grid, k1, k2)
    s_hat = float(optimize.brentq(lambda s: float(slope(s)) - total, grid[0], grid[-1]))
    k_hat = float(interpolate.CubicHermiteSpline(grid, k, k1)(s_hat))
    w_squared = 2.0 * (s_hat * total - k_hat)
    if w_squared < NEAR_THE_MEAN**2:  # 1/u - 1/w cancels catastrophically here: the normal limit (p > 0.9)
        return float(2.0 * stats.norm.sf(abs(total) / np.sqrt(variance)))
    w = np.sign(s_hat) * np.sqrt(w_squared)
    u = s_hat * np.sqrt(float(np.interp(s_hat, grid, k2)))
    upper = stats.norm.sf(w) + stats.norm.pdf(w) * (1.0 / u - 1.0 / w)
    return float(np.clip(2.0 * min(upper, 1.0 - upper), 0.0, 1.0))


def z_test(centred: np.ndarray, variance: np.ndarray, table: np.ndarray) -> tuple[float, float]:
    """(Z = sum(centred) / sqrt(sum(variance)), its two-sided saddlepoint p-value from the summed cumulant
    table [G, 3] of the same terms)."""
    total = float(variance.sum())
    if total <= 0.0:
        return 0.0, 1.0
    observed = float(centred.sum())
    return observed / np.sqrt(total), saddlepoint_p(observed, table)


@dataclass(frozen=True)
class PositionTests:
    """The statistics of one output position (or of all positions pooled)."""

    n: int
    ks: float
    ks_p: float
    ks_direction: str  # "toward 0" (likely tokens over-drawn) or "toward 1" (tail over-drawn)
    z: float
    z_p: float


def position_tests(u: np.ndarray, centred: np.ndarray, variance: np.ndarray, table: np.ndarray) -> PositionTests:
    """KS of u ~ U(0, 1) (with the side of the largest CDF gap) and the log-likelihood test (its terms'
    summed cumulant table [G, 3])."""
    if len(u) == 0:  # no sequence reached this position (every one ended at an EOS before it)
        return PositionTests(0, 0.0, 1.0, "nowhere", 0.0, 1.0)
    ks = stats.kstest(u, "uniform")
    direction = "toward 0" if ks.statistic_sign > 0 else "toward 1"  # empirical CDF above the uniform: small u
    z, z_p = z_test(centred, variance, table)
    return PositionTests(len(u), float(ks.statistic), float(ks.pvalue), direction, z, z_p)
