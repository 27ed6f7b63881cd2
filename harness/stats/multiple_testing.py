"""The families of p-values of one run: their false-positive budget and the Holm step-down correction.

A run's statistical tests of a decoder's laws are two families, the sampling suite's (first-token laws and whole
sequences) and the features suite's laws, each corrected with Holm at FAMILY_ALPHA. The run's budget, RUN_ALPHA, is
split between them (Bonferroni across the families): a correct decoder fails either with probability at most
RUN_ALPHA per run, whichever suites run. The calibration tests, which judge the harness's own statistics on its own
decoder, are a budget of their own (harness/stats/calibration.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence

RUN_ALPHA = 1e-3  # the false-positive budget of one run's law families together
LAW_FAMILIES = ("sampling", "features")  # the families of p-values a run's budget is split between
FAMILY_ALPHA = RUN_ALPHA / len(LAW_FAMILIES)  # each family's family-wise false-positive rate (Holm)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values: p_(i) -> max_{j <= i} min(1, (m - j + 1) p_(j)), in the input order.
    A NaN p-value (a test with nothing to test) counts as 1: it must not reorder the others (NaN compares
    false with everything, so sorting it would scramble the step-down).

    A part of the family bounds the whole from below: each p-value's Holm-adjusted value in the whole family is at
    least its Holm-adjusted value in any part that holds it. (Within the part, p_(j) has rank j; in the whole, rank
    j + (p-values of the rest below it) <= j + u, with u the rest's size, so its multiplier m - rank + 1 >= |part| -
    j + 1, and the whole's max runs over more terms.) A p-value whose adjusted value in a part exceeds alpha is not
    rejected by Holm at alpha, whatever the rest of the family holds."""
    p_values = [1.0 if math.isnan(p) else p for p in p_values]
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
