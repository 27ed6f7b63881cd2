"""Tests of u ~ U(0, 1) for probability integral transforms: Kolmogorov-Smirnov and a binned chi-square."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

PIT_BINS = 20


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
