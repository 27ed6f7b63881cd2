"""Sample sizes from a power target, and the smallest shift a sample size detects.

Notation: N samples, alpha the per-test level, beta = 1 - power, delta a total-variation shift.
"""

from __future__ import annotations

import math

from scipy import optimize, stats

POWER = 0.99


def sample_size(tv_shift: float, alpha: float, power: float = POWER) -> int:
    """N to detect a shift of `tv_shift` in one pre-registered event at level alpha with the given power:
    N = ceil((z_{1-alpha} + z_{power})^2 / (4 delta^2))   (binomial event, worst case p = 1/2)."""
    z = stats.norm.ppf(1 - alpha) + stats.norm.ppf(power)
    return math.ceil(z * z / (4 * tv_shift * tv_shift))


def ks_sample_size(tv_shift: float, alpha: float, power: float = POWER) -> int:
    """N for a Kolmogorov-Smirnov test of u ~ U(0, 1) at level alpha to detect, with the given power, a law of
    u whose CDF departs from the uniform's by tv_shift somewhere (a TV shift of the token law moved in one
    direction of the probability order opens a gap of exactly that size):
        critical gap  c = sqrt(ln(2 / alpha) / (2 N))            (Dvoretzky-Kiefer-Wolfowitz, Massart)
        the gap's sampling sd <= 1 / (2 sqrt(N))
        N = ceil(((sqrt(ln(2 / alpha) / 2) + z_power / 2) / tv_shift)^2)."""
    root_n = (math.sqrt(math.log(2 / alpha) / 2) + stats.norm.ppf(power) / 2) / tv_shift
    return math.ceil(root_n * root_n)


def min_detectable_tv(n: int, df: int, alpha: float, power: float = POWER) -> float:
    """Smallest total-variation shift the chi-square test detects with `power` at level alpha.

    Under an alternative at TV distance delta, N * chi2-divergence >= 4 N delta^2, so the statistic is at
    least noncentral chi-square(df, lambda = 4 N delta^2): solve P(ncx2 > critical) = power for delta.
    """
    critical = stats.chi2.ppf(1 - alpha, df)

    def shortfall(delta: float) -> float:
        return stats.ncx2.sf(critical, df, 4 * n * delta * delta) - power

    return float(optimize.brentq(shortfall, 1e-6, 1.0))
