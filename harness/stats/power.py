"""Sample sizes from a power target, and the smallest shift a sample size detects.

Notation: N samples, alpha the per-test level, beta = 1 - power, delta a total-variation shift.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

from scipy import optimize, stats

from harness.stats.goodness_of_fit import pooled_cells

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


@cache
def noncentrality_for_power(df: int, alpha: float, power: float = POWER) -> float:
    """The noncentrality lambda at which a chi-square test with `df` degrees of freedom at level alpha rejects with
    the given power: P(ncx2(df, lambda) > chi2_{1-alpha}(df)) = power."""
    critical = stats.chi2.ppf(1 - alpha, df)
    return float(optimize.brentq(lambda lam: stats.ncx2.sf(critical, df, lam) - power, 1e-9, 1e7))


def omnibus_sample_size(tv_shift: float, alpha: float, df_at: Callable[[int], int], power: float = POWER) -> int:
    """N at which the omnibus test of a law (Pearson chi-square or G over its pooled cells) detects any shift of
    total variation `tv_shift` with the given power at level alpha, where `df_at(N)` is the degrees of freedom the
    law's cells pool to at N (known before sampling: Cochran's rule reads expected counts only).

    A law at TV distance delta has N * chi2-divergence >= 4 N delta^2 (Cauchy-Schwarz: 2 delta = sum |p' - p| <=
    sqrt(sum (p' - p)^2 / p)), so the statistic is at least noncentral chi-square(df, 4 N delta^2):
        N = ceil(lambda(df) / (4 delta^2)),   lambda(df) = noncentrality_for_power(df, alpha, power),
    iterated from df = df_at(1) until df_at(N) no longer grows (pooling keeps more cells at a larger N: the fixed
    point is reached from below, a few steps). The bound is attained by the least favourable alternative, which moves
    mass delta between two halves of the law in proportion to each cell's probability. The test needs one degree of
    freedom at least: where the law still pools to one cell at that N (a flat law, no cell of expected count 5), N
    grows to the smallest at which it pools to two (a larger N only adds power), unless no N does (a law of one
    cell)."""
    n = 1
    while True:
        df = max(df_at(n), 1)
        needed = math.ceil(noncentrality_for_power(df, alpha, power) / (4 * tv_shift * tv_shift))
        if needed <= n:
            if df_at(n) >= 1:
                return n
            testable = smallest_testable_n(n, df_at)
            if testable == n:  # a law of one cell: nothing to test at any N
                return n
            needed = testable  # its cells now counted: the fixed point again from there
        n = needed


MAX_GROWTH = 8  # a law that pools to one cell up to 8 times the N its power asks for stays unjudgeable (and fails)


def smallest_testable_n(n: int, df_at: Callable[[int], int]) -> int:
    """The smallest N >= n at which the law pools to two cells at least (df_at(N) >= 1; df_at never shrinks as N
    grows), found by doubling then bisection; n itself where no N up to MAX_GROWTH * n does (a law of one cell, or
    one spread so thin that testing it would take many times the samples: unjudgeable, never a pass)."""
    high = n
    while df_at(high) < 1:
        if high >= MAX_GROWTH * n:
            return n
        high *= 2
    low = max(n, high // 2)  # df_at(low) < 1 unless low == high
    while low + 1 < high:
        middle = (low + high) // 2
        low, high = (low, middle) if df_at(middle) >= 1 else (middle, high)
    return high


def law_sample_size(probabilities: dict[object, float], pooled_label: object, tv_shift: float, alpha: float) -> int:
    """N for a law case (cell -> probability; the pruned rest under `pooled_label`): the omnibus tests over its cells
    pooled at N detect a shift of `tv_shift` with power POWER at level alpha (omnibus_sample_size)."""
    return omnibus_sample_size(tv_shift, alpha, law_df_at(probabilities, pooled_label))


def law_df_at(probabilities: dict[object, float], pooled_label: object) -> Callable[[int], int]:
    """N -> the degrees of freedom of the law's cells pooled at N (Cochran's rule: expected counts only)."""
    return lambda n: pooled_cells(probabilities, n, pooled_label) - 1
