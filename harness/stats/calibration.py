"""Whether a test's p-values, collected over reruns on a correct decoder, are what a calibrated test gives:
uniform (a KS test at CALIBRATION_ALPHA over 10 bins' histogram) with their share below 0.05 inside its exact binomial
1 - CALIBRATION_ALPHA interval,

    [F^-1(alpha / 2), F^-1(1 - alpha / 2)] / n,   F = Binomial(n, 0.05),

so the false-positive rate at 0.05 is what the test claims, within that interval."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.stats.uniformity import uniformity

CALIBRATION_ALPHA = 1e-3
NOMINAL = 0.05


@dataclass(frozen=True)
class Calibration:
    n: int
    ks_p: float
    rate: float  # the share of p-values below NOMINAL
    low: float
    high: float
    histogram: tuple[int, ...]

    @property
    def uniform(self) -> bool:
        return self.ks_p > CALIBRATION_ALPHA

    @property
    def rate_within(self) -> bool:
        return self.low <= self.rate <= self.high

    def problems(self, name: str) -> list[str]:
        """What is wrong with the p-values of the statistic `name` (empty: calibrated)."""
        found = [] if self.uniform else [f"{name} p-values are not uniform: {self.summary()}, {self.histogram}"]
        if not self.rate_within:
            found.append(f"{name}: {self.summary()}: the share below {NOMINAL} is outside its interval")
        return found

    def summary(self) -> str:
        return (
            f"{self.n} p-values, KS p={self.ks_p:.3g}, P(p<{NOMINAL})={self.rate:.4f} "
            f"(interval {self.low:.4f}..{self.high:.4f})"
        )


def calibration(p_values: np.ndarray) -> Calibration:
    test = uniformity(p_values, bins=10)
    n = len(p_values)
    low, high = stats.binom.ppf([CALIBRATION_ALPHA / 2, 1 - CALIBRATION_ALPHA / 2], n, NOMINAL) / n
    return Calibration(n, test.ks_p, float(np.mean(p_values < NOMINAL)), float(low), float(high), test.histogram)
