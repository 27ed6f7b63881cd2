"""MTP-assisted sampling must reproduce the target's distribution exactly. Each case samples N sequences
from the decoder under test (N from the power target) and tests them against the exact target law of
the first tokens (Pearson chi-square and G), or tests whole sequences with the randomized PIT (KS and
binned chi-square). All p-values of the run are Holm-corrected at FAMILY_ALPHA (5e-4: half of a run's false-alarm budget,
harness/stats/multiple_testing.py)."""

from __future__ import annotations

import pytest

from harness.checks.sampling_cases import case_grid

pytestmark = pytest.mark.sampling


@pytest.mark.parametrize("case", [c.id for c in case_grid()])
def test_samples_follow_the_target_law(case, check_sampling_case):
    check_sampling_case(case)
