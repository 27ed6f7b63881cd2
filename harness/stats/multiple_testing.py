"""The family of p-values of one run: its family-wise false-positive rate and the Holm step-down correction."""

from __future__ import annotations

import math
from collections.abc import Sequence

FAMILY_ALPHA = 1e-3  # family-wise false-positive rate of one run of the sampling suite (Holm)


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
