"""The efficiency yardsticks: the ideal sample sizes follow the textbook formulas, and the scan of growing
prefixes finds the first rejection of a stream drawn from a shifted law."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from harness.mutation.efficiency import first_rejection, ideal_sample_sizes, prefix_lengths


def test_the_likelihood_ratio_ideal_matches_the_two_point_formula():
    # two cells: the LLR test is the binomial test of cell 0; N = (z sd_p(l) / (E_r l - E_p l))^2
    p, r, alpha = np.array([0.5, 0.5]), np.array([0.6, 0.4]), 1e-3
    n_lr, n_chi2 = ideal_sample_sizes(p, r, 10**9, alpha)
    z = stats.norm.ppf(1 - alpha)
    # l takes log(1.2) and log(0.8) with probability 1/2 each under p
    spread = (math.log(1.2) - math.log(0.8)) / 2
    separation = 0.1 * (math.log(1.2) - math.log(0.8))
    assert n_lr == math.ceil((z * spread / separation) ** 2)
    # the omnibus chi-square (two-sided) needs more samples than the one-sided likelihood-ratio test
    assert n_chi2 > n_lr


def test_no_shift_needs_no_finite_sample():
    p = np.array([0.25, 0.25, 0.5])
    n_lr, n_chi2 = ideal_sample_sizes(p, p.copy(), 10**6, 1e-3)
    assert n_lr >= 10**12 and n_chi2 >= 10**12


def test_the_scan_finds_the_first_rejection_of_a_shifted_stream():
    rng = np.random.default_rng(7)
    law = {("a",): 0.5, ("b",): 0.3, ("<other>",): 0.2}
    shifted = rng.choice(3, size=4000, p=[0.6, 0.2, 0.2])
    samples = [list(law)[i] for i in shifted]
    first = first_rejection(law, samples, 1e-3 / 46)
    assert first is not None and first in prefix_lengths(4000) and 50 <= first < 4000
    exact = [list(law)[i] for i in rng.choice(3, size=4000, p=[0.5, 0.3, 0.2])]
    assert first_rejection(law, exact, 1e-3 / 46) is None


def test_a_shift_one_sample_exposes_needs_one_sample():
    p, r = np.array([0.98, 0.01, 0.01]), np.array([0.01, 0.01, 0.98])
    n_lr, n_chi2 = ideal_sample_sizes(p, r, 10**6, 0.05)
    assert n_chi2 == 1 and n_lr <= 3
