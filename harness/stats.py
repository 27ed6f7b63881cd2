"""Hypothesis tests for sampling suites: sample sizes from a power target, chi-square and G tests with
Cochran pooling, KL and total variation, Holm correction, and uniformity tests of probability integral transforms.

Notation: N samples, m p-values in the family, alpha the family-wise error rate, beta = 1 - power.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

FAMILY_ALPHA = 1e-3  # family-wise false-positive rate of one run of the sampling suite (Holm)
POWER = 0.99
MIN_EXPECTED = 5.0  # Cochran: pool cells whose expected count is below this
PIT_BINS = 20


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


@dataclass(frozen=True)
class GoodnessOfFit:
    """Observed vs expected over pooled cells, with both tests and the distances."""

    n: int
    cells: int
    df: int
    chi2: float
    chi2_p: float
    g: float
    g_p: float
    kl: float
    tv: float
    labels: tuple
    observed: tuple[int, ...]
    expected: tuple[float, ...]


def pool_cells(
    probabilities: dict[Hashable, float], observed: Counter, n: int, pooled_label: Hashable
) -> tuple[list, np.ndarray, np.ndarray]:
    """Cells with expected count < MIN_EXPECTED are merged into `pooled_label` (which also collects any
    observation outside the known cells); if that pool is still small, it absorbs the smallest cells."""
    big = {cell: p for cell, p in probabilities.items() if n * p >= MIN_EXPECTED and cell != pooled_label}
    pooled_p = 1.0 - sum(big.values())
    pooled_o = n - sum(observed.get(cell, 0) for cell in big)
    for cell in sorted(big, key=big.get):
        if n * pooled_p >= MIN_EXPECTED or len(big) <= 1:
            break
        pooled_p += big.pop(cell)
        pooled_o += observed.get(cell, 0)
    labels = [*big, pooled_label]
    expected = np.array([*big.values(), max(pooled_p, 0.0)]) * n
    counts = np.array([*(observed.get(c, 0) for c in big), pooled_o], dtype=float)
    if expected[-1] <= 0:  # nothing pooled
        labels, expected, counts = labels[:-1], expected[:-1], counts[:-1]
    return labels, counts, expected


def goodness_of_fit(
    probabilities: dict[Hashable, float], samples: Sequence[Hashable], pooled_label: Hashable
) -> GoodnessOfFit:
    """Pearson chi-square and G = 2 N KL(empirical || target) over Cochran-pooled cells."""
    n = len(samples)
    labels, counts, expected = pool_cells(probabilities, Counter(samples), n, pooled_label)
    expected = expected * (counts.sum() / expected.sum())  # exact sums for scipy (pooling rounds nothing away)
    chi2, chi2_p = stats.chisquare(counts, expected)
    g, g_p = stats.power_divergence(counts, expected, lambda_="log-likelihood")
    empirical = counts / n
    target = expected / n
    nonzero = empirical > 0
    kl = float(np.sum(empirical[nonzero] * np.log(empirical[nonzero] / target[nonzero])))  # KL(emp || target)
    tv = float(0.5 * np.abs(empirical - target).sum())
    return GoodnessOfFit(
        n,
        len(labels),
        len(labels) - 1,
        float(chi2),
        float(chi2_p),
        float(g),
        float(g_p),
        kl,
        tv,
        tuple(labels),
        tuple(int(c) for c in counts),
        tuple(float(e) for e in expected),
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values: p_(i) -> max_{j <= i} min(1, (m - j + 1) p_(j)), in the input order.
    A NaN p-value (a test with nothing to test) counts as 1: it must not reorder the others (NaN compares
    false with everything, so sorting it would scramble the step-down)."""
    p_values = [1.0 if math.isnan(p) else p for p in p_values]
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


@dataclass(frozen=True)
class Uniformity:
    n: int
    ks: float
    ks_p: float
    chi2: float
    chi2_p: float
    histogram: tuple[int, ...]


def uniformity(u: np.ndarray, bins: int = PIT_BINS) -> Uniformity:
    """Kolmogorov-Smirnov and binned chi-square tests of u ~ U(0, 1)."""
    ks = stats.kstest(u, "uniform")
    histogram, _ = np.histogram(u, bins=bins, range=(0.0, 1.0))
    chi2, chi2_p = stats.chisquare(histogram)
    return Uniformity(
        len(u), float(ks.statistic), float(ks.pvalue), float(chi2), float(chi2_p), tuple(int(h) for h in histogram)
    )
