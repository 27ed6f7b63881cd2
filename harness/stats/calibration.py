"""Whether a test's p-values, collected over reruns on a correct decoder, are what a calibrated test gives:
uniform (a KS test at CALIBRATION_ALPHA over 10 bins' histogram) with their share below 0.05 inside its exact binomial
1 - CALIBRATION_ALPHA interval,

    [F^-1(alpha / 2), F^-1(1 - alpha / 2)] / n,   F = Binomial(n, 0.05),

so the false-positive rate at 0.05 is what the test claims, within that interval.

The calibration tests judge the harness's own statistics on its own decoder, a false-alarm budget of their own:
CALIBRATION_RUN_ALPHA per run, split (Bonferroni) over the two tests of every statistic a run calibrates, so
CALIBRATION_ALPHA = CALIBRATION_RUN_ALPHA / (2 x CALIBRATED_STATISTICS). With the law families' RUN_ALPHA
(harness/stats/multiple_testing.py) a run on the harness's own decoder raises a false alarm with probability at most
RUN_ALPHA + CALIBRATION_RUN_ALPHA = 2e-3, a run on any other decoder at most RUN_ALPHA = 1e-3 (the calibration skips).

A KS test of n p-values at level alpha detects a law of the p-values at KS distance d from the uniform with power
0.99 once d >= sqrt(ln(2 / alpha) / (2 n)) + z_0.99 / (2 sqrt(n)) (harness/stats/power.py ks_sample_size, solved for
the shift): `detectable_ks_distance`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.stats.uniformity import uniformity

CALIBRATION_RUN_ALPHA = 1e-3  # one run's calibration tests together
CALIBRATED_STATISTICS = (
    4  # suites/sampling/test_calibration.py: two first-token-law cases x (chi-square, G)
    + 5  # suites/sampling/test_calibration.py: the whole-sequence case, 3 pooled and 2 per-position statistics
    + 4  # suites/features/test_feature_calibration.py: two law cases x (chi-square, G)
)
CALIBRATION_ALPHA = CALIBRATION_RUN_ALPHA / (2 * CALIBRATED_STATISTICS)  # each KS test and each binomial interval
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


def detectable_ks_distance(n: int, alpha: float = CALIBRATION_ALPHA, power: float = 0.99) -> float:
    """The KS distance from the uniform that n p-values' KS test at level alpha detects with `power`:
    d = sqrt(ln(2 / alpha) / (2 n)) + z_power / (2 sqrt(n))   (DKW critical gap plus the gap's largest sd)."""
    return math.sqrt(math.log(2 / alpha) / (2 * n)) + stats.norm.ppf(power) / (2 * math.sqrt(n))


def calibration(p_values: np.ndarray) -> Calibration:
    test = uniformity(p_values, bins=10)
    n = len(p_values)
    low, high = stats.binom.ppf([CALIBRATION_ALPHA / 2, 1 - CALIBRATION_ALPHA / 2], n, NOMINAL) / n
    return Calibration(n, test.ks_p, float(np.mean(p_values < NOMINAL)), float(low), float(high), test.histogram)
