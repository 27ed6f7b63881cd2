"""Calibration: on the correct decoder, the suite's p-values are uniform, so its false-positive rate is what it
claims. It calibrates the harness's statistics, so it runs when the decoder under test is the harness's own
(`mtp`) and skips, saying so, for any other.

- Law cases, re-run the budget's number of times with independent seeds (`calibration_reruns`: 60 at ci, what
  every commit runs; 200 at full). Each statistic's p-values must pass a KS test of uniformity at
  CALIBRATION_ALPHA and put their share below 0.05 inside its exact binomial 1 - CALIBRATION_ALPHA interval
  (harness/stats/calibration.py: the calibration's tests share one run's budget, CALIBRATION_RUN_ALPHA = 1e-3).
  With 60 reruns the KS test catches a p-value machinery whose law is off the uniform by a KS distance of 0.45
  with power 0.99 (a badly wrong one: a wrong degree of freedom, a one-sided p taken as two-sided); 200 reruns
  see 0.25 (detectable_ks_distance).
- A whole-sequence case, re-run the budget's `sequence_calibration_reruns` times with 64 sequences each (8 at ci,
  every commit; 200 at full: the nightly and `nox -s calibration`), its pooled and per-position statistics
  (probability-ordered PIT, saddlepoint log-likelihood) each collected over the reruns. At ci the per-position
  statistics pool 8 x 48 = 384 p-values each (a KS distance of 0.18 detected with power 0.99); the pooled ones
  have 8 and catch only a gross error (most p-values near 0). At full: 9,600 (0.04) and 200 (0.25).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from harness.checks.sampling_cases import PIT_LENGTH, case_grid, pit_test_names, run_law_case, run_pit_cases
from harness.contract.budget import BUDGETS
from harness.stats.calibration import calibration

pytestmark = pytest.mark.sampling

SAMPLES = 400
PIT_CALIBRATION_SEQUENCES = 64  # few sequences per rerun: the log-likelihood's skewed small-n tail is tested too


@pytest.fixture
def correct_decoder(run_options, decoder):
    """The decoder under test when it is the harness's own; a calibration of the harness's statistics needs it."""
    if run_options.decoder != "mtp":
        pytest.skip("calibrates the harness's statistics on its own decoder: runs with --harness-decoder mtp")
    return decoder


CALIBRATED = ("T1.0-topk50-topp0.9-k2-sample-natural-02", "T0.7-nofilter-k2-greedy-natural-02")
WHOLE_SEQUENCE_CASE = "pit-T1.0-k2-sample-natural-03"


@pytest.mark.parametrize("case_id", CALIBRATED)
def test_p_values_are_uniform_on_the_correct_decoder(
    run_options, correct_decoder, bundle, prompts, record_property, harness_seed, case_id
):
    case = next(c for c in case_grid() if c.id == case_id)
    prompt_ids = tuple(next(p for p in prompts if p.id == case.prompt_id).encode(bundle.tokenizer))
    reruns = BUDGETS[run_options.budget].calibration_reruns
    chi2_p, g_p = [], []
    for replicate in range(reruns):
        shifted = type(case)(
            f"{case.id}-calibration-{replicate}", case.prompt_id, case.sampling, case.k, case.draft_mode
        )
        outcome = run_law_case(correct_decoder, bundle, prompt_ids, shifted, SAMPLES, harness_seed)
        chi2_p.append(outcome.fit.chi2_p)
        g_p.append(outcome.fit.g_p)
    for name, values in (("chi-square", np.array(chi2_p)), ("G", np.array(g_p))):
        assert_uniform(name, values, record_property)


def assert_uniform(name: str, values: np.ndarray, record_property) -> None:
    verdict = calibration(values)
    record_property(f"{name} calibration", verdict.summary())
    assert not verdict.problems(name), "; ".join(verdict.problems(name))


def test_whole_sequence_p_values_are_uniform_on_the_correct_decoder(
    run_options, correct_decoder, bundle, prompts, record_property, harness_seed
):
    """Pooled KS, binned chi-square and log-likelihood over the budget's reruns; per-position KS and
    log-likelihood over reruns x PIT_LENGTH (independent under correctness: a PIT value or a
    log-likelihood term is a fresh draw at every position given what came before)."""
    case = next(c for c in case_grid() if c.id == WHOLE_SEQUENCE_CASE)
    count = BUDGETS[run_options.budget].sequence_calibration_reruns
    prompt_ids = tuple(next(p for p in prompts if p.id == case.prompt_id).encode(bundle.tokenizer))
    names = pit_test_names()
    reruns = [replace(case, id=f"{case.id}-calibration-{r}") for r in range(count)]
    outcomes = run_pit_cases(correct_decoder, bundle, prompt_ids, reruns, PIT_CALIBRATION_SEQUENCES, harness_seed)
    collected = np.array([outcome.p_values() for outcome in outcomes])
    for index, name in enumerate(names[:3]):
        assert_uniform(f"pooled {name}", collected[:, index], record_property)
    assert_uniform("per-position KS", collected[:, 3 : 3 + PIT_LENGTH].ravel(), record_property)
    assert_uniform("per-position log-likelihood", collected[:, 3 + PIT_LENGTH :].ravel(), record_property)
