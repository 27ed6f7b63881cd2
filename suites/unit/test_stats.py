"""harness/stats.py and harness/stats/sequence.py edge cases: Holm's step-down, a NaN among the p-values,
an output position no sequence reached."""

from __future__ import annotations

import math

import numpy as np

from harness.stats.multiple_testing import holm
from harness.stats.sequence import SADDLE_GRID, position_tests


def test_holm_adjusts_step_down_in_the_input_order():
    # sorted 0.01, 0.02, 0.04 with m = 3: 0.03, max(0.03, 0.04), max(0.04, 0.04)
    assert holm([0.04, 0.01, 0.02]) == [0.04, 0.03, 0.04]


def test_a_nan_p_value_counts_as_1_and_leaves_the_others_adjusted():
    """A NaN sorted first made every later adjusted p-value 1 (min(1.0, nan) is 1.0): a vLLM run whose
    sequences all ended before some position hid a raw p of 0 behind a Holm p of 1."""
    adjusted = holm([math.nan, 0.0, 1e-9, 0.5])
    assert adjusted[1] == 0.0 and math.isclose(adjusted[2], 3e-9) and adjusted[0] == 1.0


def test_a_position_no_sequence_reached_has_p_1():
    empty = np.array([])
    tests = position_tests(empty, empty, empty, np.zeros((len(SADDLE_GRID), 3)))
    assert tests.n == 0 and tests.ks_p == 1.0 and tests.z_p == 1.0
