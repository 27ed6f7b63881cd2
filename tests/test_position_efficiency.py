"""Efficiency of a whole-sequence case on a position-confined mutant (harness/mutation/position_efficiency.py): the
scan finds the first prefix of sequences that rejects, the ideal test looks at the position the mutant
shifts, and both are in sequences."""

from __future__ import annotations

import pytest

from harness.checks.sampling_cases import PIT_LENGTH, case_grid, family_size
from harness.models.loading import bundle_for
from harness.mutation.position_efficiency import measure_position

pytestmark = pytest.mark.xdist_group("position-efficiency")


def test_the_last_token_mutant_is_measured_at_the_last_position():
    bundle = bundle_for("tiny-deepseek-v3", "cpu", "float64")
    result = measure_position(
        "truncated-run-ends-in-a-correction", "pit-T1.0-k4-greedy-natural-03", bundle, family_size(case_grid()), 300
    )
    assert result.position == PIT_LENGTH - 1, "the ideal test looks where the mutant is wrong"
    assert all(first is not None and first <= 300 for first in result.streams), result
    assert result.ideal_lr_n >= 1 and result.ideal_chi2_n >= 1, result
    assert result.ratio == result.first_rejection_n / max(result.ideal_lr_n, 50)
