"""Pearson chi-square and G tests of samples against an exact law, over cells pooled to expected counts >= 5
(Cochran), with KL and total variation beside them.

Two laws the tests cannot judge as they stand, each a verdict of its own:
- observations where the law has no mass (a cell of probability 0, or samples outside the known cells when the rest
  of the law has none) are impossible under it: the law is rejected with certainty (p = 0), whatever the other cells
  say, and the total variation counts them;
- a law left with one cell after pooling has no degree of freedom (df 0): there is nothing to test, and the case is
  unjudgeable (`unjudgeable` says why; its p-values are NaN), never a pass."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_EXPECTED = 5.0  # Cochran: pool cells whose expected count is below this
IMPOSSIBLE = "impossible"  # the cell of the observations where the law has no mass
IMPOSSIBLE_SHOWN = 8


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
    impossible: int = 0  # observations where the law has no mass
    # which they were: (cell, count), most frequent first, at most IMPOSSIBLE_SHOWN (what a report names)
    impossible_seen: tuple[tuple[Hashable, int], ...] = ()
    unjudgeable: str | None = None  # why the tests cannot judge the law (df 0)


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


def pooled_cells(probabilities: dict[Hashable, float], n: int, pooled_label: Hashable) -> int:
    """How many cells the law pools to at N (before any sample: Cochran's rule reads expected counts only)."""
    labels, _, _ = pool_cells(probabilities, Counter(), n, pooled_label)
    return len(labels)


def impossible_cells(probabilities: dict[Hashable, float], observed: Counter, pooled_label: Hashable) -> set:
    """The observed cells the law gives no mass: a cell of probability 0, or one outside the known cells where the law
    has no mass left for the rest."""
    known = {cell for cell in probabilities if cell != pooled_label}
    rest = max(1.0 - sum(probabilities[cell] for cell in known), 0.0)
    return {cell for cell in observed if (probabilities[cell] <= 0.0 if cell in known else rest <= 0.0)}


def goodness_of_fit(
    probabilities: dict[Hashable, float], samples: Sequence[Hashable], pooled_label: Hashable
) -> GoodnessOfFit:
    """Pearson chi-square and G = 2 N KL(empirical || target) over Cochran-pooled cells; p = 0 where samples fell
    where the law has no mass, NaN (and `unjudgeable`) where the pooled law has one cell.

        TV = 1/2 (sum over the law's cells |observed / N - p| + impossible / N)"""
    n = len(samples)
    observed = Counter(samples)
    zero_mass = impossible_cells(probabilities, observed, pooled_label)
    impossible = sum(observed[cell] for cell in zero_mass)
    seen = sorted(((cell, observed[cell]) for cell in zero_mass), key=lambda pair: (-pair[1], repr(pair[0])))
    possible = Counter({cell: count for cell, count in observed.items() if cell not in zero_mass})
    labels, counts, expected = pool_cells(probabilities, possible, n - impossible, pooled_label)
    unjudgeable = None
    if len(labels) < 2:
        unjudgeable = f"the law has {len(labels)} cell after pooling at N = {n}: no degree of freedom to test"
        chi2 = chi2_p = g = g_p = float("nan")
    else:
        expected = expected * (counts.sum() / expected.sum())  # exact sums for scipy (pooling rounds nothing away)
        chi2, chi2_p = stats.chisquare(counts, expected)
        g, g_p = stats.power_divergence(counts, expected, lambda_="log-likelihood")
    if impossible:  # rejected with certainty: the law cannot produce what was observed
        labels, counts, expected = [*labels, IMPOSSIBLE], np.append(counts, impossible), np.append(expected, 0.0)
        chi2, chi2_p, g, g_p = float("inf"), 0.0, float("inf"), 0.0
    empirical = counts / n
    target = expected / max(expected.sum(), 1e-300)
    nonzero = (empirical > 0) & (target > 0)
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
        float("inf") if impossible else kl,
        tv,
        tuple(labels),
        tuple(int(c) for c in counts),
        tuple(float(e) for e in expected),
        impossible,
        tuple(seen[:IMPOSSIBLE_SHOWN]),
        unjudgeable,
    )
