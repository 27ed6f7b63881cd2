"""Calibration (slow): on the correct decoder, the suite's p-values are uniform, so its false-positive
rate is what it claims. Cheap cases are re-run with many independent seed sets: law cases, and a
whole-sequence case whose pooled and per-position statistics (probability-ordered PIT, saddlepoint
log-likelihood) are each collected over the reruns."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from harness.checks.sampling_cases import PIT_LENGTH, case_grid, pit_test_names, run_law_case, run_pit_case
from harness.stats.uniformity import uniformity

pytestmark = [pytest.mark.sampling, pytest.mark.slow, pytest.mark.xdist_group("sampling")]

REPLICATES = 200
SAMPLES = 400
PIT_CALIBRATION_SEQUENCES = 64  # few sequences per rerun: the log-likelihood's skewed small-n tail is tested too
CALIBRATION_ALPHA = 1e-3


@pytest.mark.parametrize("case_id", ["T1.0-topk50-topp0.9-k2-sample-natural-02", "T0.7-nofilter-k2-greedy-natural-02"])
def test_p_values_are_uniform_on_the_correct_decoder(decoder, bundle, prompts, require, record_property, case_id):
    case = next(c for c in case_grid() if c.id == case_id)
    capabilities, values = case.needs()
    require(*capabilities, **values)
    prompt_ids = tuple(next(p for p in prompts if p.id == case.prompt_id).encode(bundle.tokenizer))
    chi2_p, g_p = [], []
    for replicate in range(REPLICATES):
        shifted = type(case)(
            f"{case.id}-calibration-{replicate}", case.prompt_id, case.sampling, case.k, case.draft_mode
        )
        outcome = run_law_case(decoder, bundle, prompt_ids, shifted, SAMPLES)
        chi2_p.append(outcome.fit.chi2_p)
        g_p.append(outcome.fit.g_p)
    for name, values in (("chi-square", np.array(chi2_p)), ("G", np.array(g_p))):
        test = uniformity(values, bins=10)
        rate = float(np.mean(values < 0.05))
        # the rate of p < 0.05 must be inside its exact binomial 99.9% interval under correctness
        low, high = stats.binom.ppf([CALIBRATION_ALPHA / 2, 1 - CALIBRATION_ALPHA / 2], REPLICATES, 0.05) / REPLICATES
        record_property(
            f"{name} calibration", f"KS p={test.ks_p:.3g}, P(p<0.05)={rate:.3f} (interval {low:.3f}..{high:.3f})"
        )
        assert test.ks_p > CALIBRATION_ALPHA, f"{name} p-values are not uniform: KS p={test.ks_p:.3g}, {test.histogram}"
        assert low <= rate <= high, f"{name}: {rate:.3f} of p-values below 0.05, expected within {low:.3f}..{high:.3f}"


def assert_uniform(name: str, values: np.ndarray, record_property) -> None:
    test = uniformity(values, bins=10)
    rate = float(np.mean(values < 0.05))
    # the rate of p < 0.05 must be inside its exact binomial 99.9% interval under correctness
    low, high = stats.binom.ppf([CALIBRATION_ALPHA / 2, 1 - CALIBRATION_ALPHA / 2], len(values), 0.05) / len(values)
    record_property(
        f"{name} calibration",
        f"{len(values)} p-values, KS p={test.ks_p:.3g}, P(p<0.05)={rate:.4f} (interval {low:.4f}..{high:.4f})",
    )
    assert test.ks_p > CALIBRATION_ALPHA, f"{name} p-values are not uniform: KS p={test.ks_p:.3g}, {test.histogram}"
    assert low <= rate <= high, f"{name}: {rate:.4f} of p-values below 0.05, expected within {low:.4f}..{high:.4f}"


def test_whole_sequence_p_values_are_uniform_on_the_correct_decoder(decoder, bundle, prompts, require, record_property):
    """Pooled KS, binned chi-square and log-likelihood over REPLICATES reruns; per-position KS and
    log-likelihood over REPLICATES x PIT_LENGTH (independent under correctness: a PIT value or a
    log-likelihood term is a fresh draw at every position given what came before)."""
    case = next(c for c in case_grid() if c.id == "pit-T1.0-k2-sample-natural-03")
    capabilities, values = case.needs()
    require(*capabilities, **values)
    prompt_ids = tuple(next(p for p in prompts if p.id == case.prompt_id).encode(bundle.tokenizer))
    names = pit_test_names()
    collected = np.array(
        [
            run_pit_case(
                decoder, bundle, prompt_ids, replace(case, id=f"{case.id}-calibration-{r}"), PIT_CALIBRATION_SEQUENCES
            ).p_values()
            for r in range(REPLICATES)
        ]
    )
    for index, name in enumerate(names[:3]):
        assert_uniform(f"pooled {name}", collected[:, index], record_property)
    assert_uniform("per-position KS", collected[:, 3 : 3 + PIT_LENGTH].ravel(), record_property)
    assert_uniform("per-position log-likelihood", collected[:, 3 + PIT_LENGTH :].ravel(), record_property)
