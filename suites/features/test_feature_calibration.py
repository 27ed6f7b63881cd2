"""Calibration of the features suite's law tests: on the correct decoder their p-values are uniform, so the false
positive rate is what the suite claims. Two law cases (a penalty, whose law reads the first token, and min_tokens
with a forced EOS run) re-run the budget's `calibration_reruns` times (60 at ci) with independent seeds and
SAMPLES samples each; each statistic's p-values must pass a KS test of uniformity at CALIBRATION_ALPHA and put their
share below 0.05 inside its exact binomial 1 - CALIBRATION_ALPHA interval (harness/stats/calibration.py). Runs
when the decoder under test is the harness's own (`mtp`), and skips, saying so, for any other."""

from __future__ import annotations

import numpy as np
import pytest

from harness.checks.feature_laws import case_request, law_cases, run_law_case, seed_of
from harness.contract.budget import BUDGETS
from harness.contract.seeds import session_shifted
from harness.stats.calibration import calibration
from harness.stats.power import law_df_at, smallest_testable_n
from harness.stats.target_law import OTHER, TargetLaw

pytestmark = pytest.mark.features

SAMPLES = 400
CALIBRATED = (
    "law-T1.0-repetition-1.5-k2-sample-repetitive-01",
    "law-T1.0-min-tokens-2-forced-eos-k2-greedy-natural-02",
)


def samples_for(law: TargetLaw) -> int:
    """SAMPLES, or more where the law pools to one cell at SAMPLES (a flat law: nothing to test, p-values NaN): the
    smallest N at which it pools to two (harness/stats/power.py smallest_testable_n)."""
    return smallest_testable_n(SAMPLES, law_df_at({**law.cells, OTHER: law.other}, OTHER))


@pytest.mark.parametrize("case_id", CALIBRATED)
def test_law_p_values_are_uniform_on_the_correct_decoder(
    run_options, decoder, bundle, feature_truth, record_property, harness_seed, case_id
):
    if run_options.decoder != "mtp":
        pytest.skip("calibrates the harness's statistics on its own decoder: runs with --harness-decoder mtp")
    case = next(c for c in law_cases() if c.id == case_id)
    request = case_request(
        case, feature_truth.prompt_ids(case.prompt_id), feature_truth.plain_output(case.prompt_id), bundle.eos_token_ids
    )
    reruns = BUDGETS[run_options.budget].calibration_reruns
    chi2_p, g_p = [], []
    for rerun in range(reruns):
        seed = session_shifted(seed_of(f"{case_id}-calibration-{rerun}"), harness_seed)
        outcome = run_law_case(decoder, bundle, request, case_id, samples_for, seed)
        chi2_p.append(outcome.fit.chi2_p)
        g_p.append(outcome.fit.g_p)
    for name, values in (("chi-square", np.array(chi2_p)), ("G", np.array(g_p))):
        verdict = calibration(values)
        record_property(f"{name} calibration", verdict.summary())
        assert not verdict.problems(name), "; ".join(verdict.problems(name))
