"""The report's record of a first-tokens law case (schema 1, `sampling`, kind "law"), for the sampling suite's law
cases and the features suite's alike: the tests' raw and Holm-adjusted p-values, the distances and the cells."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.contract.records import SamplingRecord
from harness.stats.goodness_of_fit import IMPOSSIBLE, GoodnessOfFit
from harness.stats.multiple_testing import FAMILY_ALPHA
from harness.stats.target_law import OTHER


def cell_label(cell: tuple, decode: Callable[[list[int]], str]) -> str:
    """A continuation cell as text, token by token: 'the' · ' cat'; the pooled cell as <other>."""
    if cell == OTHER:
        return "<other: pooled small cells and pruned branches>"
    if cell == IMPOSSIBLE:
        return "<impossible: where the law has no mass>"
    return " · ".join(repr(decode([token])) for token in cell)


def row_label(label: object, fit: GoodnessOfFit, decode: Callable[[list[int]], str]) -> str:
    """A cells-table row's label; the impossible row names what was drawn there (most frequent first, with counts)."""
    if label != IMPOSSIBLE or not fit.impossible_seen:
        return cell_label(label, decode)
    drawn = ", ".join(f"{cell_label(cell, decode)} x{count}" for cell, count in fit.impossible_seen)
    more = fit.impossible - sum(count for _, count in fit.impossible_seen)
    return f"{cell_label(IMPOSSIBLE, decode)}: {drawn}" + (f" and {more} more" if more else "")


def law_record(
    case_id: str,
    fit: GoodnessOfFit,
    raw: Sequence[float],
    adjusted: Sequence[float],
    alpha_per_test: float,
    detectable_tv: float | None,
    adjustment: str,
    decode: Callable[[list[int]], str],
) -> SamplingRecord:
    """raw, adjusted: (chi-square, G)."""
    return {
        "case_id": case_id,
        "kind": "law",
        "n": fit.n,
        "cells": fit.cells,
        "family_size": round(FAMILY_ALPHA / alpha_per_test),
        "alpha_per_test": alpha_per_test,
        "family_alpha": FAMILY_ALPHA,
        "adjustment": adjustment,
        "p_values": [
            {"test": test, "raw": p, "holm": a} for test, p, a in zip(("chi-square", "G"), raw, adjusted, strict=True)
        ],
        "kl": fit.kl,
        "tv": fit.tv,
        "detectable_tv": detectable_tv,
        "cells_table": [
            {"label": row_label(label, fit, decode), "observed": observed, "expected": expected}
            for label, observed, expected in zip(fit.labels, fit.observed, fit.expected, strict=True)
        ],
        "pit_histogram": None,
        "rejected": min(adjusted) <= FAMILY_ALPHA,
    }
