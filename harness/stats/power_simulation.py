"""The omnibus test's power measured by simulation, against the claim it is sized for (harness/stats/power.py
omnibus_sample_size): draw N samples from the least favourable law at total variation `tv` from the target, over the
target's cells pooled at N, and count the runs whose chi-square or G test rejects at the level each p-value of the
family is held to (Holm's first step, alpha / m: a lower bound on the family's power).

The least favourable alternative at TV delta moves mass between two halves of the law in proportion to each cell's
probability (the bound chi2-divergence >= 4 delta^2 is an equality only there):

    p'(c) = p(c) (1 + delta / a)   for c in A,      p'(c) = p(c) (1 - delta / b)   for c in B,
    a = p(A) >= 1/2, b = p(B) = 1 - a (the cells ordered by probability, A the largest first until it holds half);
    TV(p, p') = delta, chi2-divergence = delta^2 (1 / a + 1 / b) >= 4 delta^2 (equal at a = b = 1/2).

A split that cannot hold half exactly makes the alternative easier to see, never harder: the measured power is at
least the claim's wherever the claim is right.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy import stats


def least_favourable(probabilities: np.ndarray, tv: float) -> np.ndarray:
    """The law at total variation `tv` from `probabilities` that moves mass between its two halves (above)."""
    order = np.argsort(-probabilities, kind="stable")
    cumulative = np.cumsum(probabilities[order])
    cut = int(np.searchsorted(cumulative, 0.5)) + 1  # the first cells holding at least half
    in_a = np.zeros(len(probabilities), dtype=bool)
    in_a[order[:cut]] = True
    a = float(probabilities[in_a].sum())
    b = 1.0 - a
    if b <= tv:
        raise ValueError(f"the law's smaller half ({b:.3g}) cannot give up a total variation of {tv}")
    return np.where(in_a, probabilities * (1 + tv / a), probabilities * (1 - tv / b))


def simulated_power(
    pooled: Mapping[object, float], n: int, tv: float, alpha: float, replicates: int, seed: int
) -> float:
    """The share of `replicates` runs of N samples from the least favourable law at `tv` (over the pooled cells of
    the target, cell -> probability) in which the chi-square or the G test rejects at level alpha."""
    target = np.array(list(pooled.values()), dtype=float)
    target = target / target.sum()
    alternative = least_favourable(target, tv)
    counts = np.random.default_rng(seed).multinomial(n, alternative, size=replicates).astype(float)
    expected = np.broadcast_to(target * n, counts.shape)
    _, chi2_p = stats.power_divergence(counts, expected, axis=1)  # Pearson, as goodness_of_fit runs it
    _, g_p = stats.power_divergence(counts, expected, axis=1, lambda_="log-likelihood")
    return float(((chi2_p <= alpha) | (g_p <= alpha)).mean())
