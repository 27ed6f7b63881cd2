"""Pearson chi-square and G tests of samples against an exact law, over cells pooled to expected counts >= 5
(Cochran), with KL and total variation beside them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_EXPECTED = 5.0  # Cochran: pool cells whose expected count is below this


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
