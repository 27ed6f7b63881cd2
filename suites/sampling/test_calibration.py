"""Calibration: on the correct decoder, the suite's p-values are uniform, so its false-positive rate is what it
claims. It calibrates the harness's statistics, so it runs when the decoder under test is the harness's own
(`mtp`) and skips, saying so, for any other.

- Law cases, re-run the budget's number of times with independent seeds (`calibration_reruns`: 60 at ci, what
  every commit runs; 200 at full). Each statistic's p-values must pass a KS test of uniformity at
  CALIBRATION_ALPHA and put their share below 0.05 inside its exact binomial 1 - CALIBRATION_ALPHA interval:
  false-alarm rate at most 2 x 1e-3 per statistic and case (8e-3 for the four). With 60 reruns the KS test
  catches a p-value machinery whose law is off the uniform by a KS distance of 0.40 with power 0.99 (a
  badly wrong one: a wrong degree of freedom, a one-sided p taken as two-sided); 200 reruns see 0.22.
- A whole-sequence case (slow: the nightly runs it), its pooled and per-position statistics (probability-ordered
  PIT, saddlepoint log-likelihood) each collected over 200 reruns.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from harness.checks.sampling_cases import PIT_LENGTH, case_grid, pit_test_names, run_law_case, run_pit_case
from harness.contract.budget import BUDGETS
from harness.stats.calibration import calibration

pytestmark = pytest.mark.sampling

REPLICATES = 200  # the whole-sequence calibration's reruns
SAMPLES = 400
PIT_CALIBRATION_SEQUENCES = 64  # few sequences per rerun: the log-likelihood's skewed small-n tail is tested too


@pytest.fixture
def correct_decoder(run_options, decoder):
    """The decoder under test when it is the harness's own; a calibration of the harness's statistics needs it."""
    if run_options.decoder != "mtp":
        pytest.skip("calibrates the harness's statistics on its own decoder: runs with --harness-decoder mtp")
    return decoder


@pytest.mark.parametrize("case_id", ["T1.0-topk50-topp0.9-k2-sample-natural-02", "T0.7-nofilter-k2-greedy-natural-02"])
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


@pytest.mark.slow
def test_whole_sequence_p_values_are_uniform_on_the_correct_decoder(
    correct_decoder, bundle, prompts, record_property, harness_seed
):
    """Pooled KS, binned chi-square and log-likelihood over REPLICATES reruns; per-position KS and
    log-likelihood over REPLICATES x PIT_LENGTH (independent under correctness: a PIT value or a
    log-likelihood term is a fresh draw at every position given what came before)."""
    case = next(c for c in case_grid() if c.id == "pit-T1.0-k2-sample-natural-03")
    prompt_ids = tuple(next(p for p in prompts if p.id == case.prompt_id).encode(bundle.tokenizer))
    names = pit_test_names()
    collected = np.array(
        [
            run_pit_case(
                correct_decoder,
                bundle,
                prompt_ids,
                replace(case, id=f"{case.id}-calibration-{r}"),
                PIT_CALIBRATION_SEQUENCES,
                harness_seed,
            ).p_values()
            for r in range(REPLICATES)
        ]
    )
    for index, name in enumerate(names[:3]):
        assert_uniform(f"pooled {name}", collected[:, index], record_property)
    assert_uniform("per-position KS", collected[:, 3 : 3 + PIT_LENGTH].ravel(), record_property)
    assert_uniform("per-position log-likelihood", collected[:, 3 + PIT_LENGTH :].ravel(), record_property)
