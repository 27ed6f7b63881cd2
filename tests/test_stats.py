"""harness/stats/: edge cases (a NaN among the p-values, an output position no sequence reached) and every
statistic against an independent computation: chi-square and G by hand, Cochran pooling, Holm against the
step-down procedure, KS and the binned uniformity test, the saddlepoint p-value against the exact law of a
skewed sum, and the sample-size formulas against the exact binomial and KS laws."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, stats

from harness.stats.goodness_of_fit import goodness_of_fit, pool_cells
from harness.stats.multiple_testing import holm
from harness.stats.power import POWER, ks_sample_size, min_detectable_tv, sample_size
from harness.stats.sequence import SADDLE_GRID, cumulants, position_tests, saddlepoint_p
from harness.stats.uniformity import uniformity


def test_samples_where_the_law_has_no_mass_reject_it_with_certainty():
    """A one-cell law with 30% of the samples outside it: before, the pooled zero-mass cell was dropped with its
    observations (p NaN, TV 0, which Holm counts as 1); now they are impossible under the law."""
    fit = goodness_of_fit({"a": 1.0, "other": 0.0}, ["a"] * 70 + ["b"] * 30, "other")
    assert (fit.chi2_p, fit.g_p, fit.impossible) == (0.0, 0.0, 30) and fit.tv == pytest.approx(0.3)
    assert fit.labels[-1] == "impossible" and fit.observed[-1] == 30 and fit.expected[-1] == 0.0
    assert fit.impossible_seen == (("b", 30),), "the report names what was drawn where the law has no mass"
    in_a_zero_cell = goodness_of_fit({"a": 0.5, "b": 0.5, "z": 0.0}, ["a"] * 50 + ["b"] * 49 + ["z"], "other")
    assert in_a_zero_cell.chi2_p == 0.0 and in_a_zero_cell.impossible == 1
    assert in_a_zero_cell.impossible_seen == (("z", 1),)
    pruned = goodness_of_fit({"a": 0.5, "b": 0.4}, ["a"] * 50 + ["b"] * 40 + ["y"] * 10, "other")
    assert pruned.impossible == 0 and pruned.chi2_p > 0.5, "outside the cells, the law's pruned mass takes them"


def test_a_law_of_one_cell_after_pooling_is_unjudgeable_never_a_pass():
    fit = goodness_of_fit({"a": 1.0, "other": 0.0}, ["a"] * 100, "other")
    assert fit.unjudgeable and "no degree of freedom" in fit.unjudgeable
    assert math.isnan(fit.chi2_p) and math.isnan(fit.g_p) and fit.df == 0
    assert goodness_of_fit({"a": 0.5, "b": 0.5}, ["a"] * 50 + ["b"] * 50, "other").unjudgeable is None


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


# --- the statistics against independent computations --------------------------------------------------------


def test_chi_square_and_g_equal_their_formulas_on_a_small_table():
    """Pearson X^2 = sum (o - e)^2 / e and G = 2 sum o ln(o / e) over cells, p from the chi-square law with
    cells - 1 degrees of freedom: computed by hand here, by scipy in the harness."""
    law = {"a": 0.5, "b": 0.3, "c": 0.2}
    samples = ["a"] * 40 + ["b"] * 35 + ["c"] * 25
    fit = goodness_of_fit(law, samples, pooled_label="<other>")
    observed, expected = np.array([40, 35, 25]), np.array([50.0, 30.0, 20.0])
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    g = float(2 * (observed * np.log(observed / expected)).sum())
    assert fit.df == 2 and math.isclose(fit.chi2, chi2) and math.isclose(fit.g, g)
    assert math.isclose(fit.chi2_p, math.exp(-chi2 / 2))  # the chi-square(2) survival function is exp(-x / 2)
    assert math.isclose(fit.g_p, math.exp(-g / 2))
    assert math.isclose(fit.tv, 0.1) and math.isclose(
        fit.kl, float((observed / 100 * np.log(observed / expected)).sum())
    )


def test_cells_expected_below_five_are_pooled_with_their_observations():
    law = {"a": 0.9, "b": 0.06, "c": 0.02, "d": 0.02}
    samples = ["a"] * 90 + ["b"] * 6 + ["c"] * 3 + ["d"] + ["stray"]  # "stray": a sample outside the known cells
    labels, counts, expected = pool_cells(law, Counter(samples), 101, "<other>")
    # c and d (expected 2.02 each) pool to 4.04 < 5, so the pool also takes the smallest other cell, b (6.06)
    assert labels == ["a", "<other>"] and counts.tolist() == [90, 11] and np.allclose(expected, [90.9, 10.1])


@given(st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=12), st.floats(1e-4, 0.2))
def test_holm_rejects_exactly_what_the_step_down_procedure_rejects(p_values, alpha):
    """Holm's procedure: sort ascending, reject while p_(j) <= alpha / (m - j + 1) (1-based), stop at the first
    that is not; the adjusted p-values must reject exactly that set at alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    rejected = set()
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (m - rank):
            break
        rejected.add(index)
    assert {i for i, p in enumerate(holm(p_values)) if p <= alpha} == rejected


@given(
    st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=10),
    st.lists(st.floats(0.0, 1.0, allow_nan=False), max_size=10),
)
def test_a_part_of_the_family_bounds_its_holm_adjusted_p_values_from_below(part, rest):
    """What the sampling suite's early decisions rest on (suites/sampling/conftest.py): a p-value whose Holm-adjusted
    value within a part of the family exceeds alpha is not rejected in the whole family, whatever the rest holds."""
    whole = holm(part + rest)[: len(part)]
    assert all(w >= p for w, p in zip(whole, holm(part), strict=True))


def test_uniformity_equals_scipys_ks_and_a_binned_chi_square_by_hand():
    u = np.random.default_rng(3).uniform(size=200)
    test = uniformity(u, bins=10)
    histogram = np.histogram(u, bins=10, range=(0, 1))[0]
    assert math.isclose(test.ks_p, stats.kstest(u, "uniform").pvalue)
    assert list(test.histogram) == histogram.tolist()
    assert math.isclose(test.chi2, float(((histogram - 20.0) ** 2 / 20.0).sum()))


def exact_law(probs: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact law of the sum of n i.i.d. (log p(x) - mu), x ~ p: its support (sorted) and cumulative
    probabilities, by convolving the one-token law n times."""
    mean = float((probs * np.log(probs)).sum())
    law = {0.0: 1.0}
    for _ in range(n):
        step: dict[float, float] = {}
        for value, weight in law.items():
            for p in probs:
                key = round(value + math.log(p) - mean, 9)
                step[key] = step.get(key, 0.0) + weight * p
        law = step
    support = sorted(law)
    return np.array(support), np.cumsum([law[value] for value in support])


def lower_tail_ratios(probs: np.ndarray, n: int) -> list[float]:
    """saddlepoint P(S <= s) / exact P(S <= s) at the sums s whose exact tail is nearest below 1e-5 ... 0.05."""
    support, cumulative = exact_law(probs, n)
    table = cumulants(torch.tensor(probs).expand(n, -1)).sum(0).numpy()
    ratios = []
    for quantile in (1e-5, 1e-4, 1e-3, 1e-2, 0.05):
        at = int(np.searchsorted(cumulative, quantile, side="right")) - 1
        one_sided = saddlepoint_p(float(support[at]), table) / 2  # the harness's p is 2 min(upper, lower)
        ratios.append(one_sided / float(cumulative[at]))
    return ratios


def test_the_saddlepoint_p_value_matches_the_exact_law_of_a_skewed_sum():
    """30 draws from a skewed five-token law (a normal approximation is off by orders of magnitude in its lower
    tail): the saddlepoint's lower-tail probability is within 5% of the exact one from 1e-5 to 0.05."""
    ratios = lower_tail_ratios(np.array([0.8, 0.1, 0.05, 0.03, 0.02]), 30)
    assert all(abs(ratio - 1) <= 0.05 for ratio in ratios), ratios


@pytest.mark.parametrize(("probs", "n"), [([0.91, 0.05, 0.03, 0.01], 12), ([0.6, 0.25, 0.1, 0.05], 20)])
def test_the_saddlepoint_p_value_is_never_much_smaller_than_the_exact_one(probs, n):
    """Few draws of a very discrete law, with sums whose saddlepoint lies beyond the tabulated grid (where the
    Chernoff bound takes over): the p-value may be conservative (larger), never more than 20% too small, which
    is the direction that would raise the false-positive rate."""
    ratios = lower_tail_ratios(np.array(probs), n)
    assert min(ratios) >= 0.8, ratios


def exact_lugannani_rice(log_p: torch.Tensor, probs: torch.Tensor, repeats: int, total: float) -> float:
    """The two-sided Lugannani-Rice p-value from K, K', K'' computed exactly in float64 at the saddlepoint (no
    table, no interpolation), for `repeats` copies of each context's law."""

    def moments(s: float) -> tuple[float, float, float]:
        exponent = (1 + s) * log_p
        log_total = torch.logsumexp(exponent, -1)
        tilted = torch.exp(exponent - log_total[:, None])
        mean = (probs * log_p).sum(-1)
        first = (tilted * log_p).sum(-1)
        second = (tilted * log_p * log_p).sum(-1) - first * first
        return tuple(float(x.sum()) * repeats for x in (log_total - s * mean, first - mean, second))

    s_hat = optimize.brentq(lambda s: moments(s)[1] - total, -0.5, 0.5)
    k, _, k2 = moments(s_hat)
    w = math.copysign(math.sqrt(2 * (s_hat * total - k)), s_hat)
    upper = stats.norm.sf(w) + stats.norm.pdf(w) * (1 / (s_hat * math.sqrt(k2)) - 1 / w)
    return 2 * min(upper, 1 - upper)


@pytest.mark.parametrize("z", [0.12, 0.156, 0.2, 0.5, 1.0, 1.9, -0.12, -1.5, -3.0, 3.0])
def test_near_the_mean_a_sum_of_many_heavy_tailed_terms_gets_the_saddlepoint_p_value(z):
    """65,000 terms of peaked laws (one token at 0.99, the rest spread over 1,023 tokens with log p near -15). Each
    context's float32 K is off by ~1e-7; summed, that exceeded K(s_hat) near the mean, and the p-value was anything
    in [0, 1] (0.08 for 0.93 at Z = 0.12; 0 on llama.cpp's samples of tiny-glm4-moe at Z = 0.16). With K(0) =
    K'(0) = 0 made exact, the tabulated p-value is within 3% of the saddlepoint computed exactly in float64."""
    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(64, 1024, generator=generator, dtype=torch.float64) * 4.0, dim=-1) * 0.01
    probs[:, 0] += 0.99
    repeats = 65_000 // 64
    table = cumulants(probs).sum(0).numpy() * repeats
    total = z * math.sqrt(float(np.interp(0.0, SADDLE_GRID.numpy(), table[:, 2])))
    exact = exact_lugannani_rice(torch.log(probs), probs, repeats, total)
    assert saddlepoint_p(total, table) == pytest.approx(exact, rel=0.03)


def test_the_sample_size_reaches_its_power_on_the_exact_binomial():
    """N = ceil((z_{1-alpha} + z_power)^2 / (4 delta^2)) for one event at p = 1/2 shifted by delta: the exact
    binomial test at that N has power within a point of the target."""
    for tv, alpha in ((0.05, 1e-3 / 337), (0.1, 1e-3), (0.02, 1e-5)):
        n = sample_size(tv, alpha)
        critical = stats.binom.isf(alpha, n, 0.5)  # reject when the count exceeds this
        power = float(stats.binom.sf(critical, n, 0.5 + tv))
        assert power >= POWER - 0.01, (tv, alpha, n, power)


def test_the_ks_sample_size_reaches_its_power_on_the_exact_ks_law():
    """N from ks_sample_size: a law of u whose CDF is delta above the uniform's at 1/2 is rejected by the KS test
    at alpha with at least the target power. Lower bound: D >= |F_N(1/2) - 1/2|, F_N(1/2) binomial, and the
    exact KS critical value (scipy's kstwo)."""
    for tv, alpha in ((0.1, 1e-3 / 337), (0.2, 1e-3), (0.05, 1e-5)):
        n = ks_sample_size(tv, alpha)
        critical = stats.kstwo.isf(alpha, n)
        below, above = math.floor(n * (0.5 - critical)), math.ceil(n * (0.5 + critical))
        power = float(stats.binom.cdf(below, n, 0.5 + tv) + stats.binom.sf(above - 1, n, 0.5 + tv))
        assert power >= POWER - 0.005, (tv, alpha, n, power)


def test_the_detectable_tv_is_where_the_noncentral_chi_square_reaches_the_power():
    delta = min_detectable_tv(4700, 9, 1e-3 / 337)
    critical = stats.chi2.isf(1e-3 / 337, 9)
    assert math.isclose(stats.ncx2.sf(critical, 9, 4 * 4700 * delta**2), POWER, rel_tol=1e-6)
    assert min_detectable_tv(4 * 4700, 9, 1e-3 / 337) < delta  # more samples see a smaller shift
